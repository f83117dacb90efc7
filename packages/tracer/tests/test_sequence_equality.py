"""``==`` and ``!=`` between lists and tuples, as Python compares them: item by item for two
of one type (identity first, then the items' own ``__eq__``), unequal for a list against a
tuple or another builtin type. Whatever Value class the trace keeps a tuple in (one it made,
one a call's ``*args`` made, a constant of the code), only the Python types decide."""

from __future__ import annotations

import torch

import sapwood_tracer

X = torch.ones(2)


class Tracked:
    calls: list[str] = []

    def __eq__(self, other):
        Tracked.calls.append("eq")
        return other == 1


def _packed(*args):
    return args


def _no_breaks(fn, *args):
    report = sapwood_tracer.explain(fn)(*args)
    assert not report.breaks and not report.eager_functions, str(report)


def test_a_built_tuple_equals_an_args_tuple_of_the_same_items(check):
    def fn(x):
        foo = object()
        built = (foo,)
        packed = _packed(foo)
        return x + 1, built == packed, built != packed, [("k", built)] != [("k", packed)]

    check(fn, (X,))
    _no_breaks(fn, X)


def test_items_compare_by_identity_first_then_by_their_eq(check):
    def fn(x):
        Tracked.calls.clear()
        t = Tracked()
        same = (t,) == _packed(t)  # identity: no __eq__ call
        calls_after_same = len(Tracked.calls)
        other = (t,) == (1,)  # t.__eq__(1)
        return x + 1, same, calls_after_same, other, (t,) == (2,), list(Tracked.calls)

    check(fn, (X,), graphs=2)  # (the second call sees the calls of the first: traced again)


def test_a_constant_tuple_against_a_tuple_of_a_non_constant_item(check):
    def fn(x):
        t = (Tracked(),)
        return x + 1, t == (1,), (1,) == t, t != (1,)  # noqa: SIM300, t == (2,), [1, 2] == (1, 2)

    check(fn, (X,), graphs=2)  # (the second call sees the calls of the first: traced again)


def test_a_list_against_a_tuple_or_a_number_is_unequal(check):
    def fn(x, items):
        as_tuple = tuple(items)
        return x + 1, items == as_tuple, as_tuple != items, as_tuple == 3, items != 3.0

    check(fn, (X, [object(), 2]))
