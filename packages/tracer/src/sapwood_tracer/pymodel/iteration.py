"""Models of the builtins that make and consume iterators: ``iter``, ``next``, ``zip``,
``enumerate``, ``reversed``, ``map``, ``filter``, ``sorted`` (registered in :mod:`.builtins`'
table on import); strict ``zip``'s iterator is :mod:`.strict_zip`'s."""

from __future__ import annotations

import builtins
import collections
from typing import Any

from ..errors import TracedException, Unsupported
from ..values.base import (
    BuiltinValue,
    ConstantValue,
    Context,
    IteratorRecipe,
    IteratorValue,
    ListIteratorValue,
    RangeIteratorValue,
    Value,
)
from ..values.containers import (
    DictValue,
    ListValue,
    ListValueIterator,
    TupleValue,
    list_iterator_at,
)
from ..values.enums import EnumClassValue
from ..values.exceptions import catches, python_error
from ..values.iterators import LiveIteratorValue, MapIteratorValue
from ..values.objects import NewObjectValue, ObjectValue, UserIteratorValue
from ..values.sequence_iterators import (
    SequenceIteratorValue,
    sequence_iterator_at,
    user_iterator_of,
)
from ..values.views import DictIteratorValue, DictViewValue, dict_iterator_at
from .builtins import handles
from .range_iterator_inputs import next_of_live
from .strict_zip import StrictZipIterator, strict_zip_of

__all__: list[str] = []


def _message_of(fn: Any, *args: Any) -> str:
    try:
        fn(*args)
    except TypeError as exc:
        return str(exc)
    raise AssertionError(f"{fn!r}{args!r} did not raise")  # pragma: no cover


#: the running Python's own words (they changed between versions)
_ITER_NOT_CALLABLE = _message_of(iter, 1, 1)


@handles(builtins.iter)
def _iter(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if kwargs or not 1 <= len(args) <= 2:
        raise Unsupported("iter() with other than one or two positional arguments (TypeError)")
    if len(args) == 2:
        if not tx.call_builtin(BuiltinValue(builtins.callable), [args[0]], {}).as_constant():
            raise python_error(TypeError, _ITER_NOT_CALLABLE)
        return _CallableIterator(args[0], args[1])
    return tx.iterate(args[0])


class _CallableIterator(IteratorValue):
    """``iter(fn, sentinel)``: calls ``fn()`` at each step until it returns something equal to
    the sentinel (or raises StopIteration); once exhausted it never calls ``fn`` again."""

    __slots__ = ("fn", "sentinel")

    def __init__(self, fn: Value, sentinel: Value) -> None:
        super().__init__(None)
        self.fn: Value | None = fn
        self.sentinel = sentinel

    def describe(self) -> str:
        return "a callable_iterator"

    def python_type(self) -> type:
        return type(iter(int, 0))

    def rebuild(self) -> IteratorRecipe | None:
        # the callable keeps its own state (its effects are written back at the break): a
        # new iter(fn, sentinel) goes on as this one would
        if self.fn is None:
            return IteratorRecipe(iter, ((),))
        return IteratorRecipe(iter, (self.fn, self.sentinel))

    def next_value(self, tx: Context) -> Value | None:
        if self.fn is None:
            return None
        try:
            value = tx.call(self.fn, [], {})
        except TracedException as raised:
            if catches(raised, StopIteration):
                self.fn = None
                return None
            raise
        if tx.equal(value, self.sentinel):
            self.fn = None
            return None
        return value


@handles(builtins.next)
def _next(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    it = args[0]
    if not isinstance(it, IteratorValue):
        raise Unsupported(f"next() of {it.describe()}")
    value = next_of_live(tx, it) if isinstance(it, LiveIteratorValue) else it.next_value(tx)
    if value is None:
        if len(args) > 1:
            return args[1]
        raise TracedException(cls=StopIteration, args=it.stop_args())
    return value


def _iterators(tx: Context, values: list[Value]) -> list[IteratorValue]:
    its = [tx.iterate(v) for v in values]
    for it in its:
        if not isinstance(it, IteratorValue):
            raise Unsupported(f"iterating over {it.describe()}")
    return its  # type: ignore[return-value]


@handles(dict_iterator_at)
def _dict_iterator_at(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    mapping, kind, position, reverse = args
    if not isinstance(mapping, DictValue):
        raise Unsupported(f"a dict iterator over {mapping.describe()}")
    view = DictViewValue(mapping, kind.as_constant(), TupleValue)
    iterator = DictIteratorValue(view, bool(reverse.as_constant()))
    for _ in range(int(position.as_constant())):
        iterator.next_value(tx)
    return iterator


@handles(sequence_iterator_at)
def _sequence_iterator_at(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    target, index = args
    iterator = tx.iterate(target)
    if not isinstance(iterator, SequenceIteratorValue):
        raise Unsupported(f"a sequence iterator over {target.describe()}")
    iterator.index = int(index.as_constant())
    return iterator


@handles(user_iterator_of)
def _user_iterator_of(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (target,) = args
    if not isinstance(target, (ObjectValue, NewObjectValue)) or not target._has("__next__"):
        raise Unsupported(f"iterating {target.describe()} by its __next__")
    return UserIteratorValue(target)


@handles(list_iterator_at)
def _list_iterator_at(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    items, index = args
    if not isinstance(items, ListValue):
        raise Unsupported(f"a list iterator over {items.describe()}")
    return ListValueIterator(items, int(index.as_constant()))


@handles(builtins.zip)
def _zip(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if kwargs.get("strict") is not None and kwargs["strict"].as_constant():
        return StrictZipIterator(_iterators(tx, args))
    return MapIteratorValue("zip", None, _iterators(tx, args))


@handles(strict_zip_of)
def _strict_zip_of(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return StrictZipIterator(_iterators(tx, args))


@handles(builtins.enumerate)
def _enumerate(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    start = args[1] if len(args) > 1 else kwargs.get("start", ConstantValue(0))
    (inner,) = _iterators(tx, args[:1])
    return _EnumerateIterator(inner, start.as_constant())


class _EnumerateIterator(IteratorValue):
    __slots__ = ("count", "inner")

    def __init__(self, inner: IteratorValue, start: int) -> None:
        super().__init__(None)
        self.inner = inner
        self.count = start

    def describe(self) -> str:
        return "an enumerate iterator"

    def python_type(self) -> type:
        return enumerate

    def rebuild(self) -> IteratorRecipe | None:
        # the inner iterator is a value of its own (made once, however many others hold it)
        if self.inner.source is None and self.inner.rebuild() is None:
            return None
        return IteratorRecipe(enumerate, (self.inner, ConstantValue(self.count)))

    def next_value(self, tx: Context) -> Value | None:
        v = self.inner.next_value(tx)
        if v is None:
            return None
        out = TupleValue([ConstantValue(self.count), v])
        self.count += 1
        return out


@handles(builtins.reversed)
def _reversed(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if isinstance(args[0], IteratorValue):
        raise Unsupported("reversed() of an iterator (TypeError)")
    if args[0].is_constant() and type(args[0].as_constant()) is range:
        return RangeIteratorValue(args[0].as_constant()[::-1])  # (a range_iterator too)
    if isinstance(args[0], EnumClassValue):
        return args[0].reversed_iterator(tx)
    view = _reversible_dict_view(args[0])
    if view is not None:  # (live, as Python's: it fails once the dict changed size)
        return DictIteratorValue(view, reverse=True)
    cls = args[0].python_type()
    if cls not in _REVERSED_TYPES:
        raise Unsupported(f"reversed() of a {cls.__qualname__}")
    # the items as they are now, with the real iterator's type (not made again at a break:
    # a list's reversed iterator reads the list as it goes)
    return ListIteratorValue(list(reversed(tx.unpack(args[0]))), _REVERSED_TYPES[cls])


_REVERSED_TYPES = {
    list: type(reversed([])),
    tuple: type(reversed(())),
    str: type(reversed("")),
}


def _reversible_dict_view(value: Value) -> DictViewValue | None:
    """The view whose reversed iterator ``reversed(value)`` is: a dict's keys for a dict
    (not a subclass: it may have its own ``__reversed__``), or one of dict's own views (not
    an OrderedDict's, whose views are its own)."""
    if isinstance(value, DictValue) and value.cls is dict:
        return DictViewValue(value, "keys", TupleValue)
    owner = value.owner if isinstance(value, DictViewValue) else None
    if isinstance(owner, DictValue) and not issubclass(owner.cls, collections.OrderedDict):
        return value  # type: ignore[return-value]
    return None


@handles(builtins.map)
def _map(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return MapIteratorValue("map", args[0], _iterators(tx, args[1:]))


@handles(builtins.filter)
def _filter(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    fn = args[0]
    if fn.is_constant() and fn.as_constant() is None:
        return MapIteratorValue("filter", None, _iterators(tx, args[1:]))
    return MapIteratorValue("filter", fn, _iterators(tx, args[1:]))


@handles(builtins.sorted)
def _sorted(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    out = ListValue(args[0].collect(tx))
    out.call_method(tx, "sort", [], kwargs)
    return out
