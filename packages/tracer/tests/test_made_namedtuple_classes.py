"""``collections.namedtuple(...)`` called inside the compiled function: one graph, and, as
eagerly, a new class at every call for whatever leaves the trace. Before, the call read the
caller's frame (``sys._getframe``) and the whole function ran eagerly."""

from __future__ import annotations

import collections

import torch

import sapwood_tracer

from .conftest import CountingBackend


def _point_sum(a: torch.Tensor, b: torch.Tensor) -> tuple:
    mytuple = collections.namedtuple("mytuple", ["x", "y", "xy"])
    tmp = mytuple(a, b, a + b)
    return mytuple(tmp.x, tmp[1], tmp.xy + b)


def _with_defaults(a: torch.Tensor, b: torch.Tensor) -> tuple:
    mytuple = collections.namedtuple("mytuple", ["x", "y", "xy"], defaults=(None, 1, None))
    tmp = mytuple(a, xy=b)
    return mytuple(tmp.x, tmp[1], tmp.xy + b), mytuple, isinstance(tmp, mytuple)


def _compiled(fn):  # type: ignore[no-untyped-def]
    backend = CountingBackend()
    return sapwood_tracer.compile(fn, backend=backend, fullgraph=True), backend


def test_a_namedtuple_made_in_the_trace_is_one_graph_with_a_class_per_call():
    compiled, backend = _compiled(_point_sum)
    a, b = torch.randn(3), torch.randn(3)
    first, second, eager = compiled(a, b), compiled(a, b), _point_sum(a, b)
    assert backend.count == 1
    assert type(first) is not type(second)  # a new class per call, as eagerly
    assert type(first).__name__ == "mytuple" and type(first)._fields == eager._fields
    assert type(first).__module__ == __name__  # read off the caller's frame eagerly
    for got, want in zip(first, eager):
        torch.testing.assert_close(got, want)


def test_the_class_returned_is_the_class_of_the_instances_returned_with_it():
    compiled, backend = _compiled(_with_defaults)
    a, b = torch.randn(2), torch.randn(2)
    value, cls, was_instance = compiled(a, b)
    eager_value, eager_cls, eager_instance = _with_defaults(a, b)
    assert backend.count == 1
    assert type(value) is cls and was_instance is eager_instance is True
    assert cls._field_defaults == eager_cls._field_defaults
    assert value.y == eager_value.y == 1
    torch.testing.assert_close(value.xy, eager_value.xy)


def test_bad_namedtuple_arguments_are_the_eager_error():
    def bad(a: torch.Tensor) -> torch.Tensor:
        collections.namedtuple("bad", ["x", "x"])  # duplicate field: ValueError
        return a + 1

    compiled = sapwood_tracer.compile(bad, backend=CountingBackend())
    try:
        compiled(torch.ones(1))
    except ValueError as exc:
        assert "duplicate" in str(exc).lower()
    else:  # pragma: no cover
        raise AssertionError("no ValueError")


def _subscripted(a: torch.Tensor) -> tuple:
    group = collections.namedtuple("Group", "key group")
    alias = group[int, list[int]]
    made = alias(1, [2])
    return a + 1, alias.__origin__ is group, type(made) is group, made, group, alias


def test_a_value_made_from_the_class_is_never_handed_on_with_the_traced_class():
    # the CPython suite's test_non_generic_subscript: the alias holds the class itself, so it
    # cannot be handed on while the class is made again (the call runs as eagerly instead)
    compiled = sapwood_tracer.compile(_subscripted, backend=CountingBackend())
    got = compiled(torch.ones(1))
    assert got[1] is True and got[2] is True
    assert got[5].__origin__ is got[4] and type(got[3]) is got[4]
