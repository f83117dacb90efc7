"""Wrapping a real ``range`` iterator from the inputs as one whose numbers the trace knows.

Only a rebuilt generator's own range iterators are wrapped so (see :mod:`.real_generators`):
elsewhere a range iterator from the inputs is the loop iterator of a resume function, which
stays opaque so that one resume function (one cache entry) serves every iteration.

Guards: its type, and what ``__reduce__`` says of it (the range and the position; Python 3.13
reduces to the range still to come and no position), so an entry runs only for an iterator
with the same numbers still to come.
"""

from __future__ import annotations

from typing import Any

from sapwood_graph import GuardKind, ItemSource, Source

from ..guards.sources import ReduceSource
from ..values.base import Value
from ..values.real_iterators import RealRangeIteratorValue
from .wrapping_session import WrappingSession

__all__ = ["RANGE_ITERATOR", "wrap_range_iterator"]

RANGE_ITERATOR = type(iter(range(0)))


def wrap_range_iterator(tx: WrappingSession, iterator: Any, source: Source) -> Value | None:
    reduced = iterator.__reduce__()
    if len(reduced) != 3 or len(reduced[1]) != 1 or type(reduced[1][0]) is not range:
        return None
    numbers, position = reduced[1][0], reduced[2]
    if position is not None and type(position) is not int:
        return None
    tx.guard(GuardKind.TYPE_MATCH, source, RANGE_ITERATOR)
    reduce_source = ReduceSource(source)
    tx.guard(GuardKind.CONSTANT_MATCH, ItemSource(reduce_source, 1), (numbers,))
    tx.guard(GuardKind.CONSTANT_MATCH, ItemSource(reduce_source, 2), position)
    rest = numbers[position:] if position is not None else numbers
    return RealRangeIteratorValue(rest, source)
