"""Shipping the compiled artifacts: :func:`save_artifacts` and :func:`load_artifacts`.

torch's ``torch.compiler.save_cache_artifacts()`` gathers what this process's compiles put in
Inductor's caches (the generated code of each graph, AOT autograd's forward and backward,
autotuning results) as one blob; ``load_cache_artifacts`` puts them back in another process,
whose compiles of the same graphs then hit the caches instead of generating and compiling
code. sapwood's compiles go through those caches (see :mod:`.compile_cache`), so the same
blob serves them.

Loading that blob unpickles it: code could run. So a file is loaded only if it would be safe
to run:

* a regular file (no symbolic link) owned by this user, writable by nobody else, in a folder
  nobody else can write to (or a sticky one such as ``/tmp``, where others cannot replace it);
* sapwood's header, a SHA-256 of the blob that matches, and the torch and Python versions it
  was saved with equal to this process's (a blob from another torch may not load, or load
  something else).

A file that fails any check is not loaded: :func:`load_artifacts` warns
(:class:`ArtifactsWarning`) with the reason and returns ``False``; the compiles then work as
without it. Nothing raises but a bad argument.

The file is written with mode 0600, to a temporary name then renamed, so a reader never sees
half a file.

File layout: a first line ``sapwood-artifacts 1``, a second line of JSON (``torch``,
``python``, ``sha256``, ``size``), then the blob.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import warnings
from pathlib import Path

import torch

__all__ = ["ArtifactsWarning", "load_artifacts", "save_artifacts"]

_MAGIC = b"sapwood-artifacts 1\n"
_MAX_HEADER = 4096


class ArtifactsWarning(UserWarning):
    """An artifacts file was not loaded (the reason is in the message)."""


def _versions() -> dict[str, str]:
    return {"torch": str(torch.__version__), "python": sys.version.split()[0]}


def save_artifacts(path: str | os.PathLike[str]) -> bool:
    """Write what this process's compiles put in Inductor's caches to ``path`` (mode 0600);
    ``False`` (nothing written) when there is nothing to save."""
    target = Path(path)
    saved = torch.compiler.save_cache_artifacts()
    if saved is None or not saved[0]:
        return False
    blob = saved[0]
    header = {**_versions(), "sha256": hashlib.sha256(blob).hexdigest(), "size": len(blob)}
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(_MAGIC)
            out.write(json.dumps(header, sort_keys=True).encode() + b"\n")
            out.write(blob)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return True


def load_artifacts(path: str | os.PathLike[str]) -> bool:
    """Load the artifacts :func:`save_artifacts` wrote to ``path``, after the checks of the
    module docstring; ``True`` if they were loaded, else ``False`` with an
    :class:`ArtifactsWarning` saying why."""
    target = Path(path)
    problem = _unsafe(target)
    blob = None
    if problem is None:
        try:
            with open(target, "rb") as stream:
                blob, problem = _read(stream.read())
        except OSError as exc:
            problem = f"it cannot be read ({exc})"
    if problem is None and blob is not None:
        try:
            torch.compiler.load_cache_artifacts(blob)
        except Exception as exc:  # (checked and still refused by torch: say so, go on)
            problem = f"torch could not load it ({type(exc).__name__}: {exc})"
    if problem is not None:
        warnings.warn(
            f"sapwood: {target} was not loaded: {problem}; compiles work without it",
            ArtifactsWarning,
            stacklevel=2,
        )
        return False
    return True


def _unsafe(target: Path) -> str | None:
    """Why ``target`` must not be loaded (its place and ownership), or None."""
    try:
        st = os.lstat(target)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file (a link, a folder or a device)"
    uid = os.getuid()
    if st.st_uid != uid:
        return f"it belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"others may write to it (mode {stat.filemode(st.st_mode)})"
    folder = os.stat(target.parent)
    if folder.st_uid not in (uid, 0):
        return f"its folder belongs to another user (uid {folder.st_uid})"
    if folder.st_mode & 0o022 and not folder.st_mode & stat.S_ISVTX:
        return f"others may replace it: its folder is writable by them ({stat.filemode(folder.st_mode)})"
    return None


def _read(data: bytes) -> tuple[bytes | None, str | None]:
    """The blob of a file's ``data``, or why it is refused."""
    if not data.startswith(_MAGIC):
        return None, "it is not a sapwood artifacts file"
    rest = data[len(_MAGIC) :]
    end = rest.find(b"\n", 0, _MAX_HEADER)
    if end < 0:
        return None, "its header is damaged"
    try:
        header = json.loads(rest[:end])
    except ValueError:
        return None, "its header is damaged"
    if not isinstance(header, dict):
        return None, "its header is damaged"
    blob = rest[end + 1 :]
    if header.get("size") != len(blob):
        return None, f"it is truncated or damaged ({len(blob)} bytes of {header.get('size')})"
    if header.get("sha256") != hashlib.sha256(blob).hexdigest():
        return None, "its checksum does not match (damaged or altered)"
    for key, ours in _versions().items():
        if header.get(key) != ours:
            return None, f"it was saved with {key} {header.get(key)}, this process runs {ours}"
    return blob, None
