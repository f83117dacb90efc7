"""``is`` between tuples, answered where CPython's answer is certain: a tuple the trace made
is a new object, a code constant is the code's very object, and CPython's shortcuts that
hand back an operand (``t + ()``, ``t * 1``) hand back the same value. Anything else is a
graph break, never a guess."""

from __future__ import annotations

import collections

import torch

import sapwood_tracer

X = torch.ones(2)
Pair = collections.namedtuple("Pair", "a b")


def _no_breaks(fn, *args):
    report = sapwood_tracer.explain(fn)(*args)
    assert not report.breaks and not report.eager_functions, str(report)


def test_concatenation_and_repetition_make_new_tuples(check):
    def fn(x):
        u = (0, 1)
        u2 = u
        u += (2, 3)
        v = (0, 1)
        v2 = v
        v *= 3
        w = (x.shape[0], 1)
        return x + 1, u is not u2, v is not v2, u is v, w is (x.shape[0], 1), w is u2

    check(fn, (X,))
    _no_breaks(fn, X)


def test_cpythons_shortcuts_hand_back_the_operand(check):
    def fn(x):
        t = (1, 2)
        e = ()
        p = Pair(1, 2)
        return (
            x * 2,
            t + () is t,  # noqa: RUF005
            () + t is t,  # noqa: RUF005
            t * 1 is t,
            1 * t is t,
            e * 5 is e,
            tuple(t) is t,
            t * 2 is t,
            t + t is t,
            type(p * 1),  # (of a subclass: a new plain tuple)
            type(p + ()),  # noqa: RUF005
        )

    check(fn, (X,))
    _no_breaks(fn, X)


def test_code_constants_are_the_codes_own_objects(check):
    def fn(x):
        a = (0, 1)
        b = (0, 1)
        c = ("x", None)
        return x - 1, a is b, a is c, a is not c

    check(fn, (X,))
    _no_breaks(fn, X)


def test_an_input_tuple_is_not_a_tuple_made_in_the_trace(check):
    def fn(x, t):
        u = t + (3,)  # noqa: RUF005
        return x + 1, u is t, t + () is t  # noqa: RUF005

    check(fn, (X, (1, 2)))


def test_a_tuple_that_may_be_another_is_a_graph_break():
    def fn(x, t):
        s = tuple(t[i] for i in range(len(t)))  # a new tuple, or not: nothing is known
        return x + 1, s is t

    report = sapwood_tracer.explain(fn)(X, (1, 2))
    assert any("`is` between two tuples" in b.reason for b in report.breaks), str(report)


def test_a_slice_of_all_of_an_exact_tuple_is_the_tuple(check):
    def fn(x, given):
        t = (1, [2])
        p = Pair(1, 2)
        return (
            x + 1,
            t[:] is t,
            t[0:] is t,
            t[-10:10] is t,
            t[::1] is t,
            t[::-1] is t,
            t[:1] is t,
            t[1:1] is (),  # noqa: F632
            given[:] is given,
            ()[:] is (),  # noqa: F632
            type(p[:]),  # (of a subclass: a new plain tuple)
        )

    check(fn, (X, (1, 2, [3])))
    _no_breaks(fn, X, (1, 2, [3]))


def test_a_whole_slice_kept_across_a_graph_break_is_the_same_tuple(check):
    def fn(x, given):
        s = given[:]
        print("break")
        return x + 1, s is given

    check(fn, (X, (1, 2, [3])))
