"""Rebuilding the user-visible result, and replaying side effects, after the graph ran.

The trace ends with a value (the frame's return value) and a list of attribute writes. Each
is turned into a *plan*: graph outputs for tensors computed in the graph, the input object
itself for anything that came from the inputs (so identity and aliasing with inputs are
kept), constants, and fresh containers/objects rebuilt around those. The entry function
(generated code) checks the guards, calls the compiled graph, replays the writes and builds
the plan.

Invariants:

* A value that appears several times in the result is built once (a list returned twice is
  one list, as in Python).
* Objects made during the trace are rebuilt without running user code (no ``__init__``;
  attributes set with ``object.__setattr__``, which frozen dataclasses allow too).
"""

from __future__ import annotations

import collections
import sys
import types
from collections.abc import Callable
from typing import Any

from sapwood_graph import (
    AttrSource,
    ClosureCellSource,
    CompiledGraph,
    FunctionSource,
    Guard,
    Source,
)

from ..errors import Unsupported
from ..guards.emitter import CLEARING, Emitter, Miss
from ..guards.fast_path import emit_guards
from ..guards.sources import HeldObjectSource
from ..interpreter.side_effects import AttributeWrite, SideEffects
from ..pymodel.made_classes import class_expression
from ..pymodel.overriding_tensors import OverridingTensorValue, emit_made
from ..values.base import (
    BoundBuiltinMethod,
    BuiltinValue,
    ConstantValue,
    IteratorRecipe,
    IteratorValue,
    Value,
)
from ..values.containers import (
    DictValue,
    DictViewValue,
    ListValue,
    NamedTupleValue,
    SliceValue,
    TupleValue,
    filled_dict,
)
from ..values.contexts import ContextClassValue
from ..values.default_dicts import DefaultDictValue
from ..values.deques import DequeValue
from ..values.exceptions import ExceptionValue, OuterExceptionValue, make_exception
from ..values.functions import (
    BoundMethodValue,
    CellValue,
    NestedFunctionValue,
    RealCellValue,
    UserFunctionValue,
)
from ..values.generators import GeneratorValue
from ..values.identity import ObjectIdValue, rebuilt_as_itself
from ..values.logging_calls import LoggingCallValue
from ..values.modules import ModuleValue
from ..values.ndarrays import NdarrayValue
from ..values.objects import (
    ClassValue,
    NewObjectValue,
    ObjectValue,
    PyModuleValue,
)
from ..values.ordered_dataclasses import OrderedDataclassValue, rebuild_expression
from ..values.partials import PartialValue
from ..values.real_iterators import RealRangeIteratorValue, advance
from ..values.runtime_objects import LockValue
from ..values.sets import SetValue
from ..values.symbolic import SymNumberValue
from ..values.tensor_attributes import assigned_attributes, emit_with_attributes
from ..values.tensors import TensorMethodValue, TensorValue, TorchFunctionValue
from .function_rebuild import emit_function_attributes
from .generator_rebuild import emit_generator, emit_reposition, generator_parts
from .handles import emit_made_again
from .iterator_rebuild import emit_iterator

__all__ = ["OutputCollector", "build_entry_function"]


def _new_object(cls: type, attrs: dict[str, Any]) -> Any:
    obj: Any = object.__new__(cls)
    for name, value in attrs.items():
        object.__setattr__(obj, name, value)
    return obj


class OutputCollector:
    """Collects the graph outputs a result needs (tensors computed in the graph)."""

    def __init__(self) -> None:
        self.proxies: list[Any] = []
        self._index: dict[int, int] = {}
        #: set once the graph is compiled with ``proxies`` as its outputs
        self.frozen = False

    def graph_index(self, value: TensorValue) -> int:
        key = id(value.proxy.node)
        index = self._index.get(key)
        if index is None:
            if self.frozen:  # every output must be known before the graph is compiled
                raise Unsupported(f"rebuilding {value.describe()}, which is not a graph output")
            index = len(self.proxies)
            self._index[key] = index
            self.proxies.append(value.proxy)
        return index

    def _collect_recipe(self, recipe: IteratorRecipe, seen: set[int]) -> None:
        for arg in recipe.args:
            if isinstance(arg, IteratorRecipe):
                self._collect_recipe(arg, seen)
            elif isinstance(arg, tuple):
                for item in arg:
                    self.collect(item, seen)
            else:
                self.collect(arg, seen)

    def collect(self, value: Value, seen: set[int] | None = None) -> None:
        seen = set() if seen is None else seen
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, TensorValue):
            if not value.is_input():
                self.graph_index(value)
                for item in assigned_attributes(value).values():
                    self.collect(item, seen)
        elif isinstance(value, SymNumberValue):  # a symbolic size: the graph computes it
            self.graph_index(value)  # type: ignore[arg-type]
        elif isinstance(value, (NdarrayValue, OverridingTensorValue)):
            self.collect(value.tensor, seen)
        elif isinstance(value, (TupleValue, ListValue)):
            for item in value.items:
                self.collect(item, seen)
        elif isinstance(value, DictValue):
            for _, item in value.entries.values():
                self.collect(item, seen)
        elif isinstance(value, SetValue):
            for item in value.members.values():
                self.collect(item, seen)
        elif isinstance(value, DequeValue):
            for item in value.items:
                self.collect(item, seen)
        elif isinstance(value, NewObjectValue):
            for item in value.attrs.values():
                self.collect(item, seen)
        elif isinstance(value, PartialValue):
            for item in (value.fn, value.args, value.keywords):
                self.collect(item, seen)
        elif isinstance(value, ExceptionValue):
            for item in (*value.args, *value.attrs.values()):
                self.collect(item, seen)
        elif isinstance(value, OrderedDataclassValue):
            for _, item in value.items():
                self.collect(item, seen)
        elif isinstance(value, (BoundBuiltinMethod, BoundMethodValue)):
            self.collect(value.receiver, seen)
        elif isinstance(value, DictViewValue):
            self.collect(value.owner, seen)
        elif isinstance(value, GeneratorValue):
            for item in generator_parts(value):
                self.collect(item, seen)
        elif isinstance(value, IteratorValue) and value.source is None:
            recipe = value.rebuild()
            if recipe is not None:
                self._collect_recipe(recipe, seen)
        elif isinstance(value, TensorMethodValue):
            self.collect(value.tensor, seen)
        elif isinstance(value, CellValue):
            if value.contents is not None:
                self.collect(value.contents, seen)
        elif isinstance(value, RealCellValue):
            if value.stored is not None:
                self.collect(value.stored, seen)
        elif isinstance(value, NestedFunctionValue):
            for item in (*value.default_values, *value.kwdefault_values.values()):
                self.collect(item, seen)
            for item in (*value.cell_values, *value.fields.values()):
                self.collect(item, seen)
            if value.namespace is not None:
                self.collect(value.namespace, seen)


def build_entry_function(
    em: Emitter,
    guards: list[Guard],
    examples: dict[Source, Any],
    compiled: CompiledGraph,
    collector: OutputCollector,
    result: Value | None,
    writes: list[AttributeWrite],
    *,
    tail: Callable[[dict[int, str]], None] | None = None,
    call_graph: bool = True,
    effects: SideEffects | None = None,
    root_globals: dict[str, Any] | None = None,
) -> Any:
    """The generated ``entry(L, C, G)`` of a cache entry: guards, then the run.

    The run calls the compiled graph (unless ``call_graph`` is false: a graph without
    operations), replays the attribute writes, and then either returns ``result`` rebuilt or,
    at a graph break, lets ``tail`` append the rest (given the values built so far).
    """
    misses = em.const(tuple(Miss(i) for i in range(max(len(guards), 1))))
    guard_lines = emit_guards(em, guards, examples, misses)
    em.lines = [
        "    g = 0",
        "    try:",
        *guard_lines,
        "        pass",
        "    except Exception:",
        f"        return {misses}[g]",
    ]
    indent = "    "
    if call_graph:
        inputs = [em.source(s, indent) for s in compiled.input_sources]
        em.lines.append(f"{indent}o = {em.const(compiled.fn)}({', '.join(inputs)})")
    built: dict[int, str] = {}
    if effects is not None:
        # before the attribute writes: the sources read here are the call's own inputs
        _emit_set_replays(em, effects, indent)
        emit = lambda v: _emit(em, v, collector, built, indent)  # noqa: E731
        emit_made_again(em, effects.made, emit, built, indent)
    for write in writes:
        target = em.source(write.source, indent)
        value = _emit(em, write.value, collector, built, indent)
        em.lines.append(f"{indent}setattr({target}, {em.const(write.name)}, {value})")
    if effects is not None:
        _emit_mutations(em, effects, collector, built, indent, root_globals)
    if tail is not None:
        em.lines.append(CLEARING)  # (the tail calls a resume function: see the emitter)
        tail(built)
    else:
        assert result is not None
        out = _emit(em, result, collector, built, indent)
        em.lines.append(f"{indent}return {out}")
    return em.build("sapwood_entry", list(em.lines))


def _emit_set_replays(em: Emitter, effects: SideEffects, indent: str) -> None:
    """Replay the operations on sets from the inputs on the real sets, in program order, and
    give each object whose state the trace modelled and changed its final state."""
    for target, op, args in effects.set_ops:
        assert target.source is not None
        parts = [em.source(target.source, indent)]
        for kind, arg in args:
            parts.append(em.const(arg) if kind == "const" else em.source(arg.source, indent))
        em.lines.append(f"{indent}{em.const(op)}({', '.join(parts)})")
    for state in effects.object_states.values():
        replay = state.replay()  # (constants: the final state, set at once)
        if replay is not None:
            parts = [em.source(state.source, indent), *(em.const(a) for a in replay[1])]
            em.lines.append(f"{indent}{em.const(replay[0])}({', '.join(parts)})")


def _emit_mutations(
    em: Emitter,
    effects: SideEffects,
    collector: OutputCollector,
    built: dict[int, str],
    indent: str,
    root_globals: dict[str, Any] | None,
) -> None:
    """Write back mutated input lists/dicts (their final contents) and assigned globals."""
    for container in effects.containers.values():
        assert container.source is not None
        target = em.source(container.source, indent)
        if isinstance(container, GeneratorValue):  # a real one the trace advanced
            emit = lambda v: _emit(em, v, collector, built, indent)  # noqa: E731
            emit_reposition(em, container, target, emit, indent)
        elif isinstance(container, RealRangeIteratorValue):
            em.lines.append(f"{indent}{em.const(advance)}({target}, {container.taken})")
        elif isinstance(container, ListValue):
            items = ", ".join(_emit(em, v, collector, built, indent) for v in container.items)
            em.lines.append(f"{indent}{target}[:] = [{items}]")
        else:
            assert isinstance(container, DictValue)
            replay = container.popitem_replay()
            if replay is not None:  # (as popitem leaves it: a shared-key table is combined)
                em.lines += [f"{indent}{em.const(dict.popitem)}({target})"] * replay[0]
                for k, v in replay[1]:
                    key = _emit(em, k, collector, built, indent)
                    em.lines.append(
                        f"{indent}{target}[{key}] = {_emit(em, v, collector, built, indent)}"
                    )
                continue
            pairs = ", ".join(
                f"({_emit(em, k, collector, built, indent)}, {_emit(em, v, collector, built, indent)})"
                for k, v in container.entries.values()
            )
            # dict's own methods (OrderedDict's keep its order): a subclass's overrides
            # (Counter.update adds) already ran in the trace, the entries it left are written
            owner = collections.OrderedDict if container.cls is collections.OrderedDict else dict
            em.lines.append(f"{indent}{em.const(owner.clear)}({target})")
            em.lines.append(f"{indent}{em.const(owner.update)}({target}, [{pairs}])")
    for cell in effects.cells.values():
        assert isinstance(cell, RealCellValue) and cell.stored is not None
        target = emit_cell(em, cell, indent)
        out = _emit(em, cell.stored, collector, built, indent)
        em.lines.append(f"{indent}{target}.cell_contents = {out}")
    for g, name, value in effects.globals.values():
        where = "G" if g is root_globals else em.const(g)
        if value is None:
            # (popped: assigned and deleted in the trace, it may never have reached the dict)
            em.lines.append(f"{indent}{where}.pop({em.const(name)}, None)")
        else:
            out = _emit(em, value, collector, built, indent)
            em.lines.append(f"{indent}{where}[{em.const(name)}] = {out}")


def _closure_cell_object(fn: Any, name: str) -> Any:
    return fn.__closure__[fn.__code__.co_freevars.index(name)]


def emit_cell(em: Emitter, cell: RealCellValue, indent: str) -> str:
    """The real cell object behind ``cell`` (not its contents)."""
    source = cell.source
    if isinstance(source, ClosureCellSource):
        if isinstance(source.of, FunctionSource):
            return f"C[{em.freevars[source.cell_name]}]"
        fn = em.source(source.of, indent)
        return f"{em.const(_closure_cell_object)}({fn}, {em.const(source.cell_name)})"
    if isinstance(source, AttrSource) and source.attr == "cell_contents" and source.base:
        return em.source(source.base, indent)
    raise Unsupported(f"rebuilding a closure cell reached through {source}")


def _new_function(
    code: types.CodeType,
    f_globals: dict[str, Any],
    defaults: tuple[Any, ...] | None,
    kwdefaults: dict[str, Any] | None,
    closure: tuple[Any, ...] | None,
) -> types.FunctionType:
    fn = types.FunctionType(code, f_globals, code.co_name, defaults, closure)
    if kwdefaults:
        fn.__kwdefaults__ = kwdefaults
    return fn


def _source_of(value: Value) -> Source | None:
    return value.source


#: what ``built`` holds for a value whose construction is under way
_BUILDING = "<being built>"


def _emit(
    em: Emitter, value: Value, collector: OutputCollector, built: dict[int, str], indent: str
) -> str:
    """An expression of the entry for ``value`` rebuilt (each value built once). A container
    that contains itself is refused; an object is known before its attributes, so it may."""
    known = built.get(id(value))
    if known is _BUILDING:
        raise Unsupported(f"rebuilding {value.describe()}, which contains itself")
    if known is not None:
        return known
    built[id(value)] = _BUILDING
    try:
        return _emit_value(em, value, collector, built, indent)
    finally:
        if built.get(id(value)) is _BUILDING:
            del built[id(value)]


def _emit_value(
    em: Emitter, value: Value, collector: OutputCollector, built: dict[int, str], indent: str
) -> str:
    if isinstance(value, OuterExceptionValue):
        # the exception the caller is handling: entries run outside any handler of their own
        # (and the resume functions after the handlers that broke closed), so it is the one
        # sys.exc_info() names here
        name = em.temp()
        em.lines.append(f"{indent}{name} = {em.const(sys.exc_info)}()[1]")
        built[id(value)] = name
        return name
    if isinstance(value, TensorValue):
        if value.is_input():  # (its assigned attributes are attribute writes)
            assert value.input_source is not None
            return em.source(value.input_source, indent)
        out = f"o[{collector.graph_index(value)}]"
        emit = lambda v: _emit(em, v, collector, built, indent)  # noqa: E731
        return emit_with_attributes(em, value, out, emit, built, indent)
    if isinstance(value, OverridingTensorValue) and value.source is None:
        emit = lambda v: _emit(em, v, collector, built, indent)  # noqa: E731
        return emit_made(em, value, collector.graph_index(value.tensor), emit, built, indent)
    if isinstance(value, SymNumberValue):
        return f"o[{collector.graph_index(value)}]"  # type: ignore[arg-type]
    if isinstance(value, NdarrayValue):  # numpy's view of the tensor (a scalar: its item)
        name = em.temp()
        tensor = _emit(em, value.tensor, collector, built, indent)
        em.lines.append(f"{indent}{name} = {tensor}.numpy(){'[()]' if value.scalar else ''}")
        built[id(value)] = name
        return name
    if isinstance(value, ConstantValue):
        if value.source is not None:
            return em.source(value.source, indent)
        return class_expression(em, value.value, built, indent)
    if value.source is not None and isinstance(
        value, (ListValue, DictValue, DictViewValue, TupleValue, SetValue, BuiltinValue)
    ):
        # from the inputs: the object itself (identity kept; mutations were written back)
        return em.source(value.source, indent)
    if isinstance(value, ModuleValue) and isinstance(value.source, HeldObjectSource):
        raise Unsupported(f"returning {value.describe()} built during the trace")
    if isinstance(value, (ModuleValue, ObjectValue, LockValue, OverridingTensorValue)) or (
        isinstance(value, (UserFunctionValue, PartialValue, OrderedDataclassValue))
        and value.source is not None  # (a ModelOutput passed in: itself, writes replayed)
    ):
        assert value.source is not None
        return em.source(value.source, indent)
    if isinstance(value, (BuiltinValue, ClassValue, TorchFunctionValue, PyModuleValue)):
        return class_expression(em, value.as_constant(), built, indent)
    if isinstance(value, LoggingCallValue):
        return em.const(value.method)
    if isinstance(value, (BoundBuiltinMethod, TensorMethodValue)):
        receiver = value.receiver if isinstance(value, BoundBuiltinMethod) else value.tensor
        name = em.temp()
        target = _emit(em, receiver, collector, built, indent)
        em.lines.append(f"{indent}{name} = getattr({target}, {em.const(value.name)})")
        built[id(value)] = name
        return name
    if isinstance(value, DictViewValue):  # a view of the rebuilt dict
        name = em.temp()
        target = _emit(em, value.owner, collector, built, indent)
        em.lines.append(f"{indent}{name} = getattr({target}, {em.const(value.kind)})()")
        built[id(value)] = name
        return name
    if isinstance(value, CellValue):
        # a cell made by the trace (MAKE_CELL), shared by the closures rebuilt around it
        name = em.temp()
        if value.contents is None:
            em.lines.append(f"{indent}{name} = {em.const(types.CellType)}()")
        else:
            contents = _emit(em, value.contents, collector, built, indent)
            em.lines.append(f"{indent}{name} = {em.const(types.CellType)}({contents})")
        built[id(value)] = name
        return name
    if isinstance(value, RealCellValue):
        cell = emit_cell(em, value, indent)
        if value.stored is not None:  # assigned in the trace: write back first
            stored = _emit(em, value.stored, collector, built, indent)
            em.lines.append(f"{indent}{cell}.cell_contents = {stored}")
        built[id(value)] = cell
        return cell
    if isinstance(value, NestedFunctionValue):
        name = em.temp()
        defaults = [_emit(em, v, collector, built, indent) for v in value.default_values]
        kwdefaults = [
            f"{em.const(k)}: {_emit(em, v, collector, built, indent)}"
            for k, v in value.kwdefault_values.items()
        ]
        cells = [_emit(em, v, collector, built, indent) for v in value.cell_values]
        g = em.const(value.f_globals)
        tuple_of = lambda parts: f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"  # noqa: E731
        em.lines.append(
            f"{indent}{name} = {em.const(_new_function)}({em.const(value.code)}, {g}, "
            f"{tuple_of(defaults) if defaults else 'None'}, "
            f"{{{', '.join(kwdefaults)}}}, {tuple_of(cells) if cells else 'None'})"
        )
        built[id(value)] = name
        emit_function_attributes(
            em, value, name, lambda v: _emit(em, v, collector, built, indent), built, indent
        )
        return name
    if isinstance(value, BoundMethodValue):
        name = em.temp()
        fn = _emit(em, value.function, collector, built, indent)
        receiver_text = _emit(em, value.receiver, collector, built, indent)
        em.lines.append(f"{indent}{name} = {em.const(types.MethodType)}({fn}, {receiver_text})")
        built[id(value)] = name
        return name
    if isinstance(value, ContextClassValue):
        return em.const(value.cls)
    if isinstance(value, PartialValue):
        # made, then given the traced state: __setstate__ keeps the args tuple and the
        # keywords dict themselves (shared with whatever else holds them)
        name, fn = em.temp(), _emit(em, value.fn, collector, built, indent)
        em.lines.append(f"{indent}{name} = {em.const(value.cls)}({fn})")
        built[id(value)] = name
        parts = [_emit(em, v, collector, built, indent) for v in (value.args, value.keywords)]
        em.lines.append(f"{indent}{name}.__setstate__(({fn}, {', '.join(parts)}, None))")
        return name
    if isinstance(value, GeneratorValue) and value.source is None:
        emit = lambda v: _emit(em, v, collector, built, indent)  # noqa: E731
        built[id(value)] = made = emit_generator(em, value, emit, indent)
        return made
    if isinstance(value, IteratorValue):
        return emit_iterator(
            em, value, lambda v: _emit(em, v, collector, built, indent), built, indent
        )
    if isinstance(value, SliceValue):
        return em.const(value.as_slice())
    if isinstance(value, ObjectIdValue) and rebuilt_as_itself(value.target):
        # ``id(x)`` of an object that outlives the call: its own id, taken at the hand-over
        return f"{em.const(id)}({_emit(em, value.target, collector, built, indent)})"
    name = em.temp()
    if isinstance(value, NamedTupleValue):
        parts = [_emit(em, v, collector, built, indent) for v in value.items]
        cls = class_expression(em, value.cls, built, indent)
        if hasattr(value.cls, "_make"):
            expr = f"{cls}._make(({', '.join(parts)}{',' if len(parts) == 1 else ''}))"
        else:
            expr = f"{cls}(({', '.join(parts)}{',' if len(parts) == 1 else ''}))"
    elif isinstance(value, TupleValue):
        parts = [_emit(em, v, collector, built, indent) for v in value.items]
        expr = f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
    elif isinstance(value, ListValue):
        parts = [_emit(em, v, collector, built, indent) for v in value.items]
        expr = f"[{', '.join(parts)}]"
    elif isinstance(value, DictValue):
        pairs = [
            f"({_emit(em, k, collector, built, indent)}, {_emit(em, v, collector, built, indent)})"
            for k, v in value.entries.values()
        ]
        if isinstance(value, DefaultDictValue):  # (made with its factory)
            factory = _emit(em, value.factory, collector, built, indent)
            expr = f"{em.const(value.cls)}({factory}, [{', '.join(pairs)}])"
        elif value.cls in (dict, collections.OrderedDict):
            expr = f"{em.const(value.cls)}([{', '.join(pairs)}])"
        else:  # a subclass's own __init__ would read the pairs otherwise
            expr = f"{em.const(filled_dict)}({em.const(value.cls)}, [{', '.join(pairs)}])"
    elif isinstance(value, SetValue):
        # members in the traced set's iteration order; a set of constants built so iterates
        # as the traced one only where its table comes out the same (a set's order depends
        # on its history): checked here on the keys, else the set is not rebuilt
        value.check_order()
        members = [value.members[k] for k in value.order]
        kind = value.python_type()  # a subclass that defines nothing is built as its base
        rebuilt = (
            kind([v.as_constant() for v in members])
            if all(v.is_constant() for v in members)
            else None
        )
        if rebuilt is not None and list(rebuilt) != list(value.order):
            raise Unsupported(f"rebuilding {value.describe()} in its iteration order")
        parts = [_emit(em, v, collector, built, indent) for v in members]
        expr = f"{em.const(kind)}([{', '.join(parts)}])"
    elif isinstance(value, DequeValue):
        parts = [_emit(em, v, collector, built, indent) for v in value.items]
        expr = f"{em.const(collections.deque)}([{', '.join(parts)}], {value.maxlen!r})"
    elif isinstance(value, OrderedDataclassValue):
        parts = {
            k: _emit(em, v, collector, built, indent) for k, v in value.rebuild_kwargs().items()
        }
        expr = rebuild_expression(em.const, value, parts)
    elif isinstance(value, ExceptionValue):
        args = [_emit(em, v, collector, built, indent) for v in value.args]
        pairs = [
            f"{em.const(k)}: {_emit(em, v, collector, built, indent)}"
            for k, v in value.attrs.items()
        ]
        expr = (
            f"{em.const(make_exception)}({em.const(value.cls)}, "
            f"({', '.join(args)}{',' if len(args) == 1 else ''}), {{{', '.join(pairs)}}})"
        )
    elif isinstance(value, NewObjectValue):
        # made empty and known first: its attributes may lead back to it (``self.value = self``)
        em.lines.append(f"{indent}{name} = {em.const(_new_object)}({em.const(value.cls)}, {{}})")
        built[id(value)] = name
        namespace = value.attrs.get("__dict__")
        if namespace is value.own_dict is not None and id(namespace) not in built:
            # filled in place, not assigned: a new dict would replace the object's own
            # (on 3.13 its inline values), which Python's code never did
            built[id(namespace)] = f"{name}.__dict__"
            pairs = [
                f"({_emit(em, k, collector, built, indent)}, {_emit(em, v, collector, built, indent)})"
                for k, v in namespace.entries.values()
            ]
            em.lines.append(f"{indent}{name}.__dict__.update([{', '.join(pairs)}])")
        for k, v in value.attrs.items():
            if k == "__dict__" and built.get(id(v)) == f"{name}.__dict__":
                continue
            item = _emit(em, v, collector, built, indent)
            em.lines.append(
                f"{indent}{em.const(object.__setattr__)}({name}, {em.const(k)}, {item})"
            )
        return name
    else:
        raise Unsupported(f"returning {value.describe()} from the compiled function")
    em.lines.append(f"{indent}{name} = {expr}")
    built[id(value)] = name
    return name
