"""What the tracer did, for ``explain()`` and for the logs switched on by ``SAPWOOD_LOGS``.

``SAPWOOD_LOGS`` is a comma-separated list of topics: ``graph_breaks``, ``recompiles``,
``guards``, ``bytecode`` (the generated entry and resume code), ``graphs`` (the FX graph of
each capture), or ``all``. Messages go to the ``sapwood`` logger (``sapwood.<topic>``), which
gets a stderr handler when any topic is on.

Invariant: recording is cheap when nobody listens — one truth test per capture (captures
are rare; nothing here runs on the per-call path).
"""

from __future__ import annotations

import dis
import inspect
import io
import logging
import os
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cache import CacheEntry

__all__ = ["TOPICS", "captured", "enabled_topics", "listen", "recompile", "skipped"]

TOPICS = ("graph_breaks", "recompiles", "guards", "bytecode", "graphs")

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


_topics = _parse(os.environ.get("SAPWOOD_LOGS", ""))
if _topics and not _logger.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
    _logger.addHandler(_handler)
    _logger.setLevel(logging.INFO)


def enabled_topics() -> frozenset[str]:
    return _topics


def listen(callback: Callable[[str, dict[str, Any]], None]) -> Callable[[], None]:
    """Call ``callback(kind, data)`` for every event until the returned function is called."""
    _listeners.append(callback)
    return lambda: _listeners.remove(callback)


def _emit(kind: str, data: dict[str, Any]) -> None:
    for callback in list(_listeners):
        callback(kind, data)


def _where(code: types.CodeType) -> str:
    return f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"


def captured(code: types.CodeType, entry: CacheEntry) -> None:
    if _listeners:
        _emit("capture", {"code": code, "entry": entry})
    if not _topics:
        return
    exit = entry.exit
    if exit is not None and "graph_breaks" in _topics:
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
    if "guards" in _topics:
        lines = "\n  ".join(g.render() for g in entry.guards)
        _logger.getChild("guards").info("guards of %s:\n  %s", _where(code), lines)
    if "graphs" in _topics and entry.has_graph:
        _logger.getChild("graphs").info("graph of %s:\n%s", _where(code), entry.graph_module.code)
    if "bytecode" in _topics:
        source = getattr(entry.fn, "__sapwood_source__", "")
        text = f"entry of {_where(code)}:\n{source}"
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
    if "recompiles" in _topics:
        _logger.getChild("recompiles").info(
            "recompiling %s: guard failed: %s", _where(code), failed_guard
        )


def skipped(code: types.CodeType, reason: str) -> None:
    """``code`` runs eagerly as a whole, for ``reason``."""
    if _listeners:
        _emit("skip", {"code": code, "reason": reason})
    if "graph_breaks" in _topics:
        _logger.getChild("graph_breaks").info("%s runs eagerly: %s", _where(code), reason)
