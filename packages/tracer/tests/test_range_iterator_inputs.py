"""``next()`` of a range iterator passed in takes the items eager Python takes, and the real
iterator ends where eager Python leaves it, including when one iterator is reached twice or
two are passed; a loop over one still takes its items eagerly."""

from __future__ import annotations

from typing import Any

import pytest

import sapwood_tracer


def _eager(gm: Any, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


def _take(it: Any) -> Any:
    return next(it), next(it, "none"), next(it, "none")


@pytest.mark.parametrize("start", [0, 1, 2, 3, 4, 5])
def test_next_takes_the_items_eager_python_takes(start: int):
    def fresh() -> Any:
        it = iter(range(0, 10, 3))
        for _ in range(start):
            next(it, None)
        return it

    eager_it, compiled_it = fresh(), fresh()
    try:
        expected: Any = _take(eager_it)
    except StopIteration:
        expected = "stop"
    try:
        got: Any = _compiled(_take)(compiled_it)
    except StopIteration:
        got = "stop"
    assert got == expected
    assert list(compiled_it) == list(eager_it)


def test_no_graph_break_and_later_calls_follow_the_real_position():
    it = iter(range(5))
    report = sapwood_tracer.explain(_take)(it)
    assert report.breaks == [] and report.eager_functions == []
    assert list(it) == [3, 4]
    compiled = _compiled(_take)
    it = iter(range(7))
    assert compiled(it) == (0, 1, 2) and compiled(it) == (3, 4, 5)
    assert compiled(it) == (6, "none", "none") and list(it) == []


def test_one_iterator_reached_twice_or_two_iterators_stay_apart():
    def f(a: Any, b: Any) -> Any:
        return next(a), next(b), next(a)

    compiled = _compiled(f)
    shared = iter(range(10))
    assert compiled(shared, shared) == (0, 1, 2) and next(shared) == 3
    a, b = iter(range(10)), iter(range(10))
    assert compiled(a, b) == (0, 0, 1) and (next(a), next(b)) == (2, 1)
    shared = iter(range(10))
    assert compiled(shared, shared) == (0, 1, 2) and next(shared) == 3


@sapwood_tracer.disable
def _rest_eagerly(it: Any) -> list[int]:
    return list(it)


def test_code_running_eagerly_after_next_finds_the_iterator_advanced():
    def f(it: Any) -> Any:
        first = next(it)
        return first, _rest_eagerly(it)

    assert _compiled(f)(iter(range(4))) == (0, [1, 2, 3])


def test_a_loop_over_a_range_iterator_passed_in_still_takes_items_eagerly():
    def f(it: Any) -> Any:
        out = [next(it)]
        for i in it:
            out.append(i)
        return out

    report = sapwood_tracer.explain(f)(iter(range(4)))
    assert [b.kind for b in report.breaks] == ["next"] * len(report.breaks) != []
    it = iter(range(4))
    assert _compiled(f)(it) == [0, 1, 2, 3] and list(it) == []
