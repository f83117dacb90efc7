"""The next item of a loop over a real iterator from the inputs, read as data of the call.

A resume function that continues a loop body after a graph break gets the loop's iterator as
a real object. Where that iterator's next item can be read without running user code — a
range, list or tuple iterator, or ``enumerate``/``zip`` over those — its ``FOR_ITER`` is
traced: whether an item is left and the item itself are read by the entry from the real
iterator (without advancing it), the item as a graph input (an int as a symbol, so one graph
serves every iteration), and after the graph the real iterator is advanced once with
``next()``. So one resume function runs the rest of the body, the loop's next step and the
body up to the break again, in one graph, and a loop that runs out is the other graph of that
function (two per break site in a loop, whatever the trip count).

Other iterators (generators, dict views, ``map``), a second ``FOR_ITER`` of the same iterator
in one trace, and a list the trace changed before the item is read keep the ``next`` graph
break, where the entry takes the item eagerly.
"""

from __future__ import annotations

from typing import Any

from sapwood_graph import GuardKind, ItemSource, Source

from ..guards.sources import ReaderSource
from ..values.base import Context, Value
from ..values.containers import TupleValue
from ..values.iterators import RANGE_ITERATOR, LiveIteratorValue
from .range_iterator_inputs import remaining_range

__all__ = ["has_next_item", "loop_next_of_live", "next_item"]

_LIST_ITERATOR = type(iter([]))
_TUPLE_ITERATOR = type(iter(()))
_NO_ITEM = object()  # (what next_item reads of an iterator with nothing left)


def _peek(it: Any) -> tuple[bool, Any]:
    """Whether ``it`` has an item left, and that item (read without advancing ``it``)."""
    cls = type(it)
    if cls is RANGE_ITERATOR:
        rest = remaining_range(it)
        return (True, rest[0]) if rest else (False, _NO_ITEM)
    if cls is _LIST_ITERATOR or cls is _TUPLE_ITERATOR:
        parts = it.__reduce__()
        if len(parts) < 3:  # (exhausted: CPython dropped its sequence)
            return False, _NO_ITEM
        seq, index = parts[1][0], parts[2]
        return (True, seq[index]) if index < len(seq) else (False, _NO_ITEM)
    if cls is enumerate:
        inner, count = it.__reduce__()[1]
        more, item = _peek(inner)
        return (True, (count, item)) if more else (False, _NO_ITEM)
    if cls is zip:
        items = []
        for inner in it.__reduce__()[1]:
            more, item = _peek(inner)
            if not more:
                return False, _NO_ITEM
            items.append(item)
        return True, tuple(items)
    raise TypeError(f"cannot read ahead in a {cls.__name__}")


def has_next_item(it: Any) -> bool:
    """Whether the loop over ``it`` goes on (guarded)."""
    return _peek(it)[0]


def next_item(it: Any) -> Any:
    """The item the loop over ``it`` gets next (a graph input; a marker when none is left)."""
    return _peek(it)[1]


def _peekable(it: Any, tx: Context) -> bool:
    """Whether the items of ``it`` to come are data the entry can read (no user code runs, no
    strict ``zip`` that raises, no list the trace already changed)."""
    cls = type(it)
    if cls is RANGE_ITERATOR or cls is _TUPLE_ITERATOR:
        return True
    if cls is _LIST_ITERATOR:
        parts = it.__reduce__()
        if len(parts) < 3:
            return True
        held = tx.known(parts[1][0])
        return held is None or id(held) not in tx.side_effects.containers
    if cls is enumerate:
        inner, count = it.__reduce__()[1]
        return type(count) is int and _peekable(inner, tx)
    if cls is zip:
        parts = it.__reduce__()
        return len(parts) == 2 and all(_peekable(inner, tx) for inner in parts[1])
    return False


class _AdvancedOnce:
    """The real iterator at ``source`` goes one step after the graph, as ``FOR_ITER`` did in
    the trace (and an exhausted one is left exhausted, as CPython leaves it)."""

    __slots__ = ("source",)

    def __init__(self, source: Source) -> None:
        self.source = source

    def replay(self) -> tuple[Any, tuple[Any, ...]] | None:
        return (_step, ())


def _step(it: Any) -> None:
    next(it, None)


def _item_value(tx: Context, item: Any, source: Source) -> Value:
    if type(item) is int:  # a loop index: one graph for every iteration
        tx.guard(GuardKind.TYPE_MATCH, source, int)
        return tx.graph.symint_input(tx, item, source)
    if type(item) is tuple:
        tx.guard(GuardKind.TYPE_MATCH, source, tuple)
        tx.guard_len(source, len(item))
        return TupleValue([_item_value(tx, v, ItemSource(source, i)) for i, v in enumerate(item)])
    return tx.wrap(item, source)


def loop_next_of_live(tx: Context, it: LiveIteratorValue) -> Value | None:
    """The next item of a loop (``FOR_ITER``) over ``it`` (None: the loop ends); refused (a
    ``next`` graph break) where it cannot be read ahead as data."""
    real = it.obj
    if (
        real is None
        or it.source is None
        or tx.side_effects.state_of(real) is not None
        or not _peekable(real, tx)
    ):
        return it.next_value(tx)  # (refuses)
    more, item = _peek(real)
    tx.guard(GuardKind.CONSTANT_MATCH, ReaderSource(it.source, has_next_item), more)
    tx.side_effects.track_state(real, _AdvancedOnce(it.source))
    if not more:
        return None
    return _item_value(tx, item, ReaderSource(it.source, next_item))
