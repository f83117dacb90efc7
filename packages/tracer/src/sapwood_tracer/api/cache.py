"""The per-code cache: cache entries of each code object, the recompile limit, reset().

Invariants:

* Entries are kept per code object, so every function object sharing a code (closures made
  repeatedly, methods of several instances) shares them; the guards tell the variants apart.
* Entries are tried in insertion order; the first whose guards hold runs.
* Once a code has ``RECOMPILE_LIMIT`` entries, a call that matches none runs eagerly; the
  first such call warns once, naming the guard that failed most often.
"""

from __future__ import annotations

import collections
import types
import warnings

# (the real ``len``, whatever a program puts in ``builtins``: see entry.py)
from builtins import len
from dataclasses import dataclass, field
from typing import Any

import torch

from sapwood_graph import Guard

from ..breaks.exits import BreakExit
from ..breaks.resume import resume_info
from ..interpreter.budget import forget_overruns

__all__ = [
    "RECOMPILE_LIMIT",
    "CacheEntry",
    "CodeCache",
    "RecompileLimitWarning",
    "cache_for",
    "reset",
]

RECOMPILE_LIMIT = 8
#: A resume function that continues a loop body after a graph break needs one entry per
#: iteration (each guards on the items still to come), so its limit is higher.
RESUME_RECOMPILE_LIMIT = 64


def limit_for(code: types.CodeType) -> int:
    return RESUME_RECOMPILE_LIMIT if resume_info(code) is not None else RECOMPILE_LIMIT


@dataclass(eq=False)
class CacheEntry:
    """One compiled variant of a code object.

    ``fn(L, C, G)`` checks the guards and runs the entry; it returns a :class:`Miss` (with
    the index of the failing guard) when the entry does not apply.
    """

    fn: Any
    guards: list[Guard]
    graph_module: torch.fx.GraphModule
    held: dict[int, Any]
    #: whether a backend compiled a graph for this entry (no graph: nothing to compute)
    has_graph: bool = True
    #: the graph break this entry ends with, if any
    exit: BreakExit | None = None

    def describe_guard(self, index: int) -> str:
        if 0 <= index < len(self.guards):
            return self.guards[index].render()
        return "guard evaluation"

    def guarded_source(self, index: int) -> str:
        """What the failing guard was about (its source), for grouping failures."""
        if 0 <= index < len(self.guards):
            guard = self.guards[index]
            # (a shape guard spans several sources: the expression itself names it)
            return str(guard.source) if guard.source is not None else guard.render()
        return "guard evaluation"


class RecompileLimitWarning(UserWarning):
    """A function kept failing its guards and now runs eagerly for new inputs."""


@dataclass(eq=False)
class CodeCache:
    """The cache entries of one code object."""

    entries: list[CacheEntry] = field(default_factory=list)
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    latest: dict[str, str] = field(default_factory=dict)
    warned: bool = False
    #: set when the code cannot be traced at all (not even with graph breaks): why
    eager_reason: str | None = None

    def note_failures(self, failed: list[tuple[str, str]]) -> None:
        """Count failing guards by what they were about (the same source with different
        expected values is one guard that keeps failing)."""
        for source, rendered in failed:
            self.failures[source] += 1
            self.latest[source] = rendered

    def warn_limit(self, code: types.CodeType) -> None:
        if self.warned:
            return
        self.warned = True
        if self.failures:
            source = self.failures.most_common(1)[0][0]
            guard = f"{self.latest[source]} (a guard on {source})"
        else:
            guard = "unknown"
        warnings.warn(
            f"sapwood: {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}) was "
            f"recompiled {limit_for(code)} times; calls matching no cache entry now run "
            f"eagerly. The guard that kept failing: {guard}",
            RecompileLimitWarning,
            stacklevel=4,
        )


_caches: dict[types.CodeType, CodeCache] = {}


def cache_for(code: types.CodeType) -> CodeCache:
    cache = _caches.get(code)
    if cache is None:
        cache = _caches[code] = CodeCache()
    return cache


def lookup(code: types.CodeType) -> CodeCache | None:
    return _caches.get(code)


def reset() -> None:
    """Drop every cache entry of every compiled function (and forget which codes overran
    the trace budget)."""
    _caches.clear()
    forget_overruns()
