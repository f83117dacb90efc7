"""``explain(fn)(*args)``: run a function once under the tracer and report what happened.

The report (:class:`ExplainOutput`) lists every graph compiled during the call (with its
number of operations), every graph break with its reason and the user's ``file:line``, the
guards of every cache entry made, recompilations with the guard that failed, and functions
that run eagerly because not even a graph break could place them. ``str()`` of it is a
readable summary; the fields are for programs.

Invariant: explain starts from empty caches (it calls :func:`reset`), so the report covers
every capture the call needs, and it leaves those entries in place afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from sapwood_graph.buckets import META_KEY as BUCKETS_META_KEY
from sapwood_graph.buckets import BucketPlan

from . import events as _events
from .cache import reset
from .compiled_module import CompiledModule
from .distributed import is_ddp
from .entry import compile as _compile

__all__ = ["BreakReport", "ExplainOutput", "GraphReport", "explain"]

_KINDS = {
    "call": "ran eagerly, then resumed",
    "jump": "branch taken eagerly, then resumed",
    "next": "the loop's next item taken eagerly, then resumed",
    "rest": "the rest of the function ran eagerly",
}


@dataclass(frozen=True)
class GraphReport:
    """One compiled graph."""

    function: str
    op_count: int
    graph_module: torch.fx.GraphModule
    #: How the graph was cut at DDP's gradient buckets (``compile(DDP(model))``), else None.
    buckets: BucketPlan | None = None


@dataclass(frozen=True)
class BreakReport:
    """One graph break."""

    function: str
    reason: str
    location: str
    kind: str


@dataclass
class ExplainOutput:
    """What one call of a compiled function did."""

    graphs: list[GraphReport] = field(default_factory=list)
    breaks: list[BreakReport] = field(default_factory=list)
    #: (function, rendered guards) per cache entry made
    guards: list[tuple[str, list[str]]] = field(default_factory=list)
    #: (function, the guard that failed) per recompilation
    recompiles: list[tuple[str, str]] = field(default_factory=list)
    #: (function, why) for code that runs eagerly as a whole
    eager_functions: list[tuple[str, str]] = field(default_factory=list)
    #: (function, seconds per stage) per cache entry made: ``trace``, ``backend``, ``entry``
    #: and ``total`` (the capture as a whole, a trace stopped at a break included)
    compile_times: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    #: (function, what its entry checks) per cache entry made under ``guards="inputs"``:
    #: ``"inputs (...)"``, or ``"all (...)"`` and why the declaration was not applied
    guard_modes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def break_count(self) -> int:
        return len(self.breaks)

    @property
    def op_counts(self) -> list[int]:
        return [g.op_count for g in self.graphs]

    def __str__(self) -> str:
        lines = [
            f"Graphs: {self.graph_count}   Graph breaks: {self.break_count}   "
            f"Ops per graph: {self.op_counts}"
        ]
        for n, g in enumerate(self.graphs, 1):
            if g.buckets is not None:
                lines.append(f"Graph {n} ({g.function}): {g.buckets.describe()}")
        if self.breaks:
            lines.append("Graph breaks:")
            for n, b in enumerate(self.breaks, 1):
                lines.append(f"  {n}. {b.location}: {b.reason} ({_KINDS[b.kind]}) in {b.function}")
        for function, mode in self.guard_modes:
            lines.append(f"Guard mode of {function}: {mode}")
        for function, guards in self.guards:
            lines.append(f"Guards of {function} ({len(guards)}):")
            lines += [f"  {g}" for g in guards]
        if self.recompiles:
            lines.append("Recompiles:")
            lines += [f"  {fn}: {guard}" for fn, guard in self.recompiles]
        if self.eager_functions:
            lines.append("Run eagerly as a whole:")
            lines += [f"  {fn}: {why}" for fn, why in self.eager_functions]
        if self.compile_times:
            stages = {k for _, t in self.compile_times for k in t}
            total = {k: sum(t.get(k, 0.0) for _, t in self.compile_times) for k in stages}
            lines.append(
                f"Compile time: {total.get('total', 0.0):.3f} s "
                f"({_events.describe_times(total, digits=3)})"
            )
        return "\n".join(lines)


def _op_count(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def _uncompiled(fn: Any) -> Any:
    """What ``fn`` compiles, where ``fn`` is already sapwood's compiled callable (a module's
    original module, a function's original function): explained as itself, not as sapwood's
    wrapper around it."""
    while True:
        if isinstance(fn, CompiledModule):
            fn = fn._orig_mod
            continue
        original = getattr(fn, "__dict__", {}).get("__sapwood_original__")
        if original is None:
            return fn
        fn = original


def _asked_guards(fn: Any) -> str:
    """The ``guards=`` a compiled callable was compiled with (``"all"`` for anything else)."""
    inner = fn.__dict__.get("_sapwood_forward", fn) if isinstance(fn, CompiledModule) else fn
    return getattr(inner, "__sapwood_guards__", "all")


def explain(
    fn: Any, *, backend: Any = None, ddp_split: bool = True, guards: str | None = None
) -> Callable[..., ExplainOutput]:
    """``explain(fn)(*args, **kwargs)`` runs ``fn`` compiled (``backend``: eager by default)
    once on the arguments and returns an :class:`ExplainOutput` (also printable). For a
    ``DistributedDataParallel`` module, each graph's cut at DDP's gradient buckets is in
    :attr:`GraphReport.buckets` (``ddp_split=False``: not cut). ``guards``: as ``compile``'s
    (``None``: what ``fn`` was compiled with, if it is a compiled callable); under
    ``"inputs"`` the report says, per entry, whether the declaration was applied."""

    target = fn
    mode = guards if guards is not None else _asked_guards(fn)

    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        report = ExplainOutput()

        def on_event(kind: str, data: dict[str, Any]) -> None:
            name = data["code"].co_qualname
            if kind == "capture":
                entry = data["entry"]
                if entry.has_graph:
                    gm = entry.graph_module
                    plan = gm.meta.get(BUCKETS_META_KEY)
                    report.graphs.append(GraphReport(name, _op_count(gm), gm, plan))
                if entry.exit is not None:
                    e = entry.exit
                    report.breaks.append(BreakReport(name, e.reason, e.location, e.kind))
                report.guards.append((name, [g.render() for g in entry.guards]))
                if mode == "inputs":
                    report.guard_modes.append((name, entry.guard_mode))
                report.compile_times.append((name, dict(entry.times)))
            elif kind == "recompile":
                report.recompiles.append((name, data["guard"]))
            elif kind == "skip":
                report.eager_functions.append((name, data["reason"]))

        reset()
        fn = _uncompiled(target)
        if is_ddp(fn):
            report.eager_functions.append(
                (
                    f"{type(fn).__qualname__}.forward",
                    "DDP's own forward (reducer, buffer broadcast) runs eagerly by design; "
                    "the model it wraps is compiled",
                )
            )
        compiled = _compile(fn, backend=backend or _eager, ddp_split=ddp_split, guards=mode)
        stop = _events.listen(on_event)
        try:
            compiled(*args, **kwargs)
        finally:
            stop()
        return report

    return run


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward
