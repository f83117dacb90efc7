"""``collections.deque`` objects made during the trace.

A deque built in the compiled function is a list of values with a ``maxlen``; its methods
act on the list as the C deque acts on its blocks (a full bounded deque drops from the other
end). It is private to the trace until a graph break or the return, where it is built again
(``deque(items, maxlen)``): each call makes a new deque, as Python does.

Every mutation counts in ``state``, as the C deque's does, and an iterator over the deque
fails like Python's once the state moved (``deque mutated during iteration``). A graph break
inside a loop over a deque cannot pass the live iterator on: it is refused.

Deques from the inputs and subclasses of deque are not modelled (a graph break).
"""

from __future__ import annotations

import collections
from typing import Any

from ..errors import Unsupported
from .base import (
    BoundBuiltinMethod,
    ConstantValue,
    Context,
    IteratorValue,
    ListIteratorValue,
    Value,
    attribute_missing,
)
from .exceptions import python_error

__all__ = ["DequeValue", "make_deque"]

_DEQUE_ITERATOR = type(iter(collections.deque()))

#: the methods modelled, with how many positional arguments each takes
_METHODS = {
    "append": 1,
    "appendleft": 1,
    "pop": 0,
    "popleft": 0,
    "extend": 1,
    "extendleft": 1,
    "clear": 0,
    "copy": 0,
    "reverse": 0,
    "rotate": None,
    "count": 1,
    "insert": 2,
}


class DequeValue(Value):
    """A deque made during the trace: its items, its ``maxlen`` and a mutation count."""

    __slots__ = ("items", "maxlen", "state")

    def __init__(self, items: list[Value], maxlen: int | None) -> None:
        super().__init__(None)
        self.items = items
        self.maxlen = maxlen
        self.state = 0
        self._trim_left()

    def describe(self) -> str:
        return f"a deque of {len(self.items)}"

    def python_type(self) -> type:
        return collections.deque

    def is_constant(self) -> bool:
        return all(v.is_constant() for v in self.items)

    def as_constant(self) -> Any:
        return collections.deque((v.as_constant() for v in self.items), self.maxlen)

    def unpack(self, tx: Context) -> list[Value]:
        return list(self.items)

    def iterate(self, tx: Context) -> Value:
        return DequeIteratorValue(self)

    def truth(self, tx: Context) -> bool:
        return bool(self.items)

    def length(self, tx: Context) -> int:
        return len(self.items)

    def getitem(self, tx: Context, key: Value) -> Value:
        index = _index(key)
        if not -len(self.items) <= index < len(self.items):
            raise python_error(IndexError, "deque index out of range")
        return self.items[index]

    def setitem(self, tx: Context, key: Value, value: Value) -> None:
        index = _index(key)
        if not -len(self.items) <= index < len(self.items):
            raise python_error(IndexError, "deque index out of range")
        self.items[index] = value

    def getattr(self, tx: Context, name: str) -> Value:
        if name == "maxlen":
            return ConstantValue(self.maxlen)
        if name in _METHODS:
            return BoundBuiltinMethod(self, name)
        if hasattr(collections.deque, name):
            raise Unsupported(f"deque.{name}")
        raise attribute_missing(self.describe(), name)

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        expected = _METHODS.get(name, -1)
        if expected == -1:
            raise Unsupported(f"deque.{name}")
        if kwargs or (expected is not None and len(args) != expected):
            raise Unsupported(f"deque.{name} with these arguments (TypeError)")
        none = ConstantValue(None)
        if name == "copy":
            return DequeValue(list(self.items), self.maxlen)
        if name == "count":
            return ConstantValue(sum(tx.equal(v, args[0]) for v in list(self.items)))
        if name in ("append", "appendleft"):
            self._add(args[0], left=name == "appendleft")
        elif name in ("extend", "extendleft"):
            # item by item as they come (a failing iterable leaves those before it added);
            # a deque extended by itself reads a copy of itself first
            source = ListIteratorValue(list(self.items)) if args[0] is self else None
            iterator = source or tx.iterate(args[0])
            if not isinstance(iterator, IteratorValue):
                raise Unsupported(f"deque.{name} of {args[0].describe()}")
            while (item := iterator.next_value(tx)) is not None:
                self._add(item, left=name == "extendleft")
        elif name in ("pop", "popleft"):
            if not self.items:
                raise python_error(IndexError, "pop from an empty deque")
            self.state += 1
            return self.items.pop() if name == "pop" else self.items.pop(0)
        elif name == "clear":
            self.state += bool(self.items)
            self.items.clear()
        elif name == "reverse":
            self.items.reverse()  # in place: an iterator goes on over the reversed items
        elif name == "rotate":
            self._rotate(args)
        elif name == "insert":
            self._insert(args[0], args[1])
        return none

    def _insert(self, where: Value, item: Value) -> None:
        """``d.insert(i, x)``: where ``list.insert`` would put it (``i`` clamped), refused at
        ``maxlen`` with Python's IndexError."""
        if not _is_int(where):
            raise Unsupported(f"deque.insert at {where.describe()}")
        if self.maxlen is not None and len(self.items) >= self.maxlen:
            raise python_error(IndexError, "deque already at its maximum size")
        self.state += 1
        self.items.insert(where.as_constant(), item)

    def _add(self, item: Value, *, left: bool) -> None:
        self.state += 1
        if left:
            self.items.insert(0, item)
            self._trim_right()
        else:
            self.items.append(item)
            self._trim_left()

    def _rotate(self, args: list[Value]) -> None:
        if len(args) > 1 or (args and not _is_int(args[0])):
            raise Unsupported("deque.rotate with these arguments")
        n = args[0].as_constant() if args else 1
        if len(self.items) > 1:  # (Python's counts a rotation of one item as no change)
            self.state += 1
            n %= len(self.items)
            self.items[:] = self.items[-n:] + self.items[:-n] if n else self.items

    def _trim_left(self) -> None:
        if self.maxlen is not None:
            del self.items[: max(0, len(self.items) - self.maxlen)]

    def _trim_right(self) -> None:
        if self.maxlen is not None:
            del self.items[self.maxlen :]


class DequeIteratorValue(IteratorValue):
    """An iterator over a deque of the trace, reading it live by position as Python's does
    (``reverse()`` and item assignment are seen); it fails once the deque's state moved,
    even when exhausted. It is never made again at a graph break (it reads a live deque)."""

    __slots__ = ("counter", "index", "owner", "state")

    def __init__(self, owner: DequeValue) -> None:
        super().__init__(None)
        self.owner = owner
        self.state = owner.state
        self.index = 0
        self.counter = len(owner.items)

    def describe(self) -> str:
        return "a deque iterator"

    def python_type(self) -> type:
        return _DEQUE_ITERATOR

    def next_value(self, tx: Context) -> Value | None:
        if self.owner.state != self.state:
            self.counter = 0
            raise python_error(RuntimeError, "deque mutated during iteration")
        if self.counter == 0:
            return None
        self.counter -= 1
        self.index += 1
        return self.owner.items[self.index - 1]


def _is_int(value: Value) -> bool:
    return value.is_constant() and type(value.as_constant()) is int


def _index(key: Value) -> int:
    if not _is_int(key):
        raise Unsupported(f"a deque indexed by {key.describe()}")
    return int(key.as_constant())


def make_deque(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> DequeValue:
    """``deque(iterable=(), maxlen=None)``."""
    if len(args) > 2 or set(kwargs) - {"iterable", "maxlen"}:
        raise Unsupported("deque() with these arguments (TypeError)")
    named = dict(zip(("iterable", "maxlen"), args))
    if set(named) & set(kwargs):
        raise Unsupported("deque() with an argument given twice (TypeError)")
    named.update(kwargs)
    maxlen = named.get("maxlen", ConstantValue(None))
    if not maxlen.is_constant():
        raise Unsupported(f"deque() with {maxlen.describe()} for maxlen")
    bound = maxlen.as_constant()
    if bound is not None and (type(bound) is not int or bound < 0):
        raise Unsupported("deque() with a maxlen that is not a non-negative int")
    iterable = named.get("iterable")
    items = tx.unpack(iterable) if iterable is not None else []
    return DequeValue(items, bound)
