"""Sets and frozensets of hashable trace-time members, iterated in Python's order.

The same rules as :mod:`.containers`: a set made during the trace is mutated in place,
privately; one that came from the inputs is guarded (on its members and iteration order) and
mutating it is refused.
"""

from __future__ import annotations

import operator
from typing import Any

from ..errors import TracedException, Unsupported
from .base import (
    BoundBuiltinMethod,
    ConstantValue,
    Context,
    ListIteratorValue,
    Value,
    attribute_missing,
)
from .exceptions import raise_error

__all__ = ["SetValue"]


class SetValue(Value):
    """A set (or frozenset) of hashable trace-time members.

    ``order`` is a real set of the members' keys that undergoes exactly the operations the
    traced code performs (or, for an input, the input set itself), so iterating it gives the
    order Python would give: set order depends on the history of the set, not only on its
    members.
    """

    __slots__ = ("frozen", "members", "order")

    def __init__(
        self,
        members: dict[Any, Value],
        frozen: bool = False,
        source: Any = None,
        order: Any = None,
    ):
        super().__init__(source)
        self.members = members
        self.frozen = frozen
        self.order = order if order is not None else set(members)

    @classmethod
    def of(cls, tx: Context, items: list[Value], frozen: bool = False) -> SetValue:
        out = cls({}, frozen)
        for v in items:
            out._add(tx, v)
        return out

    def _add(self, tx: Context, value: Value) -> None:
        k = value.hash_key(tx)
        if k not in self.members:
            self.members[k] = value
        self.order.add(k)

    def add_all(self, tx: Context, iterable: Value) -> None:
        """``set.update(iterable)``, on the key mirror with the real operation where the
        argument is a set or a constant (the real update copies a set's table layout)."""
        if isinstance(iterable, SetValue):
            self.order.update(iterable.order)
            for k, v in iterable.members.items():
                self.members.setdefault(k, v)
            return
        if isinstance(iterable, ConstantValue):
            items = list(iterable.value)
            self.order.update(iterable.value)
            for v in items:
                self.members.setdefault(v, ConstantValue(v))
            return
        for v in iterable.unpack(tx):
            self._add(tx, v)

    def describe(self) -> str:
        return f"a set of {len(self.members)}"

    def python_type(self) -> type:
        return frozenset if self.frozen else set

    def is_constant(self) -> bool:
        return all(v.is_constant() for v in self.members.values())

    def as_constant(self) -> Any:
        return (frozenset if self.frozen else set)(
            self.members[k].as_constant() for k in self.order
        )

    def unpack(self, tx: Context) -> list[Value]:
        if not self.is_constant():
            raise Unsupported("iterating over a set of non-constant members (order unknown)")
        return [self.members[k] for k in self.order]

    def iterate(self, tx: Context) -> Value:
        return SetIteratorValue(self, self.unpack(tx))

    def truth(self, tx: Context) -> bool:
        return bool(self.members)

    def length(self, tx: Context) -> int:
        return len(self.members)

    def contains(self, tx: Context, item: Value) -> bool:
        return item.hash_key(tx) in self.members

    def getattr(self, tx: Context, name: str) -> Value:
        if name in ("add", "update", "discard", "remove", "union", "intersection", "copy"):
            return BoundBuiltinMethod(self, name)
        raise attribute_missing(self.describe(), name)

    def combine(self, tx: Context, op: Any, other: SetValue) -> SetValue:
        """``self <op> other`` for a set operator of :mod:`operator` (|, &, -, ^), computed on
        the real key sets so the result iterates in Python's order."""
        order = op(self.order, other.order)
        merged = {**other.members, **self.members}
        return SetValue({k: merged[k] for k in order}, isinstance(order, frozenset), order=order)

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if name in ("union", "intersection"):
            out = SetValue(dict(self.members), order=self.order.copy())
            for a in args:
                other = a if isinstance(a, SetValue) else SetValue.of(tx, a.unpack(tx))
                out = out.combine(tx, operator.or_ if name == "union" else operator.and_, other)
            return out
        if name == "copy":
            return SetValue(dict(self.members), self.frozen, order=self.order.copy())
        if self.source is not None or self.frozen:
            raise Unsupported("mutating a set that was passed in")
        if name == "add":
            self._add(tx, args[0])
        elif name == "update":
            for a in args:
                self.add_all(tx, a)
        elif name in ("discard", "remove"):
            k = args[0].hash_key(tx)
            if k not in self.members and name == "remove":
                raise TracedException(cls=KeyError, args=(args[0],))
            self.members.pop(k, None)
            self.order.discard(k)
        else:
            raise Unsupported(f"set.{name}")
        return ConstantValue(None)


class SetIteratorValue(ListIteratorValue):
    """An iterator over a set: like Python's, it fails once the set changed size, and a set
    changed without changing size (where Python's answer depends on its hash table) is
    refused."""

    __slots__ = ("keys", "owner")

    def __init__(self, owner: SetValue, items: list[Value]) -> None:
        super().__init__(items)
        self.owner = owner
        self.keys = set(owner.members)

    def remaining(self) -> list[Value] | None:
        # A graph break in a loop over a set would go on over a copy of the rest, which
        # cannot see the set change afterwards as Python's iterator does: frozensets only.
        if not self.owner.frozen:
            return None
        return super().remaining()

    def next_value(self, tx: Context) -> Value | None:
        if self.keys is None:  # exhausted: Python's iterator has let the set go
            return None
        if self.owner.members.keys() != self.keys:
            if len(self.owner.members) != len(self.keys):
                raise_error(RuntimeError, "Set changed size during iteration")
            raise Unsupported("a set changed (but not in size) while it was iterated")
        value = super().next_value(tx)
        if value is None:
            self.keys = None
        return value
