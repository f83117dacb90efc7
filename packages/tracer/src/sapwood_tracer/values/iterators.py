"""Iterators. Each is finite and fully known at trace time (a list of values plus a cursor),
or lazily maps/filters another iterator through a callable the interpreter inlines, or is a
real iterator object passed in (:class:`LiveIteratorValue`), whose items are not known.

Invariant: advancing an iterator never touches the real objects it came from; an iterator
built from an input container iterates over the container's guarded snapshot. A live
iterator is never advanced by the trace: asking for its next item is a graph break, where the
entry calls ``next()`` on the real object (except ``next()`` of a range iterator, whose items
to come are data: :mod:`sapwood_tracer.pymodel.range_iterator_inputs` advances the real one
after the graph).
"""

from __future__ import annotations

from typing import Any

from ..errors import Unsupported
from .base import ConstantValue, Context, IteratorRecipe, IteratorValue, Value
from .containers import TupleValue

__all__ = ["RANGE_ITERATOR", "LiveIteratorValue", "MapIteratorValue"]

RANGE_ITERATOR = type(iter(range(0)))


class LiveIteratorValue(IteratorValue):
    """A real iterator object from the inputs (an iterator a loop was running over when the
    graph broke, passed to the resume function as itself; a generator or ``iter()`` result
    the caller passed). Guarded by type only: its position and items are unknown, so the
    trace stops where the next item is needed (``FOR_ITER``: a ``next`` graph break) and
    every other use of it is refused (a graph break), while passing it on keeps its identity.
    Its object is kept for identity (``is``: one object reached through two sources, a
    global and a weak reference's target, is one value, behind an alias guard) and, for a
    range iterator, for its position (:mod:`sapwood_tracer.pymodel.range_iterator_inputs`).
    """

    __slots__ = ("cls", "obj")

    def __init__(self, obj: Any, source: Any) -> None:
        super().__init__(source)
        self.cls = type(obj)
        self.obj = obj

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"a real {self.cls.__name__} object"

    def next_value(self, tx: Context) -> Value | None:
        raise Unsupported(
            f"the next item of {self.describe()}, taken eagerly (its items are not known to the"
            " trace: a loop whose body breaks the graph, or an iterator from the caller)"
        )

    def rebuild(self) -> IteratorRecipe | None:
        return None  # (it is passed on as itself, through its source)


class MapIteratorValue(IteratorValue):
    """``map(fn, *its)``, ``filter(fn, it)``: applies an inlined callable lazily, in order."""

    __slots__ = ("fn", "kind", "sources")

    def __init__(self, kind: str, fn: Value | None, sources: list[IteratorValue]) -> None:
        super().__init__(None)
        self.kind = kind
        self.fn = fn
        self.sources = sources

    def python_type(self) -> type:
        return {"map": map, "filter": filter, "zip": zip}[self.kind]

    def describe(self) -> str:
        return f"a {self.kind} iterator"

    def rebuild(self) -> IteratorRecipe | None:
        # the same combinator over its sources (map/filter with their callable); each source
        # is a value of its own, made once however many others hold it
        if any(it.source is None and it.rebuild() is None for it in self.sources):
            return None
        parts = tuple(self.sources)
        if self.kind == "zip":
            return IteratorRecipe(zip, parts)
        fn: Value = self.fn if self.fn is not None else ConstantValue(None)
        return IteratorRecipe(map if self.kind == "map" else filter, (fn, *parts))

    def next_value(self, tx: Context) -> Value | None:
        while True:
            parts = []
            for it in self.sources:
                v = it.next_value(tx)
                if v is None:
                    return None
                parts.append(v)
            if self.kind == "map":
                assert self.fn is not None
                return tx.call(self.fn, parts, {})
            if self.kind == "zip":
                return TupleValue(parts)
            (item,) = parts
            keep = item if self.fn is None else tx.call(self.fn, [item], {})
            if tx.truth(keep):
                return item
