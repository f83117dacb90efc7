"""Constructs of CPython's test_functools and test_itertools, compiled with ``fullgraph=True``
and compared with eager: classes whose ``__new__`` is written in Python (the pure-Python
``functools.partial`` among them) and their slots, each copy of the C partial type and its
plain subclasses, ``==`` of containers whose items are not constants, and the lazy
``itertools`` types (``count``, ``cycle``, ``compress``, ``dropwhile``, ``takewhile``,
``filterfalse``, ``starmap``, ``groupby``)."""

from __future__ import annotations

import functools
import itertools
import operator
from typing import Any

import pytest
import torch
from test.support import import_helper

import sapwood_tracer

py_functools = import_helper.import_fresh_module("functools", blocked=["_functools"])
c_functools = import_helper.import_fresh_module("functools", fresh=["_functools"])


class PyPartialSubclass(py_functools.partial):
    pass


class CPartialSubclass(c_functools.partial):
    pass


PARTIALS = [
    py_functools.partial,
    PyPartialSubclass,
    functools.partial,
    c_functools.partial,
    CPartialSubclass,
]


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _same(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` compiled in one graph and eagerly: the same result."""
    expected = fn(*args)
    got = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)(*args)
    assert got == expected
    return got


def _capture(*args: Any, **kwargs: Any) -> Any:
    return args, kwargs


@pytest.mark.parametrize("partial", PARTIALS, ids=lambda p: f"{p.__module__}.{p.__qualname__}")
def test_a_partial_made_in_the_trace_calls_and_flattens_as_eagerly(partial):
    def fn(partial):
        p = partial(_capture, 1, 2, a=10, b=20)
        q = partial(p, 5, c=3)
        return (
            p(3, 4, b=30, c=40),
            q(6),
            q.func is _capture,
            q.args,
            q.keywords,
            type(q) is partial,
            callable(p),
            p.args is p.args,
        )

    assert _same(fn, partial)[2:] == (True, (1, 2, 5), {"a": 10, "b": 20, "c": 3}, True, True, True)


@pytest.mark.parametrize("partial", PARTIALS, ids=lambda p: f"{p.__module__}.{p.__qualname__}")
def test_a_partial_of_no_callable_raises_as_eagerly(partial):
    def not_callable(partial):
        try:
            partial(2)
        except TypeError as exc:
            return str(exc)

    assert _same(not_callable, partial) == "the first argument must be callable"


@pytest.mark.parametrize("partial", PARTIALS[2:], ids=lambda p: f"{p.__module__}.{p.__qualname__}")
def test_a_c_partial_without_a_function_raises_as_eagerly(partial):
    def without_function(partial):
        try:
            partial()
        except TypeError as exc:
            return str(exc)

    assert _same(without_function, partial) == "type 'partial' takes at least one argument"


@pytest.mark.parametrize("partial", PARTIALS, ids=lambda p: f"{p.__module__}.{p.__qualname__}")
def test_keywords_of_a_partial_are_one_dict_its_calls_read(partial):
    def fn(partial):
        d = {"a": 3}
        p = partial(_capture, **d)
        d["a"] = 5
        p.keywords["b"] = 1
        return p(), d

    assert _same(fn, partial) == (((), {"a": 3, "b": 1}), {"a": 5})


def test_a_python_new_is_inlined_and_init_runs_on_its_instances_only():
    class Made:
        def __new__(cls, value):
            self = super().__new__(cls)
            self.seen = [value]
            return self

        def __init__(self, value):
            self.seen.append(value + 1)

    class Other:
        def __new__(cls, value):
            return value * 2

        def __init__(self, value):  # not called: __new__ returned no Other
            raise AssertionError

    def fn(x):
        return Made(3).seen, Other(4), type(Made(1)) is Made, x + 1

    assert _same(fn, torch.ones(1))[:3] == ([3, 4], 8, True)


def test_object_new_with_arguments_raises_as_eagerly():
    class Plain:
        pass

    class WithNew:
        def __new__(cls, *args):
            return object.__new__(cls, *args)

    def fn():
        messages = []
        for make in (lambda: object.__new__(Plain, 1), lambda: WithNew(1)):
            try:
                make()
            except TypeError as exc:
                messages.append(str(exc))
        return messages

    assert len(_same(fn)) == 2


def test_slots_of_a_python_class_hold_values_and_unset_slots_raise():
    class Slotted:
        __slots__ = ("a", "b")

    def fn():
        s = Slotted()
        s.a = 1
        try:
            return s.a, s.b
        except AttributeError:
            return s.a, "missing"

    assert _same(fn) == (1, "missing")


def test_an_attribute_no_slot_or_dict_holds_is_refused():
    class Slotted:
        __slots__ = ("a",)

    def fn():
        s = Slotted()
        s.other = 1
        return s

    with pytest.raises(sapwood_tracer.Unsupported):
        sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)()


def test_callable_asks_the_type_not_the_metaclass():
    class NotCallable:
        pass

    class Callable_:
        def __call__(self):
            return 1

    def fn():
        return callable(NotCallable()), callable(Callable_()), callable(NotCallable)

    assert _same(fn) == (False, True, True)


def test_containers_with_items_from_the_inputs_compare_item_by_item():
    def fn(a, b):
        return [a] == [a], {"k": a, "x": None} == {"k": a, "x": None}, (a, b) == (a, a), [a] != [b]

    assert _same(fn, 0, 1) == (True, True, False, True)


def test_count_cycle_and_repeat_are_endless_and_lazy():
    def fn():
        return (
            list(itertools.islice(itertools.count(10), 3)),
            list(zip("abc", itertools.count(start=2, step=3))),
            list(itertools.islice(itertools.count(2, 1.25), 3)),
            list(itertools.islice(itertools.cycle("AB"), 5)),
            list(itertools.cycle([])),
            list(itertools.islice(itertools.repeat(7), 2)),
        )

    assert _same(fn)[3] == list("ABABA")


def test_filtering_iterators_call_their_predicate_per_item_in_order():
    def fn():
        calls = []

        def small(x):
            calls.append(x)
            return x < 5

        t = itertools.takewhile(small, [1, 4, 6, 4, 1])
        taken = list(t)
        return (
            taken,
            list(itertools.dropwhile(small, [1, 4, 6, 4, 1])),
            list(itertools.filterfalse(None, [0, 1, 0, 2])),
            list(itertools.filterfalse(lambda x: x % 2, range(6))),
            list(itertools.compress(data="ABCDEF", selectors=[1, 0, 1, 0, 1, 1])),
            list(itertools.starmap(pow, [(2, 5), (3, 2)])),
            list(itertools.combinations_with_replacement("AB", 2)),
            next(t, "done"),
            calls,
        )

    assert _same(fn)[0] == [1, 4]


def test_groupby_shares_its_iterator_with_the_groups():
    def fn():
        it = itertools.groupby([1, 2, 3, 4, 5], key=lambda x: x // 2)
        k, g = next(it)
        k2, g2 = next(it)
        first = next(g2)
        k3, g3 = next(it)
        return (
            k,
            list(g),
            k2,
            first,
            list(g2),
            k3,
            list(g3),
            [(k, list(g)) for k, g in it],
            [k for k, _ in itertools.groupby("AAABBA")],
        )

    assert _same(fn)[-1] == ["A", "B", "A"]


@pytest.mark.parametrize(
    "kind, args",
    [
        (itertools.count, (2, 3, 4)),
        (itertools.dropwhile, ()),
        (itertools.takewhile, (operator.pow,)),
        (itertools.compress, ("a",)),
        (itertools.starmap, (operator.pow, [(4, 5)], "extra")),
        (itertools.groupby, ()),
    ],
)
def test_lazy_itertools_check_their_arguments_as_eagerly(kind, args):
    def fn(kind, args):
        try:
            kind(*args)
        except TypeError as exc:
            return str(exc)

    assert _same(fn, kind, args)


def test_the_dict_of_a_new_object_holds_its_attributes_and_can_be_replaced():
    class Plain:
        pass

    def fn():
        o = Plain()
        o.x = 1
        d = o.__dict__
        d["y"] = 2
        o.z = 3
        replacement = {"q": 4}
        o2 = Plain()
        o2.__dict__ = replacement
        o2.w = 5
        return o.y, sorted(d), replacement, o2.__dict__ is replacement, o2

    got = _same_shape(fn)
    assert got[:4] == (2, ["x", "y", "z"], {"q": 4, "w": 5}, True)
    assert vars(got[4]) is got[2]


def _same_shape(fn: Any) -> Any:
    """``fn()`` compiled in one graph, its first four results compared with eager."""
    got = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)()
    assert got[:4] == fn()[:4]
    return got


def test_the_pure_python_partial_keeps_its_state_as_eagerly():
    def signature(part):
        return part.func, part.args, part.keywords, part.__dict__

    def fn():
        nested = py_functools.partial(py_functools.partial(signature, "a"), bar=True)
        f = py_functools.partial(signature)
        namespace = {"attr": []}
        f.__setstate__((_capture, (1,), {"a": 10}, namespace))
        state = signature(f)
        return signature(nested), state, state[3] is namespace, f(2, b=20)

    _same(fn)


def test_str_join_reads_any_iterable():
    def fn():
        return "".join(itertools.chain("AB", "CD")), "-".join(map(str, range(3)))

    assert _same(fn) == ("ABCD", "0-1-2")


def test_a_cached_property_caches_in_the_objects_dict():
    class Item:
        cost_base = 1

        def get_cost(self):
            self.cost_base += 1
            return self.cost_base

        cached = py_functools.cached_property(get_cost)

        @functools.cached_property
        def listed(self):
            """A list."""
            return [self.cost_base]

    class Slotted:
        __slots__ = ("a",)

        @functools.cached_property
        def cost(self):
            raise AssertionError("never called")

    def made_in_the_trace():
        item = Item()
        values = [item.get_cost(), item.cached, item.get_cost(), item.cached]
        try:
            values.append(Slotted().cost)
        except TypeError as exc:
            values.append(str(exc))
        return values, item.listed is item.listed, Item.listed.__doc__, dict(item.__dict__)

    def passed_in(item):
        return [item.get_cost(), item.cached, item.get_cost(), item.cached]

    _same(made_in_the_trace)
    eager_item, compiled_item = Item(), Item()
    compiled = sapwood_tracer.compile(passed_in, backend=_eager, fullgraph=True)
    assert compiled(compiled_item) == passed_in(eager_item)
    assert vars(compiled_item) == vars(eager_item) == {"cost_base": 4, "cached": 3}


def test_accumulate_binds_its_arguments_as_eagerly():
    def fn():
        out = [
            list(itertools.accumulate(iterable=range(4))),
            list(itertools.accumulate([2, 8, 1], min)),
            list(itertools.accumulate([10, 5, 1], initial=None)),
            list(itertools.accumulate([], initial=100)),
        ]
        for args, kwargs in (((range(3), 5, 6), {}), ((), {}), ((), {"x": range(3)})):
            try:
                itertools.accumulate(*args, **kwargs)
            except TypeError as exc:
                out.append(str(exc))
        return out

    assert _same(fn)[2] == [10, 15, 16]


def test_a_new_objects_class_setattr_runs_and_getattribute_is_refused():
    class Doubling:
        def __setattr__(self, name, value):
            object.__setattr__(self, name, value * 2)

        def __init__(self):
            self.x = 1

    class Answering:
        def __getattribute__(self, name):
            return 42

    def stores():
        return Doubling().x

    def reads():
        return hasattr(Answering(), "anything")

    assert _same(stores) == 2
    with pytest.raises(sapwood_tracer.Unsupported):
        sapwood_tracer.compile(reads, backend=_eager, fullgraph=True)()
    assert sapwood_tracer.compile(reads, backend=_eager)() is True
