"""``collections.deque`` made in the compiled function: its methods as the C deque's (a full
bounded deque drops from the other end), its errors, its iterator that reads it live and fails
once it was mutated, and the deque built again after the graph. Compared with eager."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
import torch

import sapwood_tracer


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _same(fn: Any, *args: Any) -> Any:
    expected = fn(*args)
    got = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)(*args)
    assert repr(got) == repr(expected)
    return got


def test_appends_and_pops_at_both_ends():
    def fn():
        d = deque([1, 2, 3])
        d.append(4)
        d.appendleft(0)
        d.extend("ab")
        d.extendleft([8, 9])
        return d.pop(), d.popleft(), d, len(d), d[0], d[-1], 3 in d, d.count(2), bool(deque())

    _same(fn)


def test_a_bounded_deque_drops_from_the_other_end():
    def fn():
        d = deque(range(3), maxlen=3)
        d.append(3)
        d.appendleft(-1)
        e = deque(maxlen=0)
        e.extend([1, 2])
        return d, d.maxlen, e, deque("xyz", 2), deque(iterable=[1], maxlen=None)

    _same(fn)


def test_rotate_reverse_clear_and_copy():
    def fn():
        d = deque(range(5))
        d.rotate(2)
        a = list(d)
        d.rotate(-3)
        d.reverse()
        c = d.copy()
        d.clear()
        return a, c, d, c is d

    _same(fn)


def test_insert_clamps_its_index_and_refuses_a_full_bounded_deque():
    def fn():
        out = []
        for i in (0, 2, -1, 10, -10):
            d = deque([1, 2, 3])
            d.insert(i, "z")
            out.append(list(d))
        d = deque([1], maxlen=1)
        try:
            d.insert(0, 2)
        except IndexError as exc:
            out.append(str(exc))
        d = deque([1, 2], maxlen=3)
        d.insert(1, 9)
        return out, d

    _same(fn)


def test_popping_an_empty_deque_raises_index_error():
    def fn():
        out = []
        for pop in (deque().pop, deque().popleft):
            try:
                pop()
            except IndexError as exc:
                out.append(str(exc))
        try:
            deque([1])[5]
        except IndexError as exc:
            out.append(str(exc))
        return out

    _same(fn)


def test_iterating_a_deque_that_changes_raises_runtime_error():
    def fn():
        d = deque(range(3))
        seen = []
        try:
            for v in d:
                seen.append(v)
                if v == 1:
                    d.append(9)
        except RuntimeError as exc:
            seen.append(str(exc))
        return seen, d

    _same(fn)


def test_an_iterator_reads_the_deque_live_after_reverse():
    def fn():
        d = deque([1, 2, 3])
        it = iter(d)
        first = next(it)
        d.reverse()
        return first, list(it)

    _same(fn)


def test_extend_adds_items_one_by_one_until_the_iterable_fails():
    def gen():
        yield 1
        yield 2
        raise ValueError("stop")

    def fn():
        d = deque([0])
        try:
            d.extend(gen())
        except ValueError:
            d.append("failed")
        d.extend(d)
        return d

    _same(fn)


def test_a_deque_of_tensors_is_rebuilt_after_the_graph():
    def fn(x):
        d = deque([x], maxlen=2)
        d.append(x + 1)
        d.append(x * 3)
        return d

    got = _same(fn, torch.ones(2))
    assert type(got) is deque and got.maxlen == 2
    torch.testing.assert_close(got[1], torch.full((2,), 3.0))


def test_each_call_makes_a_new_deque():
    def fn(x):
        return x + 1, deque([1])

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    a, b = compiled(torch.ones(1))[1], compiled(torch.ones(1))[1]
    a.append(2)
    assert a is not b and b == deque([1])


def test_a_deque_input_is_not_modelled():
    def fn(d):
        d.append(1)
        return d

    with pytest.raises(sapwood_tracer.Unsupported):
        sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)(deque())
    assert sapwood_tracer.compile(fn, backend=_eager)(deque([0])) == deque([0, 1])
