"""Side effects of a trace on objects that existed before the call.

Five kinds: attribute writes (``obj.attr = value`` on an object or module from the inputs),
mutations of lists and dicts from the inputs (``xs.append(y)``, ``d[k] = v``), operations on
sets from the inputs (``s.add(k)``, ``s |= t``), global assignments, and the state of objects
whose state the trace models as data (a random generator's, a range iterator's position: see
:class:`ObjectState`). During the trace
later reads see the new values; after the graph runs, the effects are applied to the real
objects: the set operations replayed in program order (a set's final order depends on its
history, not only on its members), each modelled object's final state, attribute writes in program order, each mutated
container's final contents, then each assigned global's final value.

Invariant: a write is keyed by the real object's identity, not by the source it was reached
through, so two paths to one object see one pending value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sapwood_graph import Source

from ..guards.emitter import same_constant
from ..values.base import Value

__all__ = ["AttributeWrite", "ObjectState", "SideEffects"]


class ObjectState(Protocol):
    """The trace's model of a real object's state (a random generator's, ...): after the
    graph, ``fn(<the object at source>, *args)`` of :meth:`replay` gives the object its final
    state (None: the trace did not change it)."""

    source: Source

    def replay(self) -> tuple[Callable[..., Any], tuple[Any, ...]] | None: ...


@dataclass(slots=True)
class AttributeWrite:
    """``setattr(<obj at source>, name, <value>)`` to replay after the graph ran."""

    obj: Any
    source: Source
    name: str
    value: Value


class SideEffects:
    """The attribute writes recorded by one trace, in order."""

    def __init__(self) -> None:
        self.writes: list[AttributeWrite] = []
        self._pending: dict[tuple[int, str], Value] = {}
        self.class_attr_names: set[str] = set()
        #: values made by the trace that the entry makes again, in order (see make_again)
        self.made: list[Value] = []
        #: lists/dicts from the inputs that the trace mutated, by id, in first-mutation order
        self.containers: dict[int, Value] = {}
        #: real closure cells assigned by the trace (RealCellValue, by id)
        self.cells: dict[int, Value] = {}
        #: operations on sets from the inputs, in program order: (the set, the set method,
        #: its arguments as ``("const", obj)`` or ``("source", value from the inputs)``)
        self.set_ops: list[tuple[Value, Any, list[tuple[str, Any]]]] = []
        #: globals assigned by the trace: (globals dict, name) -> value (None: deleted)
        self.globals: dict[tuple[int, str], tuple[dict[str, Any], str, Value | None]] = {}
        #: models of real objects' states, by the real object's id, in first-use order
        self.object_states: dict[int, ObjectState] = {}
        #: how many effects were recorded so far (any kind, repeats counted): a step of the
        #: trace that recorded none can be undone by forgetting it
        self.changes = 0
        self._written: set[int] = set()

    def state_of(self, obj: Any) -> Any:
        """The trace's model of ``obj``'s state, if it has one yet."""
        return self.object_states.get(id(obj))

    def track_state(self, obj: Any, state: ObjectState) -> None:
        self.changes += 1
        self.object_states[id(obj)] = state

    def store_cell(self, cell: Value) -> None:
        """A real closure cell (``nonlocal``) was assigned: write its last value back."""
        self.changes += 1
        self.cells.setdefault(id(cell), cell)

    def make_again(self, value: Value) -> None:
        self.changes += 1
        self.made.append(value)

    def mutate_container(self, container: Value) -> None:
        """``container`` (a list or dict from the inputs) changed: write back its contents."""
        self.changes += 1
        self.containers.setdefault(id(container), container)

    def replay_set_op(self, target: Value, op: Any, args: list[tuple[str, Any]]) -> None:
        """``op(target, *args)`` changed ``target``, a set from the inputs: replay it."""
        self.changes += 1
        self.set_ops.append((target, op, args))

    def store_global(self, f_globals: dict[str, Any], name: str, value: Value | None) -> None:
        self.changes += 1
        key = (id(f_globals), name)
        self.globals.pop(key, None)  # re-insert: replay in last-write order
        self.globals[key] = (f_globals, name, value)

    def pending_global(self, f_globals: dict[str, Any], name: str) -> tuple[bool, Value | None]:
        """``(True, value)`` if the trace assigned global ``name`` (value None: deleted)."""
        known = self.globals.get((id(f_globals), name))
        if known is None:
            return False, None
        return True, known[2]

    def store_attr(self, target: Value, name: str, value: Value, obj: Any = None) -> None:
        """A write of ``target.name`` (``obj``: the real object, where the value does not
        hold it), replayed after the graph."""
        if obj is None:
            obj = getattr(target, "obj", None)
        if obj is None:
            obj = getattr(target, "module", None)
        if obj is None:
            obj = target.cls  # type: ignore[attr-defined]
            self.class_attr_names.add(name)
        assert target.source is not None
        self.changes += 1
        self.writes.append(AttributeWrite(obj, target.source, name, value))
        self._pending[(id(obj), name)] = value
        self._written.add(id(obj))

    def wrote_to(self, obj: Any) -> bool:
        """Whether the trace assigned any attribute of ``obj``."""
        return id(obj) in self._written

    def values(self) -> list[Value]:
        """Every value the replay of containers and globals needs (for graph outputs)."""
        out: list[Value] = list(self.containers.values())
        out += [v for _, _, v in self.globals.values() if v is not None]
        out += [c.stored for c in self.cells.values() if c.stored is not None]  # type: ignore[attr-defined]
        return out

    def mark(self) -> tuple[int, ...]:
        """Where the record stands now, for :meth:`restored_since`."""
        return (self.changes, len(self.writes))

    def restored_since(self, mark: tuple[int, ...], pending: dict[tuple[int, str], Value]) -> bool:
        """Whether everything recorded since ``mark`` is attribute writes that put back what
        was there before (``pending``: the pending writes at ``mark``): a flag set and reset,
        as a context manager does. Anything else recorded since (a container, a global, a
        cell, a state) answers False."""
        changes, writes = mark
        new = self.writes[writes:]
        if self.changes - changes != len(new):
            return False
        for write in new:
            key = (id(write.obj), write.name)
            final, earlier = self._pending[key], pending.get(key)
            if earlier is not None:
                if final is not earlier and not _same_constant(final, earlier):
                    return False
            elif not final.is_constant() or not _same_constant_as_real(
                final, write.obj, write.name
            ):
                return False
        return True

    def pending_writes(self) -> dict[tuple[int, str], Value]:
        """A copy of the values pending per (object id, attribute name)."""
        return dict(self._pending)

    def written_values(self) -> list[Value]:
        """Every value the trace has written so far into something that existed before it
        (attributes, containers, globals, cells): what later code can reach through them."""
        return [w.value for w in self.writes] + self.values()

    def recorded(self) -> bool:
        """Whether the trace changed anything the entry replays after the graph."""
        return bool(
            self.writes
            or self.containers
            or self.cells
            or self.set_ops
            or self.globals
            or self.object_states
            or self.made
        )

    def pending_attr(self, obj: Any, name: str) -> Value | None:
        return self._pending.get((id(obj), name))

    def final_writes(self) -> list[AttributeWrite]:
        """The writes to replay: the last write of each (object, name), in first-write order."""
        last: dict[tuple[int, str], AttributeWrite] = {}
        for write in self.writes:
            last[(id(write.obj), write.name)] = write
        order: dict[tuple[int, str], None] = {}
        for write in self.writes:
            order.setdefault((id(write.obj), write.name), None)
        return [last[k] for k in order]


_MISSING = object()


def _same_constant(a: Value, b: Value) -> bool:
    return a.is_constant() and b.is_constant() and same_constant(a.as_constant(), b.as_constant())


def _same_constant_as_real(value: Value, obj: Any, name: str) -> bool:
    """Whether constant ``value`` is what ``obj.name`` holds now (before the replay)."""
    real = (
        obj.__dict__.get(name, _MISSING) if isinstance(obj, type) else getattr(obj, name, _MISSING)
    )
    return real is not _MISSING and same_constant(real, value.as_constant())
