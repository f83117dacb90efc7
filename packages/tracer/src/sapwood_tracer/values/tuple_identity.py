"""Tuples whose object the trace knows: ``a is b`` between tuples, where it is certain.

A tuple value is rebuilt from its items, so in general two tuple values may or may not be
one object (two reads reaching the same tuple, a tuple a folded call handed back). Two
kinds of tuple are known for what object they are:

* a **new** tuple: one CPython certainly allocated in this trace (``BUILD_TUPLE``, a
  concatenation or repetition past CPython's shortcuts). It is no object that existed
  before it (a code constant, an object read from the inputs), and no other new tuple;
* a **code constant** (``LOAD_CONST``): the very object of the code's constants, kept, so
  two constants are one object exactly when they are (``(0, 1) is (0, 1)`` in one code
  object may be true: the compiler shares equal constants).

Invariants:

* A :class:`KnownTupleValue` is made only where the object is known as above; a slice of
  one is the tuple itself when it takes all of it in order (CPython's shortcut), else a new
  tuple (or the empty tuple); every other operation on it (``tuple(t)`` of a subclass, a
  folded call) makes an ordinary
  :class:`~sapwood_tracer.values.containers.TupleValue`, for which nothing is claimed.
* CPython's shortcuts that hand back an operand are modelled by handing back the operand's
  value itself: ``t + ()``, ``() + t`` and ``t * 1`` of an exact tuple are ``t``.
* :func:`tuples_identical` answers only what is certain; None otherwise (the caller refuses).
"""

from __future__ import annotations

from typing import Any

from .base import Value
from .containers import TupleValue

__all__ = ["KnownTupleValue", "concatenated", "repeated", "tuples_identical"]

#: the ``constant`` of a tuple made by this trace
_NEW = object()


class KnownTupleValue(TupleValue):
    """An exact tuple whose object is known: new in this trace, or a code constant."""

    __slots__ = ("constant",)

    def __init__(self, items: list[Value], constant: Any = _NEW) -> None:
        super().__init__(items)
        self.constant = constant

    @property
    def is_new(self) -> bool:
        return self.constant is _NEW

    def _new(self, items: list[Value]) -> Value:
        # a slice that is not all of it (that one is the tuple itself): a new tuple, but
        # for one of no items, which is CPython's shared empty tuple
        return KnownTupleValue(items) if items else TupleValue([])


def _exact(value: Value) -> bool:
    return isinstance(value, TupleValue) and value.python_type() is tuple


def concatenated(a: Value, b: Value) -> Value:
    """``a + b`` of two tuple values, as CPython makes it: an empty operand hands back the
    other when that one is an exact tuple; a result of no items is the empty tuple."""
    assert isinstance(a, TupleValue) and isinstance(b, TupleValue)
    if not b.items and _exact(a):
        return a
    if not a.items and _exact(b):
        return b
    if not a.items and not b.items:
        return TupleValue([])  # (the shared empty tuple)
    return KnownTupleValue(a.items + b.items)


def repeated(seq: Value, times: int) -> Value:
    """``seq * times`` of a tuple value, as CPython makes it: an exact tuple that is empty or
    repeated once is handed back; no items make the empty tuple."""
    assert isinstance(seq, TupleValue)
    if (not seq.items or times == 1) and _exact(seq):
        return seq
    if not seq.items or times <= 0:
        return TupleValue([])
    return KnownTupleValue(seq.items * times)


def tuples_identical(a: Value, b: Value) -> bool | None:
    """``a is b`` for two different tuple values, where the trace is certain; else None."""
    if _exact(a) and _exact(b) and not a.items and not b.items:  # type: ignore[attr-defined]
        return True  # CPython has one empty tuple
    if not isinstance(a, KnownTupleValue):
        a, b = b, a
    if not isinstance(a, KnownTupleValue):
        return None
    if isinstance(b, KnownTupleValue):
        if a.is_new or b.is_new:
            return False  # (two values: two allocations, or an allocation and a constant)
        return a.constant is b.constant
    if a.is_new and isinstance(b, TupleValue) and b.source is not None:
        return False  # an object of the inputs existed before this trace made ``a``
    return None
