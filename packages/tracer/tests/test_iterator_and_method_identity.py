"""Iterators made in the trace have the type Python gives them (``itertools.chain``,
``itertools.product``, ``zip``), and an itertools object is never swapped for a plain tuple
iterator at a graph break (its ``__setstate__`` is its own). Bound methods compare as in
Python: ``l.append == l.append`` (same object, same function), never by the identity of the
method objects. Each program is compared with eager."""

from __future__ import annotations

import itertools
from typing import Any

import torch

import sapwood_tracer


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _same(fn: Any, *args: Any) -> Any:
    expected = fn(*args)
    got = sapwood_tracer.compile(fn, backend=_eager)(*args)
    assert got == expected
    return got


def test_itertools_objects_have_their_own_types():
    def fn(xs):
        return (
            type(itertools.chain(xs, xs)),
            type(itertools.chain.from_iterable([xs])),
            type(itertools.product(xs)),
            type(itertools.combinations(xs, 1)),
            type(itertools.permutations(xs)),
            type(itertools.islice(xs, 1)),
            type(itertools.repeat(1, 2)),
            type(zip(xs, xs)),
        )

    got = _same(fn, [1, 2])
    assert got[0] is itertools.chain


def test_an_itertools_object_keeps_its_setstate():
    def fn(a, b):
        p = itertools.product(a, b)
        p.__setstate__((0, 0x1000))  # indices are clamped to the pools' lengths
        return next(p)

    assert _same(fn, (1, 2), (3,)) == (2, 3)


def test_methods_of_a_builtin_bound_to_one_object_are_equal():
    def fn(xs, ys):
        return (
            xs.append == xs.append,
            xs.append != xs.append,
            xs.append == ys.append,
            xs.append == xs.pop,
            xs.append == None,  # noqa: E711
            xs.append is xs.append,
        )

    assert _same(fn, [], []) == (True, False, False, False, False, False)


class _Thing:
    def f(self) -> int:
        return 1

    def g(self) -> int:
        return 2


def test_methods_of_a_python_class_bound_to_one_object_are_equal():
    def fn(a, b):
        return a.f == a.f, a.f == b.f, a.f == a.g, a.f != a.f

    assert _same(fn, _Thing(), _Thing()) == (True, False, False, False)


def test_a_range_iterator_survives_a_graph_break_as_a_range_iterator():
    def fn(x):
        it = iter(range(5))
        next(it)
        sapwood_tracer.graph_break()
        return type(it), list(it), x + 1

    got = sapwood_tracer.compile(fn, backend=_eager)(torch.ones(1))
    assert got[:2] == fn(torch.ones(1))[:2] == (type(iter(range(0))), [1, 2, 3, 4])


def test_a_long_range_loop_that_breaks_passes_the_range_not_its_numbers():
    def fn(n):
        f = _Thing().f
        for _ in range(n):
            f = f.__call__  # a method-wrapper: read eagerly, at a graph break
        return f()

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    assert compiled(200_000) == fn(200_000) == 1


def _dunder_next(d, x):
    it = iter(d.keys())
    first = it.__next__()
    rest = list(it.__iter__())
    try:
        it.__next__()
    except StopIteration:
        stopped = True
    else:
        stopped = False
    return x + 1, first, rest, stopped, iter([5]).__next__()


def test_an_iterators_own_next_and_iter_methods_work_as_next_and_iter():
    d = {"a": 1, "b": 2, "c": 3}
    x = torch.ones(1)
    got = sapwood_tracer.compile(_dunder_next, backend=_eager)(d, x)
    want = _dunder_next(d, x)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    report = sapwood_tracer.explain(_dunder_next)(d, x)
    assert not report.breaks, str(report)
