"""``next()`` of a range iterator from the inputs (``it = iter(range(5))`` made before the
call, or passed to a resume function at a graph break).

A range iterator's items still to come are plain data, a range read from the real iterator
(:func:`remaining_range`). The first ``next()`` in the trace reads them and guards them, so
the entry serves only calls whose iterator has the same items to come; each ``next()`` takes
the following one. After the graph, the real iterator is advanced by as many items.

Only explicit ``next()`` calls take items: a loop over such an iterator stays a loop whose next
item is taken eagerly (a resume function per iteration would otherwise be specialised on each
position).
"""

from __future__ import annotations

from typing import Any

from sapwood_graph import GuardKind, Source

from ..guards.sources import DistinctIdsSource, ReaderSource
from ..values.base import ConstantValue, Context, Value
from ..values.iterators import RANGE_ITERATOR, LiveIteratorValue

__all__ = ["advance", "next_of_live", "remaining_range"]


def remaining_range(it: Any) -> range:
    """The items ``it``, a range iterator, has still to give (read without advancing it)."""
    _, (whole,), index = it.__reduce__()
    return whole[index or 0 :]  # (3.12+ reduce to the rest itself, index None)


def advance(it: Any, count: int) -> None:
    """Take ``count`` items of the real iterator (after the graph)."""
    for _ in range(count):
        next(it)


class _RangeIteratorState:
    """The items of a range iterator from the inputs still to come, and how many the trace
    took."""

    __slots__ = ("rest", "source", "taken")

    def __init__(self, source: Source, rest: range) -> None:
        self.source = source
        self.rest = rest
        self.taken = 0

    def replay(self) -> tuple[Any, tuple[Any, ...]] | None:
        return (advance, (self.taken,)) if self.taken else None


def next_of_live(tx: Context, it: LiveIteratorValue) -> Value | None:
    """The next item of ``it`` (None: exhausted); other live iterators break the graph."""
    real = it.obj
    if it.cls is not RANGE_ITERATOR or real is None or it.source is None:
        return it.next_value(tx)  # (refuses)
    state = tx.side_effects.state_of(real)
    if state is None:
        rest = remaining_range(real)
        tx.guard(GuardKind.CONSTANT_MATCH, ReaderSource(it.source, remaining_range), rest)
        others = [
            s.source
            for s in tx.side_effects.object_states.values()
            if isinstance(s, _RangeIteratorState)
        ]
        if others:  # (modelled apart: they must stay distinct objects)
            sources = (*others, it.source)
            tx.guard(GuardKind.CONSTANT_MATCH, DistinctIdsSource(sources), len(sources))
        state = _RangeIteratorState(it.source, rest)
        tx.side_effects.track_state(real, state)
    elif not isinstance(state, _RangeIteratorState):  # (a loop of the trace read it ahead)
        return it.next_value(tx)  # (refuses)
    elif state.source != it.source:  # (one object reached two ways: so on later calls)
        tx.guard(GuardKind.ALIAS_MATCH, it.source, state.source)
    if state.taken >= len(state.rest):
        return None
    item = state.rest[state.taken]
    state.taken += 1
    return ConstantValue(item)
