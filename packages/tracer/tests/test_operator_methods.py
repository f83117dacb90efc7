"""Operators on values whose class defines them in Python: a subclass of a builtin container
(``collections.Counter``) uses its own methods, not the container's; in-place operators call
``__i<op>__`` first; unary operators inline ``__neg__``/``__pos__``/``__invert__``. Each
program is compiled and compared with eager."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

import sapwood_tracer


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _same(fn: Any, *make_args: Any) -> None:
    expected = fn(*(make() for make in make_args))
    got = sapwood_tracer.compile(fn, backend=_eager)(*(make() for make in make_args))
    assert repr(got) == repr(expected)
    assert type(got) is type(expected)


def _counters() -> tuple[Counter[str], Counter[str]]:
    return Counter(a=3, b=-2, c=0), Counter(a=1, d=4)


def test_counter_comparisons_use_counters_methods():
    def fn(pair):
        p, q = pair
        return p < q, p <= q, p > q, p >= q, p == q, p != q, Counter(a=1) < Counter(a=2)

    _same(fn, _counters)


def test_counter_arithmetic_drops_non_positive_counts():
    def fn(pair):
        p, q = pair
        return p + q, p - q, p | q, p & q, p + Counter()

    _same(fn, _counters)


def test_counter_unary_operators():
    def fn(pair):
        p, _ = pair
        return -p, +p

    _same(fn, _counters)


def test_counter_in_place_operators_mutate_the_counter():
    def fn(pair):
        p, q = pair
        alias = p
        p += q
        p -= Counter(d=1)
        return alias is p, alias

    _same(fn, _counters)


def test_repr_of_a_counter_lists_its_counts():
    def fn(pair):
        p, _ = pair
        return repr(p), repr(Counter({"a": 2, "b": None}))

    _same(fn, _counters)


class _Accumulator:
    def __init__(self) -> None:
        self.items: list[int] = []

    def __iadd__(self, other: int) -> _Accumulator:
        self.items.append(other)
        return self

    def __add__(self, other: int) -> list[int]:
        return [*self.items, other]

    def __neg__(self) -> list[int]:
        return [-i for i in self.items]


def test_in_place_operator_of_a_user_class_calls_its_iadd():
    def fn(acc, x):
        alias = acc
        acc += 1
        acc += 2
        return alias is acc, acc.items, acc + 3, -acc, x + 1

    expected = fn(_Accumulator(), torch.ones(1))
    got = sapwood_tracer.compile(fn, backend=_eager)(_Accumulator(), torch.ones(1))
    assert got[:4] == expected[:4]
    assert torch.equal(got[4], expected[4])
