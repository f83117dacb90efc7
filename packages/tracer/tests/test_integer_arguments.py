"""``math.gcd``, ``lcm``, ``isqrt``, ``factorial``, ``comb``, ``perm`` and ``operator.index``
on objects of the user's classes: their ``__index__`` is inlined, in CPython's order, and the
call folds; results, errors and side effects equal eager's, in one graph."""

from __future__ import annotations

import math
import operator

import pytest
import torch

import sapwood_tracer

X = torch.ones(2)


class Indexable:
    def __init__(self, value, log=None):
        self.value = value
        self.log = log

    def __index__(self):
        if self.log is not None:
            self.log.append(self.value)
        return self.value


class SubIndexable(Indexable):
    pass


def _outcome(call):
    try:
        return call()
    except Exception as exc:  # the error is part of the behaviour compared
        return type(exc).__name__, str(exc)


def _no_breaks(fn, *args):
    report = sapwood_tracer.explain(fn)(*args)
    assert not report.breaks and not report.eager_functions, str(report)


def test_math_functions_convert_user_objects_through_their_index(check):
    def fn(x):
        return (
            x + 1,
            math.gcd(Indexable(120), Indexable(84)),
            math.gcd(Indexable(-120)),
            math.lcm(Indexable(120), 84, SubIndexable(3)),
            math.isqrt(Indexable(1729)),
            math.factorial(Indexable(6)),
            math.comb(Indexable(6), Indexable(2)),
            math.perm(Indexable(6)),
            operator.index(SubIndexable(7)),
        )

    check(fn, (X,))
    _no_breaks(fn, X)


def test_an_object_made_before_the_call_is_converted_too(check):
    def fn(x, a, b):
        return x * 2, math.gcd(a, b), math.lcm(a, b)

    check(fn, (X, Indexable(12), Indexable(18)))


def test_errors_are_cpythons_and_later_arguments_are_not_converted(check):
    def fn(x):
        log = []
        return (
            x - 1,
            _outcome(lambda: math.gcd(Indexable(4, log), 2.0, Indexable(6, log))),
            _outcome(lambda: math.lcm(Indexable(4, log), "a")),
            _outcome(lambda: math.comb(1.5, Indexable(2, log))),
            _outcome(lambda: math.isqrt(Indexable(-3, log))),
            _outcome(lambda: math.gcd(Indexable(2.5, log))),
            _outcome(lambda: operator.index(Indexable("7", log))),
            log,
        )

    check(fn, (X,))
    _no_breaks(fn, X)


class _ReturnsBool:
    def __index__(self):
        return True


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (the call then runs eagerly)
def test_an_index_returning_an_int_subclass_is_a_graph_break():
    def fn(x):
        return x + 1, math.gcd(_ReturnsBool(), 4)

    report = sapwood_tracer.explain(fn)(X)
    assert any("subclass of int" in b.reason for b in report.breaks), str(report)
