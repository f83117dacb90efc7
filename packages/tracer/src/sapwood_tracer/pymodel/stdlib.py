"""Models of standard-library callables: ``functools``, ``itertools``, ``operator`` and
``inspect.signature``. Registered into the builtin table of :mod:`.builtins` on import.

As in :mod:`.builtins`, each handler works on values: iterators are consumed in order, calls
of user callables are inlined, and ``operator`` functions dispatch like Python's operators.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import operator
import traceback
from typing import Any

from ..errors import Unsupported
from ..values.base import ConstantValue, Context, IteratorValue, ListIteratorValue, Value
from ..values.containers import ListValue, TupleValue
from ..values.exceptions import TracebackValue, python_error
from ..values.functions import BoundMethodValue, UserFunctionValue
from ..values.identity import same_object
from ..values.objects import ClassValue, NewObjectValue
from ..values.partials import make_partial
from . import operators as ops
from .builtins import _HANDLERS, _OPERATORS, Handler, handles
from .construct import is_plain_python_class
from .dict_subclasses import delete_item
from .iteration import _iterators

__all__: list[str] = []


# ----------------------------------------------------------------- functools / itertools
@handles(functools.partial)
def _partial(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return make_partial(tx, functools.partial, args, kwargs)


@handles(object.__new__)
def _object_new(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``object.__new__(cls)``, as a ``__new__`` written in Python calls it (often through
    ``super().__new__(cls)``): a new object of a plain Python class."""
    if not args or not isinstance(args[0], ClassValue):
        raise Unsupported("object.__new__ without a class")
    cls = args[0].cls
    if not is_plain_python_class(cls) or getattr(cls, "__abstractmethods__", None):
        raise Unsupported(f"object.__new__({cls.__qualname__})")
    if len(args) > 1 or kwargs:
        if cls.__new__ is not object.__new__:
            raise python_error(
                TypeError, "object.__new__() takes exactly one argument (the type to instantiate)"
            )
        if cls.__init__ is object.__init__:
            raise python_error(TypeError, f"{cls.__name__}() takes no arguments")
    return NewObjectValue(cls)


@handles(functools.reduce)
def _reduce(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    fn, items = args[0], tx.unpack(args[1])
    if len(args) > 2:
        acc = args[2]
    else:
        if not items:
            raise python_error(TypeError, "reduce() of empty iterable with no initial value")
        acc, items = items[0], items[1:]
    for item in items:
        acc = tx.call(fn, [acc, item], {})
    return acc


class _StepIterator(IteratorValue):
    """A lazy iterator whose next value comes from ``step(tx)`` (``None`` when exhausted),
    so a combinator pulls from its inputs only as its consumer pulls from it, like Python's."""

    __slots__ = ("kind", "step", "what")

    def __init__(self, what: str, step: Any, kind: type) -> None:
        super().__init__(None)
        self.what = what
        self.step = step
        self.kind = kind

    def describe(self) -> str:
        return f"an {self.what} iterator"

    def python_type(self) -> type:
        return self.kind

    def next_value(self, tx: Context) -> Value | None:
        return self.step(tx)  # type: ignore[no-any-return]


def _chained(sources: IteratorValue | list[Value]) -> _StepIterator:
    state: dict[str, Any] = {"current": None}

    def step(tx: Context) -> Value | None:
        while True:
            if state["current"] is None:
                if isinstance(sources, list):
                    if not sources:
                        return None
                    nxt: Value | None = sources.pop(0)
                else:
                    nxt = sources.next_value(tx)
                if nxt is None:
                    return None
                (state["current"],) = _iterators(tx, [nxt])
            value = state["current"].next_value(tx)
            if value is not None:
                return value
            state["current"] = None

    return _StepIterator("itertools.chain", step, itertools.chain)


@handles(itertools.chain)
def _chain(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return _chained(list(args))


@handles(itertools.chain.from_iterable)
def _chain_from(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (outer,) = _iterators(tx, args[:1])
    return _chained(outer)


def _combinatoric(fn: Any) -> Handler:
    def handler(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        ckw = {k: v.as_constant() for k, v in kwargs.items()}
        if fn is itertools.product:
            pools = [tx.unpack(a) for a in args]
            n = len(pools)
            combos = fn(*(range(len(p)) for p in pools), **ckw)
            return ListIteratorValue(
                [TupleValue([pools[j % n][i] for j, i in enumerate(c)]) for c in combos], fn
            )
        pool = tx.unpack(args[0])
        rest = [a.as_constant() for a in args[1:]]
        combos = fn(range(len(pool)), *rest, **ckw)
        return ListIteratorValue([TupleValue([pool[i] for i in c]) for c in combos], fn)

    return handler


for _fn in (
    itertools.product,
    itertools.combinations,
    itertools.combinations_with_replacement,
    itertools.permutations,
):
    _HANDLERS[_fn] = _combinatoric(_fn)


@handles(itertools.islice)
def _islice(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (it,) = _iterators(tx, args[:1])
    bounds = slice(*(a.as_constant() for a in args[1:]))
    start, stop, stride = bounds.start or 0, bounds.stop, bounds.step or 1
    state = {"next": start, "index": 0}

    def step(tx: Context) -> Value | None:
        if stop is not None and state["next"] >= stop:
            return None
        while state["index"] <= state["next"]:
            value = it.next_value(tx)
            if value is None:
                return None
            state["index"] += 1
            if state["index"] - 1 == state["next"]:
                state["next"] += stride
                return value
        return None

    return _StepIterator("itertools.islice", step, itertools.islice)


@handles(itertools.repeat)
def _repeat(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    times = args[1] if len(args) > 1 else kwargs.get("times")
    if times is None:
        if len(args) != 1 or kwargs:
            raise Unsupported("itertools.repeat with these arguments")
        obj = args[0]
        return _StepIterator("itertools.repeat", lambda tx: obj, itertools.repeat)
    return ListIteratorValue([args[0]] * times.as_constant(), itertools.repeat)


@handles(itertools.pairwise)
def _pairwise(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    (it,) = _iterators(tx, args[:1])
    state: dict[str, Any] = {"last": None}

    def step(tx: Context) -> Value | None:
        if state["last"] is None:
            state["last"] = it.next_value(tx)
            if state["last"] is None:
                return None
        item = it.next_value(tx)
        if item is None:
            return None
        pair = TupleValue([state["last"], item])
        state["last"] = item
        return pair

    return _StepIterator("itertools.pairwise", step, itertools.pairwise)


@handles(itertools.zip_longest)
def _zip_longest(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    its = _iterators(tx, args)
    fill = kwargs.get("fillvalue", ConstantValue(None))
    live = [True] * len(its)

    def step(tx: Context) -> Value | None:
        if not any(live):
            return None
        parts: list[Value] = []
        for i, it in enumerate(its):
            value = it.next_value(tx) if live[i] else None
            if value is None:
                live[i] = False
                value = fill
            parts.append(value)
        if not any(live):
            return None
        return TupleValue(parts)

    return _StepIterator("itertools.zip_longest", step, itertools.zip_longest)


# ----------------------------------------------------------------- operator module
def _binary_fn(fn: Any) -> Handler:
    return lambda tx, args, kwargs: ops.binary(tx, fn, args[0], args[1])


def _unary_fn(fn: Any) -> Handler:
    return lambda tx, args, kwargs: ops.unary(tx, fn, args[0])


for _fn in [*ops.BINARY.values(), *ops.INPLACE.values(), *ops.COMPARE.values()]:
    _OPERATORS[_fn] = _binary_fn(_fn)
for _unary in (operator.neg, operator.pos, operator.invert, operator.not_):
    _OPERATORS[_unary] = _unary_fn(_unary)
_OPERATORS[operator.truth] = lambda tx, args, kwargs: ConstantValue(tx.truth(args[0]))
_OPERATORS[operator.is_] = lambda tx, args, kwargs: ConstantValue(same_object(tx, args[0], args[1]))
_OPERATORS[operator.is_not] = lambda tx, args, kwargs: ConstantValue(
    not same_object(tx, args[0], args[1])
)
_OPERATORS[operator.contains] = lambda tx, args, kwargs: ConstantValue(
    ops.contains(tx, args[0], args[1])
)
_OPERATORS[operator.getitem] = lambda tx, args, kwargs: tx.getitem(args[0], args[1])
_OPERATORS[operator.abs] = _unary_fn(operator.abs)


def _setitem(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    args[0].setitem(tx, args[1], args[2])
    return ConstantValue(None)


_OPERATORS[operator.setitem] = _setitem
_OPERATORS[operator.mul] = _binary_fn(operator.mul)
_OPERATORS[operator.inv] = _unary_fn(operator.invert)


def _delitem(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    delete_item(tx, args[0], args[1])
    return ConstantValue(None)


_OPERATORS[operator.delitem] = _delitem


def _matches(tx: Context, sequence: Value, item: Value) -> Any:
    """The items of ``sequence`` as ``countOf``/``indexOf`` read them, each with whether it
    is ``item`` or equal to it; the iteration stops where the caller stops reading."""
    iterator = tx.iterate(sequence)
    assert isinstance(iterator, IteratorValue)
    while (value := iterator.next_value(tx)) is not None:
        yield tx.equal(value, item)


def _count_of(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ConstantValue(sum(_matches(tx, args[0], args[1])))


def _index_of(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    for index, found in enumerate(_matches(tx, args[0], args[1])):
        if found:
            return ConstantValue(index)
    raise python_error(ValueError, "sequence.index(x): x not in sequence")


def _concat(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    a, b = args
    if a.is_constant() and b.is_constant() and isinstance(a, ConstantValue):
        try:
            return ConstantValue(operator.concat(a.as_constant(), b.as_constant()))
        except TypeError as exc:
            raise python_error(TypeError, *exc.args) from None
    if isinstance(a, (ListValue, TupleValue)) and type(a) is type(b):
        return ops.binary(tx, operator.add, a, b)
    raise Unsupported(f"operator.concat of {a.describe()} and {b.describe()}")


_OPERATORS[operator.countOf] = _count_of
_OPERATORS[operator.indexOf] = _index_of
_OPERATORS[operator.concat] = _concat


@handles(inspect.signature)
def _signature(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    target = args[0]
    if kwargs:
        raise Unsupported("inspect.signature with options")
    if isinstance(target, UserFunctionValue):
        return ConstantValue(inspect.signature(target.fn))
    if isinstance(target, BoundMethodValue) and isinstance(target.function, UserFunctionValue):
        sig = inspect.signature(target.function.fn)
        params = list(sig.parameters.values())[1:]
        return ConstantValue(sig.replace(parameters=params))
    if target.is_constant():
        return ConstantValue(inspect.signature(target.as_constant()))
    raise Unsupported(f"inspect.signature of {target.describe()}")


@handles(traceback.clear_frames)
def _clear_frames(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``traceback.clear_frames(tb)`` (unittest's ``assertRaises`` calls it on leaving) of the
    traceback of an exception raised in the traced code: eagerly it frees the locals of the
    frames the exception went through that have finished. Those frames were inlined into the
    trace and hold no real reference, so there is nothing to free: nothing happens. A real
    traceback (passed in) is refused."""
    if len(args) != 1 or kwargs:
        raise Unsupported("traceback.clear_frames() with other than one argument (TypeError)")
    tb = args[0]
    if isinstance(tb, TracebackValue) or (tb.is_constant() and tb.as_constant() is None):
        return ConstantValue(None)
    raise Unsupported(f"traceback.clear_frames() of {tb.describe()}")
