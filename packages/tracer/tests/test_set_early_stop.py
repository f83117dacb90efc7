"""``set.isdisjoint``/``issuperset`` of an iterable that is not a set stop iterating at the
first item that decides, an intersection once every member was found (``issubset`` too from
Python 3.12); the other set methods read it whole. A generator with side effects
shows the difference: the trace used to read the whole operand (a wrong answer found by
PyTorch's own dynamo test ``test_sets.py::test_isdisjoint_with_generator``)."""

from __future__ import annotations

import sys

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import sapwood_tracer

from .conftest import CountingBackend

_METHODS = [
    "isdisjoint",
    "issuperset",
    "issubset",
    "union",
    "intersection",
    "difference",
    "intersection_update",
    "difference_update",
]


def _program(members: list[int], items: list[int], name: str, frozen: bool):
    log: list[int] = []

    def gen():
        for item in items:
            log.append(item)
            yield item

    def fn(x: torch.Tensor):
        s = frozenset(members) if frozen else set(members)
        if frozen and name.endswith("_update"):
            s = set(s)
        result = getattr(s, name)(gen())
        return x + len(log), result, sorted(s)

    return fn, log


@settings(max_examples=150, deadline=None)
@given(
    members=st.lists(st.integers(0, 6), max_size=5),
    items=st.lists(st.integers(0, 6), max_size=6),
    name=st.sampled_from(_METHODS),
    frozen=st.booleans(),
)
def test_set_methods_read_a_generator_as_far_as_python_does(members, items, name, frozen):
    eager, eager_log = _program(members, items, name, frozen)
    expected = eager(torch.zeros(1))
    traced, traced_log = _program(members, items, name, frozen)
    sapwood_tracer.reset()
    backend = CountingBackend()
    got = sapwood_tracer.compile(traced, backend=backend, fullgraph=True)(torch.zeros(1))
    assert traced_log == eager_log
    assert got[1] == expected[1] and type(got[1]) is type(expected[1])
    assert got[2] == expected[2]
    torch.testing.assert_close(got[0], expected[0])
    assert backend.count == 1


def test_an_intersection_stops_once_every_member_was_found() -> None:
    for name in ("intersection", "intersection_update") + (
        ("issubset",) if sys.version_info >= (3, 12) else ()
    ):
        eager, eager_log = _program([0, 1], [1, 5, 0, 7, 0], name, False)
        expected = eager(torch.zeros(1))
        traced, traced_log = _program([0, 1], [1, 5, 0, 7, 0], name, False)
        sapwood_tracer.reset()
        got = sapwood_tracer.compile(traced, backend=CountingBackend(), fullgraph=True)(
            torch.zeros(1)
        )
        assert eager_log == traced_log == [1, 5, 0]
        assert got[1:] == expected[1:]
