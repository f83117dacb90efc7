"""The per-code cache: cache entries of each code object, the recompile limit, reset().

Invariants:

* Entries are kept per code object, so every function object sharing a code (closures made
  repeatedly, methods of several instances) shares them; the guards tell the variants apart.
* Entries are tried in insertion order; the first whose guards hold runs. A call tries only
  the entries of its own compile (the same backend and ``fullgraph``): a function compiled
  again with another backend or mode is traced for it, never served by the other's graphs.
* An entry refers to the functions, classes and Python modules it checks by identity
  weakly; when one dies, the entry leaves its cache (an ``id`` it compares could be reused).
* Once a code has ``RECOMPILE_LIMIT`` entries of one compile (or as many as the
  ``recompile_limit`` of that ``compile()`` call, or the one the user set in torch's dynamo
  config), a call that matches none runs eagerly; the first such call warns once, naming the
  guard that failed most often. With ``fullgraph=True`` (or torch's
  ``fail_on_recompile_limit_hit``) it raises :class:`RecompileLimitExceeded` instead.
* Graph breaks cost a trace of a resume code each, and a resume code holds what can run from
  its resume point on (in straight-line code, the rest of the function); a loop whose body
  breaks may recompile its resume code when reached with other values, with guards on what
  it takes over. Once one function's resume codes add up to ``BREAK_COST_LIMIT``
  instructions, or their recompiles to ``RECOMPILE_COST_LIMIT`` instructions and guards, a
  resume code met afterwards runs eagerly (the rest of that call of the function, with the
  reason in explain() and the logs), so a long function with hundreds of breaks, or a loop
  with a break that recompiles at each iteration over large data, costs a bounded compile.
"""

from __future__ import annotations

import collections
import types
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

from sapwood_graph import Guard

from ..breaks.exits import BreakExit
from ..breaks.resume import resume_info
from ..errors import TracerError, user_stacklevel
from ..guards.sources import WeakHandle
from ..interpreter.budget import forget_overruns
from ..interpreter.instructions import decode
from ..pymodel.random_generators import forget_specialised_states
from . import torch_config

__all__ = [
    "BREAK_COST_LIMIT",
    "RECOMPILE_COST_LIMIT",
    "RECOMPILE_LIMIT",
    "CacheEntry",
    "CodeCache",
    "RecompileLimitExceeded",
    "RecompileLimitWarning",
    "Region",
    "cache_for",
    "compile_key",
    "region",
    "reset",
]

RECOMPILE_LIMIT = 8
#: A resume function serves every iteration of a loop that breaks (the loop's items arrive
#: eagerly, one at a time) and is guarded only on the locals it reads, but one break site may
#: still be reached with more kinds of state than the function's entry, so its limit is higher.
RESUME_RECOMPILE_LIMIT = 64


#: Instructions of the resume codes of one function, traced the first time each (see the
#: invariants; a resume code holds only what can run from its resume point on). Counted as
#: decoded instructions, not code units: the inline caches (three code units in four on
#: 3.11-3.13 in call-heavy code) cost nothing to assemble or trace. 100,000 instructions of
#: resume codes take about three seconds to make and trace on one core.
BREAK_COST_LIMIT = 100_000
#: Instructions and guards of the entries of one function's resume codes traced again (a loop
#: whose body breaks, reached with other values)
RECOMPILE_COST_LIMIT = 50_000


def limit_for(code: types.CodeType, region: Region | None = None) -> int:
    """How many entries of one compile ``code`` may have. The ``recompile_limit`` of the
    compile call (``region``) comes first; then torch's ``torch._dynamo.config.recompile_limit``
    (or its old name ``cache_size_limit``) where the user set it (the config module is loaded
    and holds another value than the default both compilers share); a resume code keeps its
    own higher limit unless the user's is higher still."""
    limit = region.recompile_limit if region is not None else None
    if limit is None:
        limit = torch_config.recompile_limit()
    if resume_info(code) is not None:
        return max(RESUME_RECOMPILE_LIMIT, limit or 0)
    return RECOMPILE_LIMIT if limit is None else limit


class RecompileLimitExceeded(TracerError):
    """A call matched none of a function's cache entries after it reached its recompile
    limit, under ``fullgraph=True`` (or torch's ``fail_on_recompile_limit_hit``), where
    running it eagerly would not be what was asked for."""


@dataclass(frozen=True, eq=False)
class Region:
    """What one ``compile()`` call asks of the cache entries it makes and uses: ``key``
    (:attr:`CacheEntry.key`: calls with the same key share entries), its own recompile limit
    and the name its captures are reported under."""

    key: object
    recompile_limit: int | None = None
    name: str | None = None
    #: ``guards="inputs"``: the module arguments are declared frozen (see frozen_modules)
    frozen_modules: bool = False


def region(
    backend: Any,
    fullgraph: bool,
    *,
    recompile_limit: int | None = None,
    isolate: bool = False,
    name: str | None = None,
    frozen_modules: bool = False,
) -> Region:
    """The region of a compile call: its entries are those every compile of the same
    ``backend``, ``fullgraph`` and guard mode shares, or (``isolate``) its own."""
    key = object() if isolate else compile_key(backend, fullgraph, frozen_modules)
    return Region(key, recompile_limit, name, frozen_modules)


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
    #: the functions, classes and Python modules the entry refers to weakly: when one dies,
    #: the entry is dropped from its cache (:meth:`CodeCache.add`)
    weak_targets: list[WeakHandle] = field(default_factory=list)
    #: the compile the entry belongs to (its backend and ``fullgraph``, see
    #: :func:`compile_key`): it serves only calls through a compile with the same key
    key: Any = None
    #: the ``name=`` of the compile call that made the entry (for explain() and the logs)
    region_name: str | None = None
    #: how a whole-graph trace's result is made of graph outputs (``capture.output_tree``),
    #: for export (``capture(describe_result=True)``; else None)
    output_tree: Any = None
    #: why ``output_tree`` is None where the result was described (for export's error)
    output_problem: str | None = None
    #: what the entry checks: ``"all"``, or with ``guards="inputs"`` asked, ``"inputs ..."``
    #: or ``"all (...)"`` with why the declaration was not applied (see frozen_modules)
    guard_mode: str = "all"
    #: seconds the capture took: ``trace`` (the symbolic run that made this entry),
    #: ``backend`` (compiling its graph), ``entry`` (guards and generated code) and ``total``
    #: (the whole capture, a trace stopped at a graph break included)
    times: dict[str, float] = field(default_factory=dict)
    _watchers: list[weakref.ref[Any]] = field(default_factory=list, repr=False)

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
    #: instructions of the first entries of this (original) code's resume codes
    break_cost: int = 0
    #: instructions and guards of their later entries (recompiles)
    recompile_cost: int = 0

    def add(self, entry: CacheEntry) -> bool:
        """Append ``entry``, to be dropped again when an object it holds weakly dies (so
        neither a user object nor its ``id`` outlives what the entry assumed). False, and
        nothing added, where one of them already died."""
        targets = [handle.get() for handle in entry.weak_targets]
        if any(target is None for target in targets):
            return False
        entries = self.entries
        entry_ref = weakref.ref(entry)

        # ``enumerate`` is bound now: at interpreter exit this may run after the module's
        # globals (and with them its builtins) were cleared
        def died(_: Any, enumerate: Any = enumerate) -> None:
            dead = entry_ref()
            if dead is not None:
                for i, known in enumerate(entries):
                    if known is dead:
                        del entries[i]
                        break
                dead._watchers.clear()

        entry._watchers = [weakref.ref(target, died) for target in targets]
        entries.append(entry)
        return True

    def note_failures(self, failed: list[tuple[str, str]]) -> None:
        """Count failing guards by what they were about (the same source with different
        expected values is one guard that keeps failing)."""
        for source, rendered in failed:
            self.failures[source] += 1
            self.latest[source] = rendered

    def limit_message(self, code: types.CodeType, limit: int) -> str:
        if self.failures:
            source = self.failures.most_common(1)[0][0]
            guard = f"{self.latest[source]} (a guard on {source})"
        else:
            guard = "unknown"
        return (
            f"sapwood: {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}) reached "
            f"its recompile limit ({limit} variants). The guard that kept failing: {guard}"
        )

    def warn_limit(self, code: types.CodeType, limit: int) -> None:
        if self.warned:
            return
        self.warned = True
        warnings.warn(
            f"{self.limit_message(code, limit)}. Calls matching no cache entry now run eagerly.",
            RecompileLimitWarning,
            stacklevel=user_stacklevel(),
        )


_caches: dict[types.CodeType, CodeCache] = {}


def cache_for(code: types.CodeType) -> CodeCache:
    cache = _caches.get(code)
    if cache is None:
        cache = _caches[code] = CodeCache()
    return cache


def over_break_cost(code: types.CodeType) -> str | None:
    """Why ``code``, a resume code, must run eagerly instead of being traced: its function is
    past :data:`BREAK_COST_LIMIT` or :data:`RECOMPILE_COST_LIMIT`; None when it may be traced (or is no resume code)."""
    info = resume_info(code)
    if info is None:
        return None
    cache = cache_for(info.original)
    if cache.break_cost >= BREAK_COST_LIMIT:
        cost = f"more than {BREAK_COST_LIMIT:,} instructions"
    elif cache.recompile_cost >= RECOMPILE_COST_LIMIT:
        cost = f"more than {RECOMPILE_COST_LIMIT:,} (instructions and guards) in recompiles"
    else:
        return None
    return (
        f"graph breaks in {info.original.co_qualname} whose resume functions cost {cost} to"
        " compile; the rest of the call runs eagerly"
    )


def count_break_cost(code: types.CodeType, entry: CacheEntry) -> None:
    """Add a new entry of ``code``, when it is a resume code, to its function's cost: its
    instructions (the trace and the generated code), and for a recompile (a loop whose body
    breaks: an entry per iteration, guarding the values it takes over) its guards too."""
    info = resume_info(code)
    if info is None:
        return
    cost = len(decode(code))  # (decoded once already: the trace read it)
    if len(cache_for(code).entries) > 1:
        cache_for(info.original).recompile_cost += cost + len(entry.guards)
    else:
        cache_for(info.original).break_cost += cost


_keys: dict[tuple[int, bool, bool], tuple[Any, object]] = {}


def compile_key(backend: Any, fullgraph: bool, frozen_modules: bool = False) -> object:
    """The key of the cache entries that compiles with ``backend``, ``fullgraph`` and guard
    mode share (:attr:`CacheEntry.key`): one object per triple, compared by identity on every
    call. The backend is held weakly where it can be (a backend made for one model, e.g.
    DDP's, may hold that model)."""
    known = _keys.get((id(backend), fullgraph, frozen_modules))
    if known is not None and _held(known[0]) is backend:
        return known[1]
    key = object()
    try:
        held: Any = weakref.ref(backend)
    except TypeError:
        held = backend
    _keys[(id(backend), fullgraph, frozen_modules)] = (held, key)
    return key


def _held(held: Any) -> Any:
    return held() if type(held) is weakref.ref else held


def lookup(code: types.CodeType) -> CodeCache | None:
    return _caches.get(code)


def reset() -> None:
    """Drop every cache entry of every compiled function (and forget which codes overran
    the trace budget, and the generator states functions were specialised on)."""
    _caches.clear()
    forget_overruns()
    forget_specialised_states()
