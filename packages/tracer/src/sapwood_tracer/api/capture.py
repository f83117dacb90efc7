"""Capturing one call: trace the frame, compile the graph, build the cache entry.

:func:`capture` runs the symbolic interpreter over the function's code with the call's real
arguments, compiles the recorded graph with the backend, and returns a :class:`CacheEntry`
holding the generated entry function (guards, then the run) and the guard records (for people).

Guards of a cache entry, in order: torch global state (inference mode, active modes, and one
C++ check of the rest: grad mode, default dtype, autocast, threads, ...), every guard recorded while tracing (including the graph's tensor guards),
the graph's alias guards, that the inputs whose identity the trace relied on are distinct
objects (:mod:`sapwood_tracer.interpreter.aliasing`), and that the tensor inputs are.
"""

from __future__ import annotations

import inspect
import sys
import time
import types
from typing import Any

import torch

from sapwood_graph import (
    STAGE_TIMES_META_KEY,
    AttrSource,
    BackendCompilerFailed,
    ClosureCellSource,
    FunctionSource,
    Guard,
    GuardKind,
    GuardSet,
    Source,
)

from ..breaks.exits import BreakExit, BreakRuntime, break_exit, emit_break_tail, location_of
from ..breaks.outputs import OutputCollector, build_entry_function
from ..breaks.resume import resume_info
from ..errors import Unsupported, forget_frames, weakly_referenced
from ..guards.emitter import Emitter
from ..guards.sources import (
    DistinctIdsSource,
    GlobalStateSource,
    HeldObjectSource,
    ReaderSource,
    WeakHandle,
    global_state_names,
    held_weakly,
    torch_global_state,
    torch_state_snapshot,
)
from ..interpreter.aliasing import distinctness_guards
from ..interpreter.budget import overrun_reason
from ..interpreter.frame import BreakHere, LazyLocals, SymbolicFrame, internal_error
from ..interpreter.graph_bridge import GraphBridge
from ..interpreter.marked_dynamic import report_specialized
from ..interpreter.session import TraceSession, root_sources
from ..interpreter.shape_plan import ShapePlan
from ..pymodel.construct import inspects_frames, makes_weak_references
from ..values.base import Value
from ..values.containers import ListValue, TupleValue
from ..values.contexts import settle_loose_grad_mode
from ..values.dicts import DictValue
from ..values.modules import ModuleValue
from ..values.ordered_dataclasses import OrderedDataclassValue
from ..values.tensors import TensorValue
from . import events as _events
from .cache import CacheEntry
from .compile_ids import compile_context
from .frozen_modules import freeze_module_guards

__all__ = ["capture"]


def capture(
    code: types.CodeType,
    f_globals: dict[str, Any],
    closure: tuple[types.CellType, ...],
    args: tuple[Any, ...],
    backend: Any,
    *,
    fullgraph: bool = True,
    runtime: BreakRuntime | None = None,
    shape_plan: ShapePlan | None = None,
    describe_result: bool = False,
    frozen_modules: bool = False,
) -> CacheEntry:
    """Trace ``code`` on ``args`` and build its cache entry.

    With ``fullgraph`` any construct the tracer cannot capture raises :class:`Unsupported`.
    Without it, the first such construct in the root frame becomes a graph break: the trace is
    run again and stopped right before it (see :mod:`sapwood_tracer.breaks.exits`); ``runtime`` supplies the
    functions the entry calls to go on after the break. ``describe_result`` (for export):
    the entry's :attr:`~.cache.CacheEntry.output_tree` says how the result is made.
    ``frozen_modules``: the module arguments are declared frozen (``guards="inputs"``, see
    :mod:`.frozen_modules`).
    """
    if makes_weak_references(code, f_globals):
        raise weakly_referenced(code.co_qualname)
    frames = inspects_frames(code)
    if frames is not None:
        exc = Unsupported(
            f"{code.co_qualname}, which reads frames, tracebacks or reference counts ({frames!r})",
            hint="The function runs eagerly as a whole, in the frames Python would give it.",
        )
        exc.frame_bound = True
        raise exc
    overrun = overrun_reason(code)
    if overrun is not None:  # (a trace of it, inlined in another, ran past the budget)
        exc = Unsupported(overrun, hint="The function runs eagerly as a whole.")
        exc.frame_bound = True
        raise exc
    started = time.perf_counter()
    with compile_context(code):
        entry = _capture(
            code,
            f_globals,
            closure,
            args,
            backend,
            fullgraph,
            runtime,
            shape_plan,
            (describe_result, frozen_modules),
        )
    entry.times["total"] = time.perf_counter() - started
    return entry


def _capture(
    code: types.CodeType,
    f_globals: dict[str, Any],
    closure: tuple[types.CellType, ...],
    args: tuple[Any, ...],
    backend: Any,
    fullgraph: bool,
    runtime: BreakRuntime | None,
    shape_plan: ShapePlan | None,
    asked: tuple[bool, bool],
) -> CacheEntry:
    plan: tuple[int, int] | None = None
    reason: Unsupported | None = None
    caller_exception = sys.exc_info()[1]  # (read outside any handler of sapwood's)
    while True:
        try:
            try:
                return _capture_once(
                    code,
                    f_globals,
                    closure,
                    args,
                    backend,
                    plan,
                    reason,
                    runtime,
                    shape_plan,
                    asked,
                )
            except (Unsupported, BackendCompilerFailed):
                raise  # (a backend's own failure is the backend's error, as in torch.compile)
            except Exception as error:  # sapwood's own code failed outside any frame
                raise internal_error(error, None) from error
        except Unsupported as exc:
            if exc.traced_stack and not getattr(exc, "_noted", False):
                exc._noted = True  # type: ignore[attr-defined]
                exc.add_note(
                    "traced call stack (innermost last):\n  "
                    + "\n  ".join(reversed(exc.traced_stack))
                )
            if fullgraph or runtime is None or plan is not None or exc.break_index is None:
                raise
            plan = (exc.break_index, exc.break_visit)
            forget_frames(exc, caller_exception)
            reason = exc


def _capture_once(
    code: types.CodeType,
    f_globals: dict[str, Any],
    closure: tuple[types.CellType, ...],
    args: tuple[Any, ...],
    backend: Any,
    plan: tuple[int, int] | None,
    reason: Unsupported | None,
    runtime: BreakRuntime | None,
    shape_plan: ShapePlan | None = None,
    asked: tuple[bool, bool] = (False, False),
) -> CacheEntry:
    graph = GraphBridge(code.co_name, shape_plan)
    tx = TraceSession(graph, f_globals=f_globals, function=None)
    tx.breaks_allowed = runtime is not None
    try:
        return _trace_and_build(
            tx,
            graph,
            code,
            f_globals,
            closure,
            args,
            backend,
            plan,
            reason,
            runtime,
            asked,
        )
    finally:
        tx.release()


def _trace_and_build(
    tx: TraceSession,
    graph: GraphBridge,
    code: types.CodeType,
    f_globals: dict[str, Any],
    closure: tuple[types.CellType, ...],
    args: tuple[Any, ...],
    backend: Any,
    plan: tuple[int, int] | None,
    reason: Unsupported | None,
    runtime: BreakRuntime | None,
    asked: tuple[bool, bool] = (False, False),
) -> CacheEntry:
    """``asked``: whether to describe the result (export) and whether the module arguments
    are declared frozen."""
    describe_result, frozen_modules = asked
    started = time.perf_counter()
    state = [(name, GlobalStateSource(name)) for name in global_state_names()]
    for _, source in state:
        tx.guard(GuardKind.CONSTANT_MATCH, source, source.resolve({}, {}))
    snapshot = torch_state_snapshot()  # (grad mode, dtype, autocast, threads, ...: one check)
    held = HeldObjectSource(id(snapshot), "torch global state", snapshot)
    tx.guard(GuardKind.CONSTANT_MATCH, ReaderSource(held, torch_global_state), "")
    grad_before = torch.is_grad_enabled()
    exit: BreakExit | None = None
    result: Value | None = None
    try:
        params = root_sources(code)
        if len(params) != len(args):
            raise Unsupported("a call whose arguments do not bind to the parameters")
        info = resume_info(code)
        passed_cells = set(info.cell_names) if info is not None else set()
        fast = LazyLocals(tx.wrap)
        for (name, source), arg in zip(params, args):
            if name not in passed_cells:
                fast.add_input(name, arg, source)
        if code.co_flags & inspect.CO_VARKEYWORDS and resume_info(code) is None:
            # **kwargs is a fresh dict made by the call: the frame may mutate it freely.
            fast[params[-1][0]].source = None
        # (through tx.real_cell, so every path to one cell is one value: writes are seen)
        cells: dict[str, Any] = {
            name: tx.real_cell(cell, ClosureCellSource(FunctionSource(), name))
            for name, cell in zip(code.co_freevars, closure)
        }
        for (name, param_source), arg in zip(params, args):
            if name in passed_cells:  # a resume function's cell, passed as the cell itself
                cells[name] = tx.real_cell(arg, AttrSource(param_source, "cell_contents"))
        frame = SymbolicFrame(tx, code, f_globals, None, fast, cells, None)
        frame.visits = {}
        frame.break_at = plan
        try:
            result = tx.run_frame(frame)
        except BreakHere:
            assert reason is not None
            exit = break_exit(tx, frame, reason.construct)
            if len(reason.traced_stack) > 1:
                # it broke inside a callee: this frame breaks at the call, the callee is
                # compiled on its own (and breaks there too)
                exit.reason = f"a callee that breaks ({reason.construct} at {location_of(reason)})"
            else:
                exit.location = location_of(reason)
        if exit is None:
            if tx.open_contexts:
                raise Unsupported("a context left open when the function returned")
            settle_loose_grad_mode(tx)  # (the mode it left set: replayed after the graph)
        writes = tx.side_effects.final_writes()
        collector = OutputCollector()
        if result is not None:
            collector.collect(result)
        if exit is not None:
            for value in exit.values():
                collector.collect(value)
        for write in writes:
            collector.collect(write.value)
        for value in tx.side_effects.values():
            collector.collect(value)
        # Around graph breaks a piece may hold no operation at all: no backend call then.
        pieces = exit is not None or resume_info(code) is not None
        traced = time.perf_counter()
        report_specialized(code, graph.specialized_marks(), fullgraph=runtime is None)
        _events.backend_called(code, backend, len(graph.og.root.graph.nodes))
        compiled = graph.compile(collector.proxies, _skipping_empty(backend) if pieces else backend)
        backend_done = time.perf_counter()
        collector.frozen = True
    finally:
        torch._C._set_grad_enabled(grad_before)
        _exit_open_autocast(tx)
    guards = GuardSet(tx.guards)
    guards.update(graph.guards)
    guards.update(compiled.guards)
    guards.update(distinctness_guards(tx.by_object, tx.object_of, tx.side_effects, tx.keyed_types))
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
    held = {key: held_weakly(obj) for key, obj in tx.held.items()}
    guard_mode = "all"
    roots = None
    if frozen_modules:
        if exit is None:
            ordered, roots, guard_mode = freeze_module_guards(
                params, args, ordered, writes, tx.side_effects, held
            )
        else:
            guard_mode = "all (guards='inputs' asked, but the function has a graph break)"
    em = Emitter(code, held, tx.member_stores)
    if roots is not None:
        em.freeze(roots, {name: arg for (name, _), arg in zip(params, args)}, f_globals)
    em.module_examples = {
        source: value.module
        for source, value in tx.by_source.items()
        if isinstance(value, ModuleValue) and value.source is source
    }
    has_graph = not getattr(compiled.fn, "_sapwood_empty", False)
    if exit is None:
        assert result is not None
        fn = build_entry_function(
            em,
            ordered,
            examples,
            compiled,
            collector,
            result,
            writes,
            effects=tx.side_effects,
            root_globals=f_globals,
        )
    else:
        assert runtime is not None
        fn = build_entry_function(
            em,
            ordered,
            examples,
            compiled,
            collector,
            None,
            writes,
            tail=lambda built: emit_break_tail(em, exit, collector, built, runtime),
            call_graph=has_graph or bool(collector.proxies),
            effects=tx.side_effects,
            root_globals=f_globals,
        )
    if exit is not None:
        exit.forget_values()
    entry = CacheEntry(fn, ordered, compiled.graph_module, held, has_graph, exit)
    entry.guard_mode = guard_mode
    if describe_result and exit is None and result is not None:
        entry.output_tree, entry.output_problem = _describe_result(tx, result, collector, writes)
    entry.weak_targets = _weak_targets(em, ordered, held)
    entry.times = {
        "trace": traced - started,
        "backend": backend_done - traced,
        "entry": time.perf_counter() - backend_done,
    }
    stages = compiled.graph_module.meta.get(STAGE_TIMES_META_KEY)
    if isinstance(stages, dict):  # the backend's own stages (AOT autograd, Inductor)
        entry.times.update({k: float(v) for k, v in stages.items() if isinstance(v, float)})
    return entry


def _weak_targets(em: Emitter, guards: list[Guard], held: dict[int, Any]) -> list[WeakHandle]:
    """Every weakly held object the entry relies on: those its code compares or calls, those
    its identity guards name, and those its guard records reach (the locator's code)."""
    found = {id(h): h for h in em.weak_targets}
    found.update((id(h), h) for h in held.values() if isinstance(h, WeakHandle))
    todo: list[Source] = []
    for guard in guards:
        if guard.source is not None:
            todo.append(guard.source)
        if isinstance(guard.expected, Source):
            todo.append(guard.expected)
        todo.extend(source for _, source in guard.symbols)
    seen: set[Source] = set()
    while todo:
        source: Source | None = todo.pop()
        while source is not None and source not in seen:
            seen.add(source)
            if isinstance(source, HeldObjectSource) and isinstance(source.held, WeakHandle):
                found[id(source.held)] = source.held
            if isinstance(source, DistinctIdsSource):
                todo.extend(source.sources)
            source = source.base
    return list(found.values())


def _skipping_empty(backend: Any) -> Any:
    """``backend``, except that a graph with no operation is run as is, without a backend
    call (a break right at the start, or a resume function with only Python left)."""

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        if not any(n.op in ("call_function", "call_method", "call_module") for n in gm.graph.nodes):
            return _EmptyGraph(gm)
        return backend(gm, example_inputs)

    compile_graph.__name__ = getattr(backend, "__name__", type(backend).__name__)
    return compile_graph


class _EmptyGraph:
    """A graph without operations: returns its outputs (inputs passed through)."""

    _sapwood_empty = True

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm

    def __call__(self, *inputs: Any) -> Any:
        return self.gm(*inputs)


def _exit_open_autocast(tx: TraceSession) -> None:
    from ..values.contexts import AutocastValue

    for ctx in reversed(tx.open_contexts):
        if isinstance(ctx, AutocastValue) and ctx.mode_proxy is not None:
            mode = ctx.mode_proxy.node.meta.get("example_value")
            if mode is not None:
                mode.__exit__(None, None, None)


def _describe_result(
    tx: TraceSession, result: Value, collector: OutputCollector, writes: list[Any]
) -> tuple[Any, str | None]:
    """:func:`output_tree` of a whole-graph trace's result, or None and why not: the trace
    also changes Python state (an attribute, a global, a list or dict it was given), which
    a result alone cannot carry, or a part of the result is of no kind a tree holds."""
    effects = tx.side_effects
    changed = [w for w in writes if not _unchanged(w.obj, w.name, w.value)]
    state = (
        f"sets the attribute {changed[0].name!r} of a {type(changed[0].obj).__qualname__}"
        if changed
        else "changes a list or dict it was given"
        if effects.containers
        else "assigns a variable of an enclosing function"
        if effects.cells
        else "changes a set it was given"
        if effects.set_ops
        else f"assigns the global {next(iter(effects.globals))[1]!r}"
        if effects.globals
        else "changes the state of an object it was given"
        if effects.object_states
        else None
    )
    if state is not None:
        return None, state
    try:
        tree = output_tree(result, collector)
    except Unsupported as exc:
        return None, f"returns what cannot be rebuilt ({exc.construct})"
    if tree is None:
        return None, (
            f"returns {_odd_part(result, collector).describe()}, which is not a "
            "tensor the graph computes, a constant, a tuple, list, dict or ModelOutput"
        )
    return tree, None


def _odd_part(value: Value, collector: OutputCollector) -> Value:
    """The first part of ``value`` that :func:`output_tree` does not describe."""
    parts: list[Value] = []
    if isinstance(value, (TupleValue, ListValue)):
        parts = list(value.items)
    elif isinstance(value, OrderedDataclassValue) and value.obj is None:
        parts = list(value.rebuild_kwargs().values())
    elif type(value) is DictValue:
        parts = [item for _, item in value.entries.values()]
    for part in parts:
        if output_tree(part, collector) is None:
            return _odd_part(part, collector)
    return value


def output_tree(value: Value, collector: OutputCollector) -> Any:
    """Where the result of a whole-graph trace comes from, as nested tuples: ``("out", i)``
    (graph output ``i``), ``("const", v)``, ``("tuple" | "list", items)``, ``("dict",
    ((key, item), ...))``, ``("model_output", (cls, ((field, item), ...)))``; ``None`` where any part is something else (an object, an input
    passed through). :func:`~sapwood_tracer.api.export.export` rebuilds results from it."""
    if isinstance(value, TensorValue) and not value.is_input():
        return ("out", collector.graph_index(value))
    if value.is_constant() and type(value.as_constant()) in (int, float, bool, str, type(None)):
        return ("const", value.as_constant())
    if isinstance(value, (TupleValue, ListValue)) and value.python_type() in (tuple, list):
        items = tuple(output_tree(v, collector) for v in value.items)
        if any(item is None for item in items):
            return None
        return ("tuple" if value.python_type() is tuple else "list", items)
    if isinstance(value, OrderedDataclassValue) and value.obj is None:
        # a ``ModelOutput`` made in the trace: made again from its fields (torch.export
        # knows the class: transformers registers it with torch's pytree)
        fields = []
        for key, item in value.rebuild_kwargs().items():
            tree = output_tree(item, collector)
            if tree is None:
                return None
            fields.append((key, tree))
        return ("model_output", (value.cls, tuple(fields)))
    if type(value) is DictValue and value.cls is dict:
        pairs = []
        for key, item in value.entries.values():
            tree = output_tree(item, collector)
            if not key.is_constant() or tree is None:
                return None
            pairs.append((key.as_constant(), tree))
        return ("dict", tuple(pairs))
    return None


def _unchanged(obj: Any, name: str, value: Value) -> bool:
    """Whether writing ``value`` to ``obj.name`` leaves it as it is now (a flag set, then put
    back, in the traced call: no net change)."""
    if not value.is_constant():
        return False
    new = value.as_constant()
    try:
        current = getattr(obj, name)
    except Exception:  # (no such attribute, or a getter that fails: a change)
        return False
    return (
        type(current) is type(new) and type(new) in (type(None), bool, int, str) and current == new
    )
