"""``sum()`` in compiled code gives Python's result: on Python 3.12+ floats are added with
compensation, which additions one after another do not reproduce."""

from __future__ import annotations

import sys
from typing import Any

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import sapwood_tracer


def _eager(gm: Any, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


def test_a_sum_of_constant_floats_is_pythons():
    def f() -> Any:
        return sum([0.1] * 10), sum([1.0, 10e100, 1.0, -10e100]), sum([1, 2.5], start=0.25)

    assert sapwood_tracer.explain(f)().breaks == []
    assert _compiled(f)() == f()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False), st.integers(-(10**20), 10**20)), max_size=8))
def test_any_sum_of_constant_numbers_is_pythons(numbers: list[Any]):
    sapwood_tracer.reset()

    def f() -> Any:
        return sum(numbers)

    assert repr(_compiled(f)()) == repr(f())


def test_a_float_sum_with_a_number_unknown_while_tracing_is_right():
    def f(n: int) -> Any:
        return sum([0.1, n, 0.1, 0.1])

    compiled = _compiled(f)
    for n in (1, 2, 3):
        assert compiled(n) == f(n)
    if sys.version_info >= (3, 12):
        report = sapwood_tracer.explain(f)(7)
        assert all("compensation" in b.reason for b in report.breaks)


def test_a_sum_of_tensors_is_still_traced():
    def f(x: torch.Tensor) -> Any:
        return sum([x, x * 2, 1.5])

    x = torch.ones(2)
    assert sapwood_tracer.explain(f)(x).breaks == []
    assert torch.equal(_compiled(f)(x), f(x))
