"""A list comprehension that only computes on numbers and strings (Python 3.11, where it is a
function of its own) runs as Python runs it at trace time: a long one no longer meets the
frame budget, and its result is eager's. Anything that could run the user's code, read or
write state, or raise, is interpreted as before."""

from __future__ import annotations

import sys

import pytest
import torch

import sapwood_tracer

X = torch.ones(2)
pytestmark = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11), reason="3.12+ inline comprehensions into their function"
)


def _no_breaks(fn, *args):
    report = sapwood_tracer.explain(fn)(*args)
    assert not report.breaks and not report.eager_functions, str(report)


def test_a_long_pure_comprehension_compiles_in_one_graph(check):
    def fn(x):
        values = [2**e + i for e in range(60, 200) for i in range(-40, 40)]
        return x + len(values), values[-3:], sum(values[:5])

    check(fn, (X,))
    _no_breaks(fn, X)


def test_builtins_conditions_and_tuples_give_eagers_list(check):
    def fn(x):
        items = [(abs(i - 5), str(i), divmod(i, 3)) for i in range(10) if i % 2 or i > 6]
        words = [w * 2 for w in ("a", "bc") if w in "abc"]
        return x * 2, items, words

    check(fn, (X,))
    _no_breaks(fn, X)


def test_a_global_that_shadows_a_builtin_is_read_and_guarded(check):
    def fn(x):
        return x + 1, [abs(i) for i in range(-3, 3)]

    check(fn, (X,))
    fn.__globals__["abs"] = lambda v: -v
    try:
        compiled = sapwood_tracer.compile(fn, backend=lambda gm, inputs: gm.forward)
        assert compiled(X)[1] == fn(X)[1] == [3, 2, 1, 0, -1, -2]
    finally:
        del fn.__globals__["abs"]


def test_a_comprehension_that_raises_raises_as_python_does(check):
    def fn(x):
        try:
            return x, [10 // i for i in range(-2, 2)]
        except ZeroDivisionError as exc:
            return x + 1, str(exc)

    check(fn, (X,))


def test_a_comprehension_with_side_effects_is_interpreted():
    def fn(x, log):
        return x + 1, [log.append(i) for i in range(3)]

    eager_log, compiled_log = [], []
    want = fn(X, eager_log)
    got = sapwood_tracer.compile(fn, backend=lambda gm, inputs: gm.forward)(X, compiled_log)
    assert got[1] == want[1] and compiled_log == eager_log == [0, 1, 2]
