"""Iterators. Each is finite and fully known at trace time (a list of values plus a cursor),
or lazily maps/filters another iterator through a callable the interpreter inlines.

Invariant: advancing an iterator never touches the real objects it came from; an iterator
built from an input container iterates over the container's guarded snapshot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import Unsupported
from .base import Value

if TYPE_CHECKING:
    from ..interpreter.session import TraceSession

__all__ = ["IteratorValue", "ListIteratorValue", "MapIteratorValue", "StopIterationValue"]


class IteratorValue(Value):
    """Base of iterators: ``next_value`` returns the next value or ``None`` when exhausted."""

    __slots__ = ()

    def python_type(self) -> type:
        return type(iter(()))

    def next_value(self, tx: TraceSession) -> Value | None:
        raise NotImplementedError

    def remaining(self) -> list[Value] | None:
        """The items still to come, if known without running anything (for graph breaks
        inside loops, where the rest of the loop gets them as a tuple); else None."""
        return None

    def iterate(self, tx: TraceSession) -> Value:
        return self

    def unpack(self, tx: TraceSession) -> list[Value]:
        out = []
        while (v := self.next_value(tx)) is not None:
            out.append(v)
            if len(out) > 100_000:
                raise Unsupported("an iterator with more than 100000 items")
        return out

    def truth(self, tx: TraceSession) -> bool:
        return True


class StopIterationValue(Exception):
    """Raised by ``next()`` on an exhausted iterator during the trace."""


class ListIteratorValue(IteratorValue):
    """An iterator over a known list of values."""

    __slots__ = ("index", "items")

    def __init__(self, items: list[Value]) -> None:
        super().__init__(None)
        self.items = items
        self.index = 0

    def describe(self) -> str:
        return "an iterator"

    def next_value(self, tx: TraceSession) -> Value | None:
        if self.index >= len(self.items):
            return None
        v = self.items[self.index]
        self.index += 1
        return v

    def remaining(self) -> list[Value] | None:
        return list(self.items[self.index :])


class MapIteratorValue(IteratorValue):
    """``map(fn, *its)``, ``filter(fn, it)``: applies an inlined callable lazily, in order."""

    __slots__ = ("fn", "kind", "sources")

    def __init__(self, kind: str, fn: Value | None, sources: list[IteratorValue]) -> None:
        super().__init__(None)
        self.kind = kind
        self.fn = fn
        self.sources = sources

    def describe(self) -> str:
        return f"a {self.kind} iterator"

    def remaining(self) -> list[Value] | None:
        from .containers import TupleValue

        if self.kind != "zip":
            return None  # map/filter would run their callable
        parts = [it.remaining() for it in self.sources]
        if any(p is None for p in parts):
            return None
        return [TupleValue(list(items)) for items in zip(*parts)]  # type: ignore[arg-type]

    def next_value(self, tx: TraceSession) -> Value | None:
        from .containers import TupleValue

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
