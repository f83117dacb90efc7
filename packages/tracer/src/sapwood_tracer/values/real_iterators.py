"""Real iterator objects from the inputs whose state Python lets the trace read.

A ``range`` iterator passed in (the loop iterator of a generator rebuilt after a graph break,
say) says through ``__reduce__`` which numbers it still has to give. The trace takes them one
by one like from an iterator it made; the entry then takes as many from the real iterator as
the trace did (no user code runs: the numbers are the range's), so the real one ends where
the trace left it, exhausted included.

Invariant: the value is passed on as the real object (its source), never made again, so
whoever else holds the iterator sees it advance.
"""

from __future__ import annotations

from typing import Any

from .base import Context, IteratorRecipe, RangeIteratorValue, Value

__all__ = ["RealRangeIteratorValue", "advance"]


class RealRangeIteratorValue(RangeIteratorValue):
    """A real ``range`` iterator from the inputs with the numbers ``rest`` still to come."""

    __slots__ = ("taken",)

    def __init__(self, rest: range, source: Any) -> None:
        super().__init__(rest)
        self.source = source
        #: how many times the trace asked for the next number (the last may have found none)
        self.taken = 0

    def describe(self) -> str:
        return "a real range iterator"

    def next_value(self, tx: Context) -> Value | None:
        self.taken += 1
        tx.side_effects.mutate_container(self)  # (the entry advances the real one as much)
        return super().next_value(tx)

    def remaining(self) -> list[Value] | None:
        return None  # (taken one by one: each is counted)

    def rebuild(self) -> IteratorRecipe | None:
        return None  # (passed on as itself, through its source)


def advance(iterator: Any, count: int) -> None:
    """Take ``count`` items from ``iterator`` (a range iterator: nothing else runs)."""
    for _ in range(count):
        next(iterator, None)
