"""Builtin containers' methods and special methods, compiled whole (``fullgraph=True``) and
compared with eager; constructs that differ from Python stay graph breaks."""

from __future__ import annotations

import collections
from typing import Any

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import Unsupported


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _same_as_eager(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` compiled whole gives what eager gives (result or exception)."""
    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    try:
        expected = fn(*args)
    except Exception as exc:
        with pytest.raises(type(exc)) as info:
            compiled(*args)
        assert str(info.value) == str(exc)
        return info.value
    got = compiled(*args)
    assert _equal(got, expected)
    return got


def _equal(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _breaks(fn: Any, *args: Any) -> None:
    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    with pytest.raises(Unsupported):
        compiled(*args)


# ----------------------------------------------------------------- special methods
def test_list_special_methods_called_on_the_list():
    def fn(x):
        xs = [1, 2, 3]
        xs.__setitem__(0, 10)
        xs.__delitem__(1)
        ys = xs.__add__([4])
        ys.__iadd__((5, 6))
        return (
            x + 1,
            xs.__getitem__(0),
            xs.__contains__(3),
            xs.__len__(),
            list(xs.__iter__()),
            list(xs.__reversed__()),
            ys,
            xs.__mul__(2),
            xs.__rmul__(2),
            xs.__eq__([10, 3]),
            xs.__lt__([11]),
        )

    _same_as_eager(fn, torch.ones(2))


def test_unbound_special_methods_of_builtin_types():
    def fn(x):
        d = {"a": 1}
        dict.__setitem__(d, "b", 2)
        return (
            x * 2,
            list.__getitem__([1, 2], 1),
            dict.__contains__(d, "b"),
            dict.__getitem__(d, "a"),
            tuple.__len__((1, 2, 3)),
            tuple.__getitem__((1, 2, 3), slice(1, None)),
            d,
        )

    _same_as_eager(fn, torch.ones(2))


def test_a_special_method_on_a_foreign_operand_returns_not_implemented_or_breaks():
    def same_type(x):
        return x + 1, {}.__lt__({}), [1].__eq__([1]), (1,).__ne__((2,))

    _same_as_eager(same_type, torch.ones(1))

    def foreign(x):
        return x + 1, [1].__eq__((1,))

    _breaks(foreign, torch.ones(1))


def test_a_special_method_called_with_wrong_arguments_raises_pythons_type_error():
    def fn(x):
        out = []
        for call in (lambda: {}.__contains__(), lambda: [].__getitem__(), lambda: [].__len__(1)):
            try:
                call()
            except TypeError as exc:
                out.append(str(exc))
        return x + 1, out

    _same_as_eager(fn, torch.ones(1))


def test_special_methods_exist_for_hasattr_and_getattr():
    def fn(x):
        return (
            x + 1,
            hasattr([], "__len__"),
            hasattr({}, "__contains__"),
            hasattr((), "__getitem__"),
            hasattr([], "__missing_attribute__"),
        )

    _same_as_eager(fn, torch.ones(1))


def test_an_unmodelled_special_attribute_breaks_instead_of_missing():
    def fn(x):
        return x + 1, [].__sizeof__()

    _breaks(fn, torch.ones(1))


def test_an_unbound_method_on_the_wrong_type_breaks():
    def fn(x):
        return x + 1, list.count((1, 2, 1), 1)

    _breaks(fn, torch.ones(1))


def test_list_init_refills_the_list():
    def fn(x):
        xs = [1, 2, 3]
        xs.__init__()
        ys = [1]
        ys.__init__((4, 5))
        return x + 1, xs, ys

    _same_as_eager(fn, torch.ones(1))


def test_a_bound_special_method_passed_out_is_the_real_one():
    def fn(x):
        d = {"a": 1}
        return x + 1, d.__contains__, d

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    _, contains, d = compiled(torch.ones(1))
    d["b"] = 2
    assert contains("b") and not contains("c")


def test_ordered_dict_special_methods_that_differ_from_dicts_break():
    def fn(x):
        od = collections.OrderedDict(a=1)
        return x + 1, od.__eq__(collections.OrderedDict(a=1))

    _breaks(fn, torch.ones(1))
