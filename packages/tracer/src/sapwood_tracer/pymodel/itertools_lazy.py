"""Models of the lazy ``itertools`` types that filter, repeat or group another iterator:
``count``, ``cycle``, ``compress``, ``dropwhile``, ``takewhile``, ``filterfalse``,
``starmap``, ``groupby`` and ``accumulate``. Registered into the builtin table of
:mod:`.builtins` on import.

Each is a step iterator (see :mod:`.stdlib`): it pulls from its input only as its consumer
pulls from it, calls its predicate or key function (inlined) once per item, in the order
CPython's C code does, and compares keys as C does (identity first, then ``==``). The
arguments are checked against the type's signature; a call that does not bind raises the
real type's ``TypeError``. ``count`` takes only ``int`` and ``float`` constants (the C code
keeps other numbers as objects, and turns ``True`` into ``1``).
"""

from __future__ import annotations

import inspect
import itertools
import operator
from typing import Any

from ..errors import Unsupported
from ..values.base import ConstantValue, Context, IteratorValue, Value
from ..values.containers import TupleValue
from ..values.identity import same_object
from . import operators as ops
from .builtins import _check_arguments, handles
from .iteration import _iterators
from .stdlib import _StepIterator

__all__: list[str] = []


def _arguments(kind: type, args: list[Value], kwargs: dict[str, Value]) -> dict[str, Value]:
    """The arguments of ``kind(*args, **kwargs)`` by parameter name, defaults filled in."""
    _check_arguments(kind, args, kwargs)
    bound = inspect.signature(kind).bind(*args, **kwargs)
    bound.apply_defaults()
    return {
        name: value if isinstance(value, Value) else ConstantValue(value)
        for name, value in bound.arguments.items()
    }


def _iterator(tx: Context, value: Value) -> IteratorValue:
    (it,) = _iterators(tx, [value])
    return it


def _same_key(tx: Context, a: Value, b: Value) -> bool:
    """``PyObject_RichCompareBool(a, b, Py_EQ)``: identity, then ``==``."""
    return same_object(tx, a, b) or tx.truth(ops.binary(tx, operator.eq, a, b))


@handles(itertools.count)
def _count(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    bound = _arguments(itertools.count, args, kwargs)
    start, step = bound["start"], bound["step"]
    for v in (start, step):
        if not (v.is_constant() and type(v.as_constant()) in (int, float)):
            raise Unsupported(f"itertools.count of {v.describe()}")
    state = {"next": start.as_constant()}
    stride = step.as_constant()

    def next_count(tx: Context) -> Value | None:
        value = state["next"]
        state["next"] = value + stride
        return ConstantValue(value)

    return _StepIterator("itertools.count", next_count, itertools.count)


@handles(itertools.accumulate)
def _accumulate(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    bound = _arguments(itertools.accumulate, args, kwargs)
    it = _iterator(tx, bound["iterable"])
    fn, initial = bound["func"], bound["initial"]
    fn = None if fn.is_constant() and fn.as_constant() is None else fn
    start = None if initial.is_constant() and initial.as_constant() is None else initial
    state: dict[str, Any] = {"acc": start, "started": False}

    def step(tx: Context) -> Value | None:
        if not state["started"]:
            state["started"] = True
            if state["acc"] is not None:
                return state["acc"]  # type: ignore[no-any-return]
        item = it.next_value(tx)
        if item is None:
            return None
        acc = state["acc"]
        if acc is None:
            state["acc"] = item
        elif fn is None:
            state["acc"] = ops.binary(tx, operator.add, acc, item)
        else:
            state["acc"] = tx.call(fn, [acc, item], {})
        return state["acc"]  # type: ignore[no-any-return]

    return _StepIterator("itertools.accumulate", step, itertools.accumulate)


@handles(itertools.cycle)
def _cycle(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    it = _iterator(tx, _arguments(itertools.cycle, args, kwargs)["iterable"])
    saved: list[Value] = []
    state = {"first_pass": True, "index": 0}

    def next_cycle(tx: Context) -> Value | None:
        if state["first_pass"]:
            item = it.next_value(tx)
            if item is not None:
                saved.append(item)
                return item
            state["first_pass"] = False
        if not saved:
            return None
        item = saved[state["index"] % len(saved)]
        state["index"] += 1
        return item

    return _StepIterator("itertools.cycle", next_cycle, itertools.cycle)


@handles(itertools.compress)
def _compress(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    bound = _arguments(itertools.compress, args, kwargs)
    data, selectors = _iterator(tx, bound["data"]), _iterator(tx, bound["selectors"])

    def next_compress(tx: Context) -> Value | None:
        while True:
            item = data.next_value(tx)
            if item is None:
                return None
            selector = selectors.next_value(tx)
            if selector is None:
                return None
            if tx.truth(selector):
                return item

    return _StepIterator("itertools.compress", next_compress, itertools.compress)


def _predicate_result(tx: Context, predicate: Value, item: Value) -> bool:
    return tx.truth(tx.call(predicate, [item], {}))


@handles(itertools.dropwhile)
def _dropwhile(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    bound = _arguments(itertools.dropwhile, args, kwargs)
    predicate, it = bound["predicate"], _iterator(tx, bound["iterable"])
    state = {"dropping": True}

    def next_dropwhile(tx: Context) -> Value | None:
        while True:
            item = it.next_value(tx)
            if item is None or not state["dropping"]:
                return item
            if not _predicate_result(tx, predicate, item):
                state["dropping"] = False
                return item

    return _StepIterator("itertools.dropwhile", next_dropwhile, itertools.dropwhile)


@handles(itertools.takewhile)
def _takewhile(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    bound = _arguments(itertools.takewhile, args, kwargs)
    predicate, it = bound["predicate"], _iterator(tx, bound["iterable"])
    state = {"stopped": False}

    def next_takewhile(tx: Context) -> Value | None:
        if state["stopped"]:
            return None
        item = it.next_value(tx)
        if item is None:
            return None
        if _predicate_result(tx, predicate, item):
            return item
        state["stopped"] = True
        return None

    return _StepIterator("itertools.takewhile", next_takewhile, itertools.takewhile)


@handles(itertools.filterfalse)
def _filterfalse(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    bound = _arguments(itertools.filterfalse, args, kwargs)
    function, it = bound["function"], _iterator(tx, bound["iterable"])
    plain = function.is_constant() and function.as_constant() is None

    def next_filterfalse(tx: Context) -> Value | None:
        while True:
            item = it.next_value(tx)
            if item is None:
                return None
            keep = tx.truth(item) if plain else _predicate_result(tx, function, item)
            if not keep:
                return item

    return _StepIterator("itertools.filterfalse", next_filterfalse, itertools.filterfalse)


@handles(itertools.starmap)
def _starmap(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    bound = _arguments(itertools.starmap, args, kwargs)
    function, it = bound["function"], _iterator(tx, bound["iterable"])

    def next_starmap(tx: Context) -> Value | None:
        item = it.next_value(tx)
        if item is None:
            return None
        return tx.call(function, tx.unpack(item), {})

    return _StepIterator("itertools.starmap", next_starmap, itertools.starmap)


_GROUPER: type = type(next(itertools.groupby("a"))[1])


@handles(itertools.groupby)
def _groupby(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    bound = _arguments(itertools.groupby, args, kwargs)
    it, key = _iterator(tx, bound["iterable"]), bound["key"]
    plain = key.is_constant() and key.as_constant() is None
    # as in C: the current item and its key (None before the first and once consumed), the
    # key of the group handed out last, and which grouper may still read
    state: dict[str, Any] = {"value": None, "key": None, "target": None, "grouper": None}

    def step(tx: Context) -> bool:
        value = it.next_value(tx)
        if value is None:
            return False
        state["key"] = value if plain else tx.call(key, [value], {})
        state["value"] = value
        return True

    def next_group(tx: Context) -> Value | None:
        state["grouper"] = None
        while True:
            if state["key"] is not None:
                if state["target"] is None:
                    break
                if not _same_key(tx, state["target"], state["key"]):
                    break
            if not step(tx):
                return None
        state["target"] = state["key"]
        grouper = _grouper(state["target"])
        state["grouper"] = grouper
        return TupleValue([state["key"], grouper])

    def _grouper(target: Value) -> _StepIterator:
        def next_member(tx: Context) -> Value | None:
            if state["grouper"] is not grouper:
                return None
            if state["value"] is None and not step(tx):
                return None
            if not _same_key(tx, target, state["key"]):
                return None
            value, state["value"] = state["value"], None
            return value  # type: ignore[no-any-return]

        grouper = _StepIterator("itertools._grouper", next_member, _GROUPER)
        return grouper

    return _StepIterator("itertools.groupby", next_group, itertools.groupby)
