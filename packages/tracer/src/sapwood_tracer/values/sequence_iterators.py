"""Iterators over user objects that the tracer makes again at a graph break: the old
sequence protocol (``__getitem__`` and no ``__iter__``), and the real functions a resume
function calls to make them (modelled by :mod:`sapwood_tracer.pymodel.iteration`)."""

from __future__ import annotations

from typing import Any

from ..errors import TracedException
from .attributes import lookup_mro
from .base import ConstantValue, Context, IteratorRecipe, IteratorValue, Value
from .exceptions import catches
from .slot_results import presized

__all__ = ["NextOnly", "SequenceIteratorValue", "sequence_iterator_at", "user_iterator_of"]


def user_iterator_of(target: Any) -> Any:
    """The object with ``__next__`` that a loop iterates (made again at a graph break: the
    loop goes on with the object itself, without calling ``__iter__`` again)."""
    return target


class NextOnly:
    """Iterates an object by its class's ``__next__`` alone: what a builtin iterator made
    again around the object at a graph break (``enumerate(...)``, ``zip(...)``) iterates, so
    that making it does not call the object's ``__iter__`` a second time."""

    __slots__ = ("target",)

    def __init__(self, target: Any) -> None:
        self.target = target

    def __iter__(self) -> NextOnly:
        return self

    def __next__(self) -> Any:
        return type(self.target).__next__(self.target)


class SequenceIteratorValue(IteratorValue):
    """``iter(obj)`` of an object whose class has ``__getitem__`` and no ``__iter__``: each
    step inlines ``obj[i]`` for the next ``i``; IndexError or StopIteration there ends the
    iteration, for good (Python's iterator lets the object go)."""

    __slots__ = ("index", "target")

    def __init__(self, target: Value) -> None:
        super().__init__(None)
        self.target: Value | None = target
        self.index = 0

    def describe(self) -> str:
        return "an iterator over a sequence"

    def python_type(self) -> type:
        return _SEQUENCE_ITERATOR

    def rebuild(self) -> IteratorRecipe | None:
        if self.target is None:
            return IteratorRecipe(iter, ((),))
        return IteratorRecipe(sequence_iterator_at, (self.target, ConstantValue(self.index)))

    def collect(self, tx: Context) -> list[Value]:
        # the hint of Python's iterator is the length of the object (its __len__, if it has
        # one), less the index; a TypeError there gives no hint
        if self.target is not None and lookup_mro(self.target.python_type(), "__len__")[0]:
            try:
                presized(self.target.length(tx) - self.index)
            except TracedException as raised:
                if not catches(raised, TypeError):
                    raise
        return self.unpack(tx)

    def next_value(self, tx: Context) -> Value | None:
        if self.target is None:
            return None
        try:
            value = self.target.getitem(tx, ConstantValue(self.index))
        except TracedException as raised:
            if catches(raised, (IndexError, StopIteration)):
                self.target = None
                return None
            raise
        self.index += 1
        return value


def sequence_iterator_at(target: Any, index: int) -> Any:
    """Python's iterator over an object with ``__getitem__`` and no ``__iter__``, moved on to
    ``index`` without calling ``__getitem__`` (made again at a graph break)."""
    iterator = iter(target)
    iterator.__setstate__(index)
    return iterator


class _OldSequence:
    def __getitem__(self, index: int) -> int:
        raise IndexError


_SEQUENCE_ITERATOR = type(iter(_OldSequence()))
