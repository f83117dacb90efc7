"""``collections.defaultdict`` made in the trace or passed in: missing keys made by the factory,
the rest as a dict, the result rebuilt with its factory and an input's changes written back.
Before, a defaultdict input made the whole frame run eagerly ("an input of type defaultdict")
and making one was a graph break."""

from __future__ import annotations

import collections
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import sapwood_tracer

from .conftest import CountingBackend

_FACTORIES = {"list": list, "int": int, "none": None, "lambda": lambda: 7}
_KEYS = ["a", "b", "c"]
_OPS = ["getitem", "get", "in", "setdefault", "pop", "len", "append_or_add", "copy", "keys"]


def _run(d: collections.defaultdict, ops: list[tuple[str, str]], x: torch.Tensor) -> Any:
    seen: list[Any] = []
    for op, key in ops:
        try:
            if op == "getitem":
                seen.append(d[key])
            elif op == "get":
                seen.append(d.get(key))
            elif op == "in":
                seen.append(key in d)
            elif op == "setdefault":
                seen.append(d.setdefault(key, 5))
            elif op == "pop":
                seen.append(d.pop(key, None))
            elif op == "len":
                seen.append(len(d))
            elif op == "append_or_add":
                if isinstance(d.get(key), list):
                    d[key].append(x.sum())
                else:
                    d[key] = x * 2
            elif op == "copy":
                c = d.copy()
                seen.append((type(c).__name__, c.default_factory is d.default_factory, dict(c)))
            elif op == "keys":
                seen.append(list(d))
        except KeyError as exc:
            seen.append(("KeyError", exc.args))
    return seen, d.default_factory


def _same(a: Any, b: Any) -> None:
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b)
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert type(a) is type(b) and list(a) == list(b), (a, b)
        for k in a:
            _same(a[k], b[k])
    else:
        assert a == b, (a, b)


_operations = st.lists(st.tuples(st.sampled_from(_OPS), st.sampled_from(_KEYS)), max_size=8)


@settings(max_examples=60, deadline=None)
@given(factory=st.sampled_from(sorted(_FACTORIES)), ops=_operations)
def test_a_defaultdict_made_in_the_trace_behaves_as_eagerly(factory, ops) -> None:
    def f(x: torch.Tensor) -> Any:
        d = collections.defaultdict(_FACTORIES[factory], {"a": [x]})
        seen, made_by = _run(d, ops, x)
        return seen, made_by, d

    x = torch.randn(2)
    expected = f(x)
    sapwood_tracer.reset()
    got = sapwood_tracer.compile(f, backend=CountingBackend(), fullgraph=True)(x)
    _same(got, expected)
    assert type(got[2]) is collections.defaultdict
    assert got[2].default_factory is expected[2].default_factory


@settings(max_examples=60, deadline=None)
@given(factory=st.sampled_from(sorted(_FACTORIES)), ops=_operations)
def test_a_defaultdict_passed_in_is_written_back_as_eagerly(factory, ops) -> None:
    def f(d: collections.defaultdict, x: torch.Tensor) -> Any:
        return _run(d, ops, x)

    x = torch.randn(2)
    mine = collections.defaultdict(_FACTORIES[factory], {"a": [x], "b": 3})
    theirs = collections.defaultdict(_FACTORIES[factory], {"a": [x], "b": 3})
    expected = f(theirs, x)
    sapwood_tracer.reset()
    backend = CountingBackend()
    got = sapwood_tracer.compile(f, backend=backend, fullgraph=True)(mine, x)
    _same(got, expected)
    _same(dict(mine), dict(theirs))
    assert mine.default_factory is theirs.default_factory


def test_a_factory_that_is_not_callable_raises_pythons_type_error() -> None:
    def f(x: torch.Tensor) -> Any:
        try:
            collections.defaultdict(3)
        except TypeError as exc:
            return x + 1, str(exc)
        return x, ""

    got = sapwood_tracer.compile(f, backend=CountingBackend(), fullgraph=True)(torch.zeros(1))
    assert got[1] == "first argument must be callable or None"


def test_a_user_factory_is_inlined_into_the_graph() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        d = collections.defaultdict(lambda: x.new_zeros(2))
        d["a"] += x
        d["b"] += x * 3
        return d["a"] + d["b"] + d["c"]

    backend = CountingBackend()
    x = torch.randn(2)
    torch.testing.assert_close(sapwood_tracer.compile(f, backend=backend, fullgraph=True)(x), f(x))
    assert backend.count == 1


def test_what_the_model_does_not_follow_is_refused() -> None:
    d = collections.defaultdict(list)

    def assigns(d: collections.defaultdict, x: torch.Tensor) -> torch.Tensor:
        d.default_factory = int
        return x

    with pytest.raises(sapwood_tracer.Unsupported, match="default_factory"):
        sapwood_tracer.compile(assigns, backend=CountingBackend(), fullgraph=True)(
            d, torch.zeros(1)
        )


@pytest.mark.parametrize(
    "other",
    [{"a": [1]}, {"a": [2]}, {"a": [1], "b": []}, collections.defaultdict(int, {"a": [1]})],
    ids=["equal-dict", "other-value", "more-keys", "equal-defaultdict"],
)
def test_a_defaultdict_compares_with_dicts_by_its_items(other: dict) -> None:
    def f(x: torch.Tensor) -> Any:
        d = collections.defaultdict(list, {"a": [1]})
        return x + 1, d == other, other == d, d != other

    expected = f(torch.zeros(1))
    got = sapwood_tracer.compile(f, backend=CountingBackend(), fullgraph=True)(torch.zeros(1))
    assert got[1:] == expected[1:]
