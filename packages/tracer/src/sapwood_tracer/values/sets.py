"""Sets and frozensets of hashable trace-time members, iterated in Python's order.

The same rules as :mod:`.containers`: a set made during the trace is mutated in place,
privately; one that came from the inputs is guarded (on its members and iteration order).
Mutating a set from the inputs goes on on a private copy of its keys, and each operation is
replayed on the real set after the graph, in program order, with arguments that replay
exactly (constants, snapshots, other input sets): the real set then ends as it would
eagerly. Its iteration order afterwards depends on its hash table's history, which the copy
does not share, so until the next graph break the trace refuses whatever would observe it
(iterating, ``pop``, passing it as a constant); membership, size and comparisons stay exact.
"""

from __future__ import annotations

import contextlib
import operator
import sys
import types
from typing import Any

from ..errors import TracedException, Unsupported
from .base import (
    BoundBuiltinMethod,
    ConstantValue,
    Context,
    IteratorRecipe,
    ListIteratorValue,
    Value,
    attribute_missing,
    is_constant_type,
)
from .dunders import call_special, has_special, is_special, special_method
from .exceptions import raise_error

__all__ = ["SetValue", "function_member"]


class SetValue(Value):
    """A set (or frozenset) of hashable trace-time members.

    ``order`` is a real set of the members' keys that undergoes exactly the operations the
    traced code performs (or, for an input, the input set itself), so iterating it gives the
    order Python would give: set order depends on the history of the set, not only on its
    members.
    """

    __slots__ = ("frozen", "members", "order", "order_known")

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
        #: False once ``order`` no longer iterates as the real set would (see the module)
        self.order_known = True

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
            self.order_known = self.order_known and iterable.order_known
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
        return self.order_known and all(v.is_constant() for v in self.members.values())

    def check_order(self) -> None:
        if not self.order_known:
            raise Unsupported(_UNKNOWN_ORDER)

    def as_constant(self) -> Any:
        self.check_order()
        return (frozenset if self.frozen else set)(
            self.members[k].as_constant() for k in self.order
        )

    def unpack(self, tx: Context) -> list[Value]:
        self.check_order()
        if not all(_keyed_as_python(k, v) for k, v in self.members.items()):
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
        out = self._derived(order, [self.members, other.members])
        out.order_known = self.order_known and other.order_known
        return out

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
            out = SetValue(dict(self.members), self.frozen, order=self.order.copy())
            out.order_known = self.order_known
            return out
        if name in _PURE:
            operands = self._operands(tx, name, args)
            result = _real(getattr(self.order, name), [keys for keys, _ in operands])
            if isinstance(result, bool):
                return ConstantValue(result)
            out = self._derived(result, [self.members] + [pool for _, pool in operands])
            out.order_known = _all_known([self, *args])
            return out
        if self.frozen:
            raise Unsupported("mutating a frozenset")
        if self.source is None:
            if not _all_known(args):
                self.order_known = False
            return self._mutate(tx, name, args)
        if name == "pop":
            raise Unsupported("set.pop() of a set that was passed in (its member is the table's)")
        if name in ("remove", "discard") and _lookup_key(tx, args[0]) not in self.members:
            if name == "remove":  # (nothing changes: no replay)
                raise TracedException(cls=KeyError, args=(args[0],))
            return ConstantValue(None)
        return self.mutate_input(tx, getattr(set, name), args, lambda: self._mutate(tx, name, args))

    def _operands(self, tx: Context, name: str, args: list[Value]) -> list[tuple[Any, Any]]:
        """The operands of ``self.name(*args)`` as :func:`_keys_of` gives them, except that an
        iterable that is not a set is read only as far as Python reads it (see
        :data:`_STOPS_EARLY`): the real method then runs on what was read, to the same end.
        A generator's side effects run exactly as often as eagerly."""
        current = set(self.order)
        out = []
        for arg in args:
            if name in _STOPS_EARLY and not isinstance(arg, (SetValue, ConstantValue)):
                keys, pool = _read_until_decided(tx, name, arg, current)
            else:
                keys, pool = _keys_of(tx, arg)
            if name in _INTERSECTING:
                with contextlib.suppress(TypeError):  # (the real method raises it after)
                    current = current.intersection(keys)
            out.append((keys, pool))
        return out

    def mutate_input(self, tx: Context, op: Any, args: list[Value], change: Any) -> Any:
        """``op(self, *args)`` on this set from the inputs: ``change()`` makes it on a private
        copy of its keys, and ``op`` is replayed on the real set after the graph (see the
        module). An exception from the change is left to an eager run (a graph break): the
        real set could have changed part way."""
        snapshots = [_replayable(tx, a) for a in args]
        if self.order_known:
            self.order = set(self.order)  # (for an input, ``order`` was the real set itself)
            self.order_known = False
        try:
            result = change()
        except TracedException as exc:
            what = getattr(exc.cls, "__name__", "an exception")
            raise Unsupported(
                f"a change of a set that was passed in, which raised {what}"
            ) from None
        tx.side_effects.replay_set_op(self, op, snapshots)
        return result

    def _mutate(self, tx: Context, name: str, args: list[Value]) -> Value:
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
            operands = self._operands(tx, name, args)
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
            if not all(_keyed_as_python(k, v) for k, v in self.members.items()):
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
#: methods that read an operand that is not a set only until the answer is known: from the
#: first member found (``isdisjoint``) or missing (``issuperset``); for an intersection, once
#: every member of the set so far was found (``issubset`` is one from Python 3.12 on)
_INTERSECTING = frozenset(
    ["intersection", "intersection_update"] + (["issubset"] if sys.version_info >= (3, 12) else [])
)
_STOPS_EARLY = frozenset(["isdisjoint", "issuperset"]) | _INTERSECTING


def _read_until_decided(
    tx: Context, name: str, other: Value, members: set[Any]
) -> tuple[list[Any], dict[Any, Value]]:
    """The keys of ``other`` that CPython's ``set.name`` reads before it stops, in order."""
    it = tx.iterate(other)
    keys: list[Any] = []
    pool: dict[Any, Value] = {}
    found: set[Any] = set()
    while (item := it.next_value(tx)) is not None:  # type: ignore[attr-defined]
        key = _hashable_key(tx, item)
        pool.setdefault(key, item)
        keys.append(key)
        inside = key in members
        if (name == "isdisjoint" and inside) or (name == "issuperset" and not inside):
            break
        if name in _INTERSECTING and inside:
            found.add(key)
            if len(found) >= len(members):
                break
    return keys, pool


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


def function_member(obj: Any) -> bool:
    """A function or builtin function: a set member or dict key equal only to itself, and its
    own trace-time key."""
    return type(obj) in (types.FunctionType, types.BuiltinFunctionType)


def _keyed_as_python(key: Any, value: Value) -> bool:
    """Whether a member's trace-time key is the object Python hashes for it (a constant, a
    function), so the key mirror iterates in the real set's order."""
    return function_member(key) or value.is_constant()


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
        super().__init__(items, kind=_SET_ITERATOR)
        self.owner = owner
        self.keys = set(owner.members)

    def rebuild(self) -> IteratorRecipe | None:
        owner = self.owner
        if (
            owner.source is not None
            and owner.order_known
            and self.keys is not None
            and owner.members.keys() == self.keys
        ):
            # a set from the inputs, unchanged: its own iterator, advanced as far (it sees the
            # set change afterwards as this one would, and is of the same type)
            return IteratorRecipe(set_iterator_at, (owner, ConstantValue(self.index)))
        return None  # (made again from its items, it would be an iterator of another type)

    def remaining(self) -> list[Value] | None:
        # A graph break in a loop over a set would go on over a copy of the rest, which
        # cannot see the set change afterwards as Python's iterator does: frozensets only.
        if not self.owner.frozen:
            return None
        return super().remaining()

    def describe(self) -> str:
        return "a set iterator"

    def getattr(self, tx: Context, name: str) -> Value:
        if name == "__length_hint__":
            return BoundBuiltinMethod(self, name)
        return super().getattr(tx, name)

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if name != "__length_hint__" or args or kwargs:
            return super().call_method(tx, name, args, kwargs)
        # as Python's: the items still to come, 0 once exhausted or once the set's size changed
        if self.keys is None or len(self.owner.members) != len(self.keys):
            return ConstantValue(0)
        return ConstantValue(len(self.items) - self.index)

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


_UNKNOWN_ORDER = (
    "the iteration order of a set from the inputs that the trace changed (it depends on the"
    " real set's hash table; the change is replayed on it after the graph)"
)


def _all_known(values: list[Value]) -> bool:
    return all(v.order_known for v in values if isinstance(v, SetValue))


#: what an argument replayed on a real set may be as a constant: immutable, so the generated
#: code can hold it
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), range)


def _immutable(obj: Any) -> bool:
    if isinstance(obj, (tuple, frozenset)) and type(obj) in (tuple, frozenset):
        return all(_immutable(item) for item in obj)
    return type(obj) in _IMMUTABLE


def _replayable(tx: Context, value: Value) -> tuple[str, Any]:
    """An argument of an operation on an input set as the replay after the graph passes it:
    ``("const", obj)`` or ``("source", value)`` (another set from the inputs, read then: the
    replays run in program order). It must make the real set end as the eager call would,
    so it is the same kind of object with the same items in the same order."""
    if isinstance(value, SetValue):
        if value.source is not None:
            return ("source", value)
        keys = value.order
        if value.order_known and all(
            _same_constant(value.members[k].as_constant(), k) and _immutable(k) for k in keys
        ):
            if value.frozen:
                return ("const", keys)  # (the trace's own frozenset: its very table)
            # the replay takes the trace's own key set, whose table was made by the same
            # operations as the real one; the trace goes on with a copy, which iterates the
            # same only where its table came out the same size and order
            copy = keys.copy()
            if sys.getsizeof(copy) != sys.getsizeof(keys) or list(copy) != list(keys):
                value.order_known = False
            value.order = copy
            return ("const", keys)
    elif isinstance(value, ConstantValue) and _immutable(value.value):
        return ("const", value.value)
    elif value.python_type() in (list, tuple) and value.is_constant():
        items = value.as_constant()
        if all(_immutable(item) for item in items):
            return ("const", tuple(items))  # (iterated as a list or a tuple alike)
    elif value.python_type() is dict and value.is_constant():
        keys = list(value.as_constant())
        if all(_immutable(k) for k in keys):
            return ("const", dict.fromkeys(keys))  # (a dict is read by its own table)
    raise Unsupported(
        f"changing a set that was passed in with {value.describe()} (the change could not be"
        " replayed on the real set exactly)"
    )


#: the in-place operators on sets and the set methods replayed for them
INPLACE_OPS = {
    operator.ior: set.__ior__,
    operator.iand: set.__iand__,
    operator.isub: set.__isub__,
    operator.ixor: set.__ixor__,
}


_SET_ITERATOR = type(iter(set()))


def set_iterator_at(s: set | frozenset, taken: int) -> Any:
    """A real iterator over ``s`` that has given ``taken`` items already (made at a graph
    break in a loop over a set from the inputs)."""
    it = iter(s)
    for _ in range(taken):
        next(it)
    return it
