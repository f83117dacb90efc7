"""Capturing one call: trace the frame, compile the graph, build the cache entry.

:func:`capture` runs the symbolic interpreter over the function's code with the call's real
arguments, compiles the recorded graph with the backend, and returns a :class:`CacheEntry`
holding the generated entry function (guards, then the run) and the guard records (for people).

Guards of a cache entry, in order: torch global state (grad mode, default dtype, autocast,
inference mode), every guard recorded while tracing (including the graph's tensor guards),
the graph's alias guards, and that the tensor inputs are distinct objects.
"""

from __future__ import annotations

import inspect
import types
from dataclasses import dataclass
from typing import Any

import torch

from sapwood_graph import ClosureCellSource, FunctionSource, Guard, GuardKind, GuardSet

from ._codegen import Emitter
from ._frame import SymbolicFrame
from ._graph_bridge import GraphBridge
from ._outputs import OutputCollector, build_entry_function
from ._sources import DistinctIdsSource, GlobalStateSource, global_state_names
from ._trace import TraceSession, root_sources
from .errors import Unsupported
from .values.functions import RealCellValue

__all__ = ["CacheEntry", "capture"]


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

    def describe_guard(self, index: int) -> str:
        if 0 <= index < len(self.guards):
            return self.guards[index].render()
        return "guard evaluation"

    def guarded_source(self, index: int) -> str:
        """What the failing guard was about (its source), for grouping failures."""
        if 0 <= index < len(self.guards):
            return str(self.guards[index].source)
        return "guard evaluation"


def capture(
    code: types.CodeType,
    f_globals: dict[str, Any],
    closure: tuple[types.CellType, ...],
    args: tuple[Any, ...],
    backend: Any,
) -> CacheEntry:
    graph = GraphBridge(code.co_name)
    tx = TraceSession(graph, f_globals=f_globals, function=None)
    state = [(name, GlobalStateSource(name)) for name in global_state_names()]
    for _, source in state:
        tx.guard(GuardKind.CONSTANT_MATCH, source, source.resolve({}, {}))
    grad_before = torch.is_grad_enabled()
    try:
        params = root_sources(code)
        if len(params) != len(args):
            raise Unsupported("a call whose arguments do not bind to the parameters")
        fast = {name: tx.wrap(arg, source) for (name, source), arg in zip(params, args)}
        if code.co_flags & inspect.CO_VARKEYWORDS:
            # **kwargs is a fresh dict made by the call: the frame may mutate it freely.
            fast[params[-1][0]].source = None
        cells: dict[str, Any] = {
            name: RealCellValue(cell, ClosureCellSource(FunctionSource(), name))
            for name, cell in zip(code.co_freevars, closure)
        }
        frame = SymbolicFrame(tx, code, f_globals, None, fast, cells, None)
        result = tx.run_frame(frame)
        if tx.open_contexts or tx.loose_state:
            raise Unsupported("a context or grad-mode switch left open when the function returned")
        writes = tx.side_effects.final_writes()
        collector = OutputCollector()
        collector.collect(result)
        for write in writes:
            collector.collect(write.value)
        compiled = graph.compile(collector.proxies, backend)
    except Unsupported as exc:
        if exc.traced_stack and not getattr(exc, "_noted", False):
            exc._noted = True  # type: ignore[attr-defined]
            exc.add_note(
                "traced call stack (innermost last):\n  " + "\n  ".join(reversed(exc.traced_stack))
            )
        raise
    finally:
        torch._C._set_grad_enabled(grad_before)
        _exit_open_autocast(tx)
    guards = GuardSet(tx.guards)
    guards.update(graph.guards)
    guards.update(compiled.guards)
    tensor_sources = tuple(graph.input_order)
    if len(tensor_sources) > 1:
        guards.add(
            Guard(GuardKind.CONSTANT_MATCH, DistinctIdsSource(tensor_sources), len(tensor_sources))
        )
    ordered = list(guards)
    examples = {
        value.input_source: tensor
        for tensor, value in graph.inputs.values()
        if value.input_source is not None
    }
    em = Emitter(code, tx.held, tx.member_stores)
    fn = build_entry_function(em, ordered, examples, compiled, collector, result, writes)
    return CacheEntry(fn, ordered, compiled.graph_module, tx.held)


def _exit_open_autocast(tx: TraceSession) -> None:
    from .values.contexts import AutocastValue

    for ctx in reversed(tx.open_contexts):
        if isinstance(ctx, AutocastValue) and ctx.mode_proxy is not None:
            mode = ctx.mode_proxy.node.meta.get("example_value")
            if mode is not None:
                mode.__exit__(None, None, None)
