"""What the tracer did, for ``explain()`` and for the logs.

Topics: ``graph_breaks``, ``recompiles``, ``guards``, ``bytecode`` (the generated entry and
resume code), ``graphs`` (the FX graph of each capture), ``compile`` (a line as each capture
starts tracing, calls its backend and ends, with the seconds of each stage; torch's ``dynamo``
log at INFO turns it on too). They are on where any of these says
so: ``SAPWOOD_LOGS`` (a comma-separated list, or ``all``, read at import), :func:`set_logs`
from code, or torch's own logging switches for the same artifacts (``TORCH_LOGS=recompiles``,
``torch._logging.set_logs(graph_breaks=True)``; torch's ``graph_code`` and ``graph`` are
``graphs``). Messages go to the ``sapwood`` logger (``sapwood.<topic>``), which gets a stderr
handler once a topic is on.

Invariant: recording is cheap when nobody listens: a few lookups per capture, recompile or
skip (all rare); nothing here runs on the per-call path.
"""

from __future__ import annotations

import dis
import inspect
import io
import logging
import os
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cache import CacheEntry

__all__ = [
    "TOPICS",
    "backend_called",
    "captured",
    "compile_times",
    "describe_times",
    "enabled_topics",
    "listen",
    "recompile",
    "set_logs",
    "skipped",
    "tracing",
]

TOPICS = ("graph_breaks", "recompiles", "guards", "bytecode", "graphs", "compile")

_listeners: list[Callable[[str, dict[str, Any]], None]] = []
_logger = logging.getLogger("sapwood")


def _parse(text: str) -> frozenset[str]:
    names = {part.strip() for part in text.split(",") if part.strip()}
    if "all" in names:
        return frozenset(TOPICS)
    unknown = names - set(TOPICS)
    if unknown:
        _logger.warning(
            "SAPWOOD_LOGS: unknown topic(s) %s; known: %s, all",
            ", ".join(sorted(unknown)),
            ", ".join(TOPICS),
        )
    return frozenset(names & set(TOPICS))


def _ensure_handler() -> None:
    if not _logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        _logger.addHandler(handler)
    if _logger.level == logging.NOTSET or _logger.level > logging.INFO:
        _logger.setLevel(logging.INFO)


_topics = _parse(os.environ.get("SAPWOOD_LOGS", ""))
if _topics:
    _ensure_handler()

#: torch's logging artifacts that name one of the topics
_TORCH_ARTIFACTS = {
    "graph_breaks": "graph_breaks",
    "recompiles": "recompiles",
    "guards": "guards",
    "bytecode": "bytecode",
    "graph_code": "graphs",
    "graph": "graphs",
}


def set_logs(
    *,
    graph_breaks: bool = False,
    recompiles: bool = False,
    guards: bool = False,
    bytecode: bool = False,
    graphs: bool = False,
    compile: bool = False,
    all: bool = False,  # (torch's set_logs spells it so)
) -> None:
    """Switch sapwood's log topics from code, as ``torch._logging.set_logs`` does torch's:
    the topics passed ``True`` are on, every other one off (``set_logs()`` turns them all
    off, ``SAPWOOD_LOGS``'s included; torch's own switches still apply)."""
    global _topics
    given = {
        "graph_breaks": graph_breaks,
        "recompiles": recompiles,
        "guards": guards,
        "bytecode": bytecode,
        "graphs": graphs,
        "compile": compile,
    }
    for name, flag in [*given.items(), ("all", all)]:
        if type(flag) is not bool:
            raise TypeError(f"set_logs({name}=...) takes True or False, not {flag!r}")
    _topics = frozenset(TOPICS) if all else frozenset(n for n, on in given.items() if on)
    if _topics:
        _ensure_handler()


def _torch_topics() -> frozenset[str]:
    """The topics torch's logging switches turned on (``TORCH_LOGS``, its ``set_logs``)."""
    internal = sys.modules.get("torch._logging._internal")
    state = getattr(internal, "log_state", None)
    if state is None:
        return frozenset()
    try:
        found = frozenset(
            ours for theirs, ours in _TORCH_ARTIFACTS.items() if state.is_artifact_enabled(theirs)
        )
        levels = dict(state.get_log_level_pairs())
        if levels.get("torch._dynamo", logging.WARNING) <= logging.INFO:
            found |= {"compile"}  # (TORCH_LOGS=dynamo: torch's own compile steps)
    except Exception:  # (torch's internals changed: its switches are not read)
        return frozenset()
    if found:
        _ensure_handler()
    return found


def enabled_topics() -> frozenset[str]:
    return _topics | _torch_topics()


def listen(callback: Callable[[str, dict[str, Any]], None]) -> Callable[[], None]:
    """Call ``callback(kind, data)`` for every event until the returned function is called."""
    _listeners.append(callback)
    return lambda: _listeners.remove(callback)


def _emit(kind: str, data: dict[str, Any]) -> None:
    for callback in list(_listeners):
        callback(kind, data)


def _where(code: types.CodeType, entry: CacheEntry | None = None) -> str:
    named = f" [{entry.region_name}]" if entry is not None and entry.region_name else ""
    return f"{code.co_qualname}{named} ({code.co_filename}:{code.co_firstlineno})"


#: seconds per compile stage, summed over every capture of the process (:func:`compile_times`)
_totals: dict[str, float] = {}
STAGE_NAMES = {
    "trace": "trace",
    "backend": "backend",
    "aot_autograd": "AOT autograd",
    "inductor": "Inductor",
    "entry": "guards and entry code",
}


def compile_times() -> dict[str, float]:
    """Seconds spent compiling so far in this process, by stage: ``trace`` (the symbolic run),
    ``backend`` (the backend's whole compile, of which ``aot_autograd`` and ``inductor``
    where the backend says), ``entry`` (guards and the generated entry code) and ``total``;
    ``captures`` counts the captures."""
    return dict(_totals)


def describe_times(times: dict[str, float], digits: int = 2) -> str:
    """``trace 0.01 s, backend 2.10 s (AOT autograd 0.40 s, Inductor 1.60 s), guards and entry
    code 0.00 s``: the stages in ``times`` (the backend's own stages inside its own)."""

    def part(key: str) -> str:
        return f"{STAGE_NAMES[key]} {times[key]:.{digits}f} s"

    inner = ", ".join(part(k) for k in ("aot_autograd", "inductor") if k in times)
    parts = []
    for key in ("trace", "backend", "entry"):
        if key in times:
            parts.append(part(key) + (f" ({inner})" if key == "backend" and inner else ""))
    return ", ".join(parts)


def tracing(code: types.CodeType) -> None:
    if "compile" in enabled_topics():
        _logger.getChild("compile").info("tracing %s", _where(code))


def backend_called(code: types.CodeType, backend: Any, ops: int) -> None:
    if "compile" in enabled_topics():
        name = getattr(backend, "__name__", None) or type(backend).__name__
        _logger.getChild("compile").info(
            "compiling the graph of %s (%d ops) with %s", code.co_qualname, ops, name
        )


def captured(code: types.CodeType, entry: CacheEntry) -> None:
    for key, seconds in entry.times.items():
        _totals[key] = _totals.get(key, 0.0) + seconds
    _totals["captures"] = _totals.get("captures", 0.0) + 1
    if _listeners:
        _emit("capture", {"code": code, "entry": entry})
    topics = enabled_topics()
    if not topics:
        return
    if "compile" in topics:
        _logger.getChild("compile").info(
            "compiled %s in %.2f s: %s",
            _where(code, entry),
            entry.times.get("total", 0.0),
            describe_times(entry.times),
        )
    exit = entry.exit
    if exit is not None and "graph_breaks" in topics:
        _logger.getChild("graph_breaks").info(
            "graph break in %s at %s: %s (%s)",
            code.co_qualname,
            exit.location,
            exit.reason,
            {
                "call": "runs eagerly, then resumes",
                "jump": "branch taken eagerly",
                "next": "the loop's next item taken eagerly, then resumed",
                "rest": "the rest of the function runs eagerly",
            }[exit.kind],
        )
    if "guards" in topics:
        lines = "\n  ".join(g.render() for g in entry.guards)
        _logger.getChild("guards").info("guards of %s:\n  %s", _where(code, entry), lines)
    if "graphs" in topics and entry.has_graph:
        _logger.getChild("graphs").info(
            "graph of %s:\n%s", _where(code, entry), entry.graph_module.code
        )
    if "bytecode" in topics:
        source = getattr(entry.fn, "__sapwood_source__", "")
        text = f"entry of {_where(code, entry)}:\n{source}"
        if exit is not None:
            for cont in exit.continuations:
                out = io.StringIO()
                dis.dis(cont.code, file=out)
                text += (
                    f"\nresume function {cont.code.co_qualname}, as source:\n"
                    f"{_source_from(cont.code)}\nand as bytecode:\n{out.getvalue()}"
                )
        _logger.getChild("bytecode").info("%s", text)


def _source_from(code: types.CodeType) -> str:
    """The user's source of a resume function: the original function's lines, the line it
    resumes at marked with ``>>``."""
    from ..breaks.resume import resume_info

    info = resume_info(code)
    original = info.original if info is not None else code
    try:
        lines, start = inspect.getsourcelines(original)
    except (OSError, TypeError):
        return "  (source not available)"
    resumes_at = None
    if info is not None:
        from ..interpreter.instructions import decode

        resumes_at = decode(original)[info.target].lineno
    out = []
    for n, text in enumerate(lines, start):
        mark = ">>" if n == resumes_at else "  "
        out.append(f"{mark}{n:5d}  {text.rstrip()}")
    return "\n".join(out)


def recompile(code: types.CodeType, failed_guard: str) -> None:
    if _listeners:
        _emit("recompile", {"code": code, "guard": failed_guard})
    if "recompiles" in enabled_topics():
        _logger.getChild("recompiles").info(
            "recompiling %s: guard failed: %s", _where(code), failed_guard
        )


def skipped(code: types.CodeType, reason: str) -> None:
    """``code`` runs eagerly as a whole, for ``reason``."""
    if _listeners:
        _emit("skip", {"code": code, "reason": reason})
    if "graph_breaks" in enabled_topics():
        _logger.getChild("graph_breaks").info("%s runs eagerly: %s", _where(code), reason)
