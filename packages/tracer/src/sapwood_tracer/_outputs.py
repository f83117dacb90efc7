"""Rebuilding the user-visible result, and replaying side effects, after the graph ran.

The trace ends with a value (the frame's return value) and a list of attribute writes. Each
is turned into a *plan*: graph outputs for tensors computed in the graph, the input object
itself for anything that came from the inputs (so identity and aliasing with inputs are
kept), constants, and fresh containers/objects rebuilt around those. The entry function is
generated code (see ``_codegen``): it checks the guards, calls the compiled graph, replays
the writes and builds the plan.

Invariants:

* A value that appears several times in the result is built once (a list returned twice is
  one list, as in Python).
* Objects made during the trace are rebuilt without running user code: their class's
  ``__new__`` is not called through ``__init__``; attributes are set with
  ``object.__setattr__``, which also works for frozen dataclasses.
"""

from __future__ import annotations

from typing import Any

from sapwood_graph import CompiledGraph, Guard, Source

from ._codegen import Emitter, Miss, emit_guards
from ._side_effects import AttributeWrite
from ._sources import HeldObjectSource
from .errors import Unsupported
from .values.base import ConstantValue, Value
from .values.containers import (
    DictValue,
    ListValue,
    NamedTupleValue,
    SetValue,
    SliceValue,
    TupleValue,
)
from .values.functions import BuiltinValue, UserFunctionValue
from .values.modules import ModuleValue
from .values.objects import ClassValue, NewObjectValue, ObjectValue, PyModuleValue
from .values.ordered_dataclasses import OrderedDataclassValue
from .values.tensors import TensorValue, TorchFunctionValue

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

    def graph_index(self, value: TensorValue) -> int:
        key = id(value.proxy.node)
        index = self._index.get(key)
        if index is None:
            index = len(self.proxies)
            self._index[key] = index
            self.proxies.append(value.proxy)
        return index

    def collect(self, value: Value, seen: set[int] | None = None) -> None:
        seen = set() if seen is None else seen
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, TensorValue):
            if not value.is_input():
                self.graph_index(value)
        elif isinstance(value, (TupleValue, ListValue)):
            for item in value.items:
                self.collect(item, seen)
        elif isinstance(value, DictValue):
            for _, item in value.entries.values():
                self.collect(item, seen)
        elif isinstance(value, SetValue):
            for item in value.members.values():
                self.collect(item, seen)
        elif isinstance(value, NewObjectValue):
            for item in value.attrs.values():
                self.collect(item, seen)
        elif isinstance(value, OrderedDataclassValue):
            for _, item in value.items():
                self.collect(item, seen)


def build_entry_function(
    em: Emitter,
    guards: list[Guard],
    examples: dict[Source, Any],
    compiled: CompiledGraph,
    collector: OutputCollector,
    result: Value,
    writes: list[AttributeWrite],
) -> Any:
    """The generated ``entry(L, C, G)`` of a cache entry: guards, then the run."""
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
    inputs = [em.source(s, indent) for s in compiled.input_sources]
    em.lines.append(f"{indent}o = {em.const(compiled.fn)}({', '.join(inputs)})")
    built: dict[int, str] = {}
    for write in writes:
        target = em.source(write.source, indent)
        value = _emit(em, write.value, collector, built, indent)
        em.lines.append(f"{indent}setattr({target}, {em.const(write.name)}, {value})")
    out = _emit(em, result, collector, built, indent)
    em.lines.append(f"{indent}return {out}")
    return em.build("sapwood_entry", list(em.lines))


def _source_of(value: Value) -> Source | None:
    return value.source


def _emit(
    em: Emitter, value: Value, collector: OutputCollector, built: dict[int, str], indent: str
) -> str:
    known = built.get(id(value))
    if known is not None:
        return known
    if isinstance(value, TensorValue):
        if value.is_input():
            assert value.input_source is not None
            return em.source(value.input_source, indent)
        return f"o[{collector.graph_index(value)}]"
    if isinstance(value, ConstantValue):
        if value.source is not None:
            return em.source(value.source, indent)
        return em.const(value.value)
    if isinstance(value, ModuleValue) and isinstance(value.source, HeldObjectSource):
        raise Unsupported(f"returning {value.describe()} built during the trace")
    if isinstance(value, (ModuleValue, ObjectValue)) or (
        isinstance(value, UserFunctionValue) and value.source is not None
    ):
        assert value.source is not None
        return em.source(value.source, indent)
    if isinstance(value, (BuiltinValue, ClassValue, TorchFunctionValue, PyModuleValue)):
        return em.const(value.as_constant())
    if isinstance(value, SliceValue):
        return em.const(value.as_slice())
    name = em.temp()
    if isinstance(value, NamedTupleValue):
        parts = [_emit(em, v, collector, built, indent) for v in value.items]
        if hasattr(value.cls, "_make"):
            expr = (
                f"{em.const(value.cls)}._make(({', '.join(parts)}{',' if len(parts) == 1 else ''}))"
            )
        else:
            expr = f"{em.const(value.cls)}(({', '.join(parts)}{',' if len(parts) == 1 else ''}))"
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
        expr = f"{em.const(value.cls)}([{', '.join(pairs)}])"
    elif isinstance(value, SetValue):
        parts = [_emit(em, v, collector, built, indent) for v in value.members.values()]
        kind = frozenset if value.frozen else set
        expr = f"{em.const(kind)}([{', '.join(parts)}])"
    elif isinstance(value, OrderedDataclassValue):
        pairs = [
            f"{em.const(k)}: {_emit(em, v, collector, built, indent)}"
            for k, v in value.rebuild_kwargs().items()
        ]
        expr = f"{em.const(value.cls)}(**{{{', '.join(pairs)}}})"
    elif isinstance(value, NewObjectValue):
        pairs = [
            f"{em.const(k)}: {_emit(em, v, collector, built, indent)}"
            for k, v in value.attrs.items()
        ]
        expr = f"{em.const(_new_object)}({em.const(value.cls)}, {{{', '.join(pairs)}}})"
    else:
        raise Unsupported(f"returning {value.describe()} from the compiled function")
    em.lines.append(f"{indent}{name} = {expr}")
    built[id(value)] = name
    return name
