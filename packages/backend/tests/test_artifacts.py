"""``save_artifacts`` / ``load_artifacts``: a file is loaded only when it is safe to unpickle
and intact; every refusal is a warning and ``False``, never an exception. torch's own
save/load are stood in for here (the real round trip, with Inductor, is in
``integration-tests/cpu/test_artifacts_warm_start.py``)."""

from __future__ import annotations

import os
import pathlib
import stat

import pytest
import torch

import sapwood_backend
from sapwood_backend import ArtifactsWarning, artifacts

BLOB = b"\x80\x04compiled-artifacts" * 50


@pytest.fixture
def loaded(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    calls: list[bytes] = []
    monkeypatch.setattr(torch.compiler, "save_cache_artifacts", lambda: (BLOB, None))
    monkeypatch.setattr(torch.compiler, "load_cache_artifacts", calls.append)
    return calls


@pytest.fixture
def saved(tmp_path, loaded) -> os.PathLike[str]:
    folder = tmp_path / "artifacts"
    folder.mkdir(mode=0o700)
    path = folder / "model.artifacts"
    assert sapwood_backend.save_artifacts(path) is True
    return path


def _refused(path, reason: str) -> None:
    with pytest.warns(ArtifactsWarning, match=reason):
        assert sapwood_backend.load_artifacts(path) is False


def test_a_saved_file_is_private_and_loads_back(saved, loaded) -> None:
    assert stat.S_IMODE(os.stat(saved).st_mode) == 0o600
    assert not [p for p in os.listdir(os.path.dirname(saved)) if p.endswith(".tmp")]
    assert sapwood_backend.load_artifacts(saved) is True
    assert loaded == [BLOB]


def test_nothing_to_save_writes_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(torch.compiler, "save_cache_artifacts", lambda: None)
    assert sapwood_backend.save_artifacts(tmp_path / "none") is False
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda data: data[:-7], "truncated"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "checksum"),
        (lambda data: b"#" + data[1:], "not a sapwood artifacts file"),
        (lambda data: data.replace(b'"sha256"', b'"sha2', 1), "header"),
        (lambda data: data[:30], "header|truncated"),
        (lambda data: b"", "not a sapwood artifacts file"),
    ],
)
def test_a_damaged_file_is_refused(saved, loaded, damage, reason) -> None:
    data = pathlib.Path(saved).read_bytes()
    with open(saved, "wb") as out:
        out.write(damage(data))
    _refused(saved, reason)
    assert loaded == []


def test_a_file_from_another_torch_is_refused(tmp_path, loaded, monkeypatch) -> None:
    monkeypatch.setattr(artifacts, "_versions", lambda: {"torch": "2.0.0", "python": "3.11.0"})
    path = tmp_path / "old.artifacts"
    sapwood_backend.save_artifacts(path)
    monkeypatch.undo()
    monkeypatch.setattr(torch.compiler, "load_cache_artifacts", loaded.append)
    _refused(path, "saved with torch 2.0.0")
    assert loaded == []


def test_a_file_others_may_write_is_refused(saved, loaded) -> None:
    os.chmod(saved, 0o666)
    _refused(saved, "others may write to it")


def test_a_file_in_a_folder_others_may_write_is_refused(saved, loaded) -> None:
    os.chmod(os.path.dirname(saved), 0o777)
    _refused(saved, "folder is writable by them")
    os.chmod(os.path.dirname(saved), 0o1777)  # sticky, as /tmp: others cannot replace it
    assert sapwood_backend.load_artifacts(saved) is True


def test_a_file_of_another_user_is_refused(saved, loaded, monkeypatch) -> None:
    real = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real + 1)
    _refused(saved, "belongs to another user")


def test_a_link_is_refused(saved, loaded, tmp_path) -> None:
    link = tmp_path / "link.artifacts"
    link.symlink_to(saved)
    _refused(link, "not a regular file")


def test_a_missing_file_and_torchs_own_refusal_are_warnings(saved, monkeypatch, tmp_path) -> None:
    _refused(tmp_path / "absent", "cannot be read")

    def refuse(blob: bytes) -> None:
        raise RuntimeError("unknown artifact kind")

    monkeypatch.setattr(torch.compiler, "load_cache_artifacts", refuse)
    _refused(saved, "torch could not load it")
