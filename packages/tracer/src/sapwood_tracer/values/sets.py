"""Sets and frozensets of hashable trace-time members, iterated in Python's order.

The same rules as :mod:`.containers`: a set made during the trace is mutated in place,
privately; one that came from the inputs is guarded (on its members and iteration order) and
mutating it is refused.
"""

from __future__ import annotations

from typing import Any

from ..errors import TracedException, Unsupported
from .base import (
    BoundBuiltinMethod,
    ConstantValue,
    Context,
    ListIteratorValue,
    Value,
    attribute_missing,
    is_constant_type,
)
from .dunders import call_special, has_special, is_special, special_method
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
        k = _hashable_key(tx, value)
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
        return _lookup_key(tx, item) in self.members

    def getattr(self, tx: Context, name: str) -> Value:
        kind = self.python_type()
        if name in _METHODS and hasattr(kind, name):
            return BoundBuiltinMethod(self, name)
        if name == "__init__" and not self.frozen:
            return BoundBuiltinMethod(self, name)
        if has_special(kind, name):
            return special_method(self, kind, name)
        raise attribute_missing(self.describe(), name)

    def combine(self, tx: Context, op: Any, other: SetValue) -> SetValue:
        """``self <op> other`` for a set operator of :mod:`operator` (|, &, -, ^), computed on
        the real key sets so the result iterates in Python's order."""
        order = op(self.order, other.order)
        return self._derived(order, [self.members, other.members])

    def _derived(self, order: Any, pools: list[dict[Any, Value]]) -> SetValue:
        """A new set of the keys ``order`` (the result of a real operation on key sets), its
        members taken from ``pools``, of this set's kind."""
        frozen = self.frozen if isinstance(order, (set, frozenset)) else False
        order = frozenset(order) if frozen and not isinstance(order, frozenset) else order
        return SetValue({k: _member(k, pools) for k in order}, frozen, order=order)

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if is_special(name):
            return call_special(tx, self, self.python_type(), name, args, kwargs)
        if kwargs or (name in _ONE_ARGUMENT and len(args) != 1) or (name in _NO_ARGUMENT and args):
            raise_error(TypeError, _signature_message(self.python_type(), name, args, kwargs))
        if name == "copy":
            if self.frozen:
                return self  # frozenset.copy() is the frozenset itself
            return SetValue(dict(self.members), self.frozen, order=self.order.copy())
        if name in _PURE:
            operands = [_keys_of(tx, a) for a in args]
            result = _real(getattr(self.order, name), [keys for keys, _ in operands])
            if isinstance(result, bool):
                return ConstantValue(result)
            return self._derived(result, [self.members] + [pool for _, pool in operands])
        if self.source is not None or self.frozen:
            raise Unsupported("mutating a set that was passed in")
        if name == "__init__":
            if len(args) > 1:
                raise_error(TypeError, f"set expected at most 1 argument, got {len(args)}")
            self.members.clear()
            self.order.clear()
            if args:
                self.add_all(tx, args[0])
        elif name == "add":
            self._add(tx, args[0])
        elif name in _UPDATES:
            operands = [_keys_of(tx, a) for a in args]
            _real(getattr(self.order, name), [keys for keys, _ in operands])
            pools = [self.members] + [pool for _, pool in operands]
            self.members = {k: _member(k, pools) for k in self.order}
        elif name in ("discard", "remove"):
            k = _lookup_key(tx, args[0])
            if k not in self.members and name == "remove":
                raise TracedException(cls=KeyError, args=(args[0],))
            self.members.pop(k, None)
            self.order.discard(k)
        elif name == "pop":
            if not self.members:
                raise_error(KeyError, "pop from an empty set")
            if not self.is_constant():
                raise Unsupported("set.pop() of a set of non-constant members (order unknown)")
            k = self.order.pop()
            return self.members.pop(k)
        elif name == "clear":
            self.members.clear()
            self.order.clear()
        else:
            raise Unsupported(f"set.{name}")
        return ConstantValue(None)


#: methods returning a new set or a bool, computed by the real method on the key sets
_PURE = frozenset(
    [
        "union",
        "intersection",
        "difference",
        "symmetric_difference",
        "isdisjoint",
        "issubset",
        "issuperset",
    ]
)
#: in-place methods, computed by the real method on this set's own key set
_UPDATES = frozenset(
    ["update", "intersection_update", "difference_update", "symmetric_difference_update"]
)
_ONE_ARGUMENT = frozenset(
    {"add", "discard", "remove", "isdisjoint", "issubset", "issuperset"}
    | {"symmetric_difference", "symmetric_difference_update"}
)
_NO_ARGUMENT = frozenset(["pop", "clear", "copy"])
_METHODS = _PURE | _UPDATES | _ONE_ARGUMENT | _NO_ARGUMENT


def _signature_message(kind: type, name: str, args: list[Value], kwargs: dict) -> str:
    """Python's message for calling ``kind.name`` with these argument counts."""
    try:
        getattr(kind(), name)(*([0] * len(args)), **dict.fromkeys(kwargs, 0))
    except TypeError as exc:
        return str(exc)
    raise Unsupported(f"{kind.__name__}.{name} with {len(args)} arguments")


def _real(method: Any, operands: list[Any]) -> Any:
    """The real set method on key sets; the errors it raises (an unhashable or non-iterable
    operand) are the traced program's."""
    try:
        return method(*operands)
    except TypeError as exc:
        raise TracedException(
            cls=TypeError, args=tuple(ConstantValue(a) for a in exc.args)
        ) from None


def _keys_of(tx: Context, value: Value) -> tuple[Any, dict[Any, Value]]:
    """An operand of a set method as the real method would iterate it, in keys: a key set, a
    constant (its own items are its keys), or a list of keys; with the values of the keys."""
    if isinstance(value, SetValue):
        return value.order, value.members
    if isinstance(value, ConstantValue):
        try:
            items = list(value.value)
        except TypeError:
            return value.value, {}  # the real method raises Python's TypeError
        return value.value, {v: ConstantValue(v) for v in items}
    items = value.unpack(tx)
    pool: dict[Any, Value] = {}
    keys = []
    for v in items:
        k = _hashable_key(tx, v)
        pool.setdefault(k, v)
        keys.append(k)
    if value.python_type() is dict:
        return dict.fromkeys(keys), pool  # the real method reads a dict's own table
    return keys, pool


def _hashable_key(tx: Context, value: Value) -> Any:
    key = value.hash_key(tx)
    try:
        hash(key)
    except TypeError as exc:
        raise TracedException(cls=TypeError, args=(ConstantValue(str(exc)),)) from None
    return key


def _lookup_key(tx: Context, value: Value) -> Any:
    """The key ``in``, ``discard`` and ``remove`` look up: a set stands for the frozenset of
    its members, as in Python."""
    if isinstance(value, SetValue) and not value.frozen:
        return frozenset(value.order)
    return _hashable_key(tx, value)


def _same_constant(a: Any, b: Any) -> bool:
    return type(a) is type(b) and repr(a) == repr(b)


def _member(key: Any, pools: list[dict[Any, Value]]) -> Value:
    """The value standing for ``key`` in a set computed on key sets: the first pool's whose
    key is that very key (1, 1.0 and True are one key but three values)."""
    for pool in pools:
        value = pool.get(key)
        if value is None:
            continue
        if value.is_constant() and not _same_constant(value.as_constant(), key):
            continue
        return value
    if is_constant_type(key):
        return ConstantValue(key)
    raise Unsupported("a set member whose value the trace cannot tell")


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
