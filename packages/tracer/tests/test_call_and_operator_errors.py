"""The TypeErrors CPython raises for a call whose arguments do not fit, and for an operator
that both operands decline, are raised in the traced program with CPython's own messages,
so the program's handlers (``assertRaises(TypeError, s.add)``) see them in one graph; and
``object``'s comparison methods called by name behave as CPython's."""

from __future__ import annotations

import torch
from torch.utils._ordered_set import OrderedSet

import sapwood_tracer


def _errors(calls):
    out = []
    for call in calls:
        try:
            out.append(call())
        except TypeError as exc:
            out.append(str(exc))
    return out


def _same_in_one_graph(fn):
    x = torch.ones(2)
    sapwood_tracer.reset()
    compiled = sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)
    eager, got = fn(x), compiled(x)
    torch.testing.assert_close(got[0], eager[0])
    assert got[1] == eager[1]
    return got[1]


def g(a, b, /, c, d=1, *, e, f=2):
    return a


def test_arguments_that_do_not_fit_raise_cpythons_type_error() -> None:
    def fn(x):
        s = OrderedSet("abc")
        return x + 1, _errors(
            [
                lambda: s.add(),
                lambda: s.copy(1),
                lambda: g(1),
                lambda: g(1, 2, 3, 4, 5, e=1),
                lambda: g(1, 2, c=3),
                lambda: g(1, 2, 3, e=1, z=2),
                lambda: g(a=1, b=2, c=3, e=4),
                lambda: g(1, 2, 3, c=3, e=1),
            ]
        )

    messages = _same_in_one_graph(fn)
    assert messages[0] == "OrderedSet.add() missing 1 required positional argument: 'elem'"


def test_a_renamed_function_is_named_as_renamed() -> None:
    def h(a):
        return a

    h.__qualname__ = "renamed"

    def fn(x):
        return x + 1, _errors([lambda: h()])

    assert _same_in_one_graph(fn) == ["renamed() missing 1 required positional argument: 'a'"]


class Plain:
    pass


def test_an_operator_both_operands_decline_raises_cpythons_type_error() -> None:
    def fn(x):
        a, s = Plain(), OrderedSet("ab")

        def inplace():
            b = Plain()
            b -= 1

        return x + 1, _errors(
            [
                lambda: a - 1,
                lambda: 1 <= a,  # noqa: SIM300 (the number on the left)
                lambda: a > None,
                lambda: s - 1,
                lambda: s ^ 1,
                lambda: s.issubset(1),
                inplace,
            ]
        )

    _same_in_one_graph(fn)


class Equal:
    def __eq__(self, other):
        return isinstance(other, Equal)


def test_objects_comparison_methods_called_by_name() -> None:
    def fn(x):
        s, t, p, q = OrderedSet("ab"), OrderedSet("ab"), Equal(), object()
        return x + 1, [
            s != t,
            s != 1,
            s.__ne__(1),
            object.__ne__(p, Equal()),
            object.__ne__(p, 3),
            object.__eq__(q, q),
            object.__eq__(q, p),
            object.__lt__(q, p),
        ]

    _same_in_one_graph(fn)


class SetSub(set):
    pass


class FrozenSub(frozenset):
    pass


class OwnEq(set):
    def __eq__(self, other):
        return "own"


def test_set_comparison_methods_by_name_across_set_kinds() -> None:
    """``set.__eq__(a, frozenset(a))`` and the other comparisons, between sets, frozensets
    and subclasses that keep the builtin comparisons, are the content comparison."""

    def fn(x):
        out = []
        for kind in (set, frozenset, SetSub, FrozenSub):
            a = kind("abc")
            for other in (kind, set, frozenset):
                b = other(a)
                out += [a.__eq__(b), kind.__eq__(a, b), a.__ne__(b), a.__lt__(other("abcd"))]
                out += [a.__ge__(other("ab")), a.__le__(b)]
        return x + 1, out

    _same_in_one_graph(fn)

    def overridden(x):
        return x + 1, [set.__eq__(OwnEq("ab"), frozenset("ab"))]

    compiled = sapwood_tracer.compile(overridden, backend=lambda gm, ex: gm.forward)
    assert compiled(torch.ones(2))[1] == [True]  # set's own __eq__, not OwnEq's
