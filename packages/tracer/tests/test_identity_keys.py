"""Dicts, defaultdicts and sets passed in whose keys are not constants: tensors (an
optimizer's state keyed by parameter), functions, classes and objects hashed by identity.

Each such key is an input of its own, read by position from the keys, with its value read by
position from the values; the trace's lookups use the key's identity, so a lookup through
another source (the parameter from the model, the function from its module) finds it.
Before, each of these inputs made the whole frame run eagerly ("a dict input whose keys
are not constants", "a set input of non-constant members")."""

from __future__ import annotations

import collections
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import sapwood_tracer

from .conftest import CountingBackend


def _helper_a() -> None:
    pass


def _helper_b() -> None:
    pass


class _Token:
    """Hashed by identity (object's __hash__ and __eq__)."""


def _compiled(fn: Any) -> tuple[Any, CountingBackend]:
    backend = CountingBackend()
    return sapwood_tracer.compile(fn, backend=backend, fullgraph=True), backend


def test_optimizer_state_keyed_by_parameters_is_one_graph_and_updates_in_place():
    params = [torch.nn.Parameter(torch.randn(3)) for _ in range(3)]

    def step(params: list, state: dict) -> torch.Tensor:
        for p in params:
            entry = state[p]
            entry["m"].mul_(0.9).add_(p.detach())
        return sum(state[p]["m"].sum() for p in params)

    compiled, backend = _compiled(step)
    ours = {p: {"m": torch.zeros(3)} for p in params}
    eager = {p: {"m": torch.zeros(3)} for p in params}
    for _ in range(3):
        torch.testing.assert_close(compiled(params, ours), step(params, eager))
    assert all(torch.equal(ours[p]["m"], eager[p]["m"]) for p in params)
    assert backend.count == 1
    # the parameters in another order: the keys no longer line up with the list
    torch.testing.assert_close(compiled(params[::-1], ours), step(params[::-1], eager))
    assert all(torch.equal(ours[p]["m"], eager[p]["m"]) for p in params)
    assert backend.count == 2


def test_a_state_keyed_by_other_tensors_is_looked_up_by_identity_not_by_value():
    a, b = torch.ones(2), torch.ones(2)  # equal values, two keys

    def pick(x: torch.Tensor, table: dict, key: torch.Tensor) -> torch.Tensor:
        return x * table[key] + (1.0 if key in table else 0.0)

    compiled, backend = _compiled(pick)
    table = {a: 2.0, b: 3.0}
    x = torch.ones(2)
    assert torch.equal(compiled(x, table, a), pick(x, table, a))
    assert torch.equal(compiled(x, table, b), pick(x, table, b))
    stranger = torch.ones(2)  # equal to both keys, and neither: a KeyError, as eagerly
    lenient = sapwood_tracer.compile(pick, backend=CountingBackend())
    with pytest.raises(KeyError):
        lenient(x, table, stranger)
    assert backend.count == 2


@pytest.mark.parametrize("factory", [dict, lambda: dict()], ids=["dict", "lambda"])
def test_defaultdict_with_a_parameter_key_made_eagerly_first(factory: Any) -> None:
    # the torch test suite's pattern: the dict already holds a parameter key when compiled
    table: collections.defaultdict = collections.defaultdict(factory)
    param = torch.nn.Parameter(torch.ones(2, 2))

    def fn(x: torch.Tensor) -> tuple:
        table["a"] = x + 1
        table[param] = 123
        table["c"] = x * 2
        return table["b"], table

    x = torch.randn(3)
    want = fn(x)
    compiled, backend = _compiled(fn)
    got = compiled(x)
    assert got[0] == want[0] and list(got[1]) == list(want[1])
    assert torch.equal(got[1]["a"], x + 1) and got[1][param] == 123
    assert backend.count == 1


def test_objects_and_local_classes_as_keys():
    k1, k2 = _Token(), _Token()

    class Local:
        pass

    def fn(x: torch.Tensor, table: dict, key: Any) -> torch.Tensor:
        return x * table[key] + table.get(Local, 0)

    compiled, _ = _compiled(fn)
    table = {k1: 2.0, k2: 3.0, Local: 1.0}
    x = torch.ones(1)
    for key in (k1, k2, k1):
        assert torch.equal(compiled(x, table, key), fn(x, table, key))
    del table[Local]
    assert torch.equal(compiled(x, table, k2), fn(x, table, k2))


def test_set_of_functions_recompiles_when_its_members_change():
    members = {torch._C._set_grad_enabled, _helper_a, _helper_b}

    def fn(x: torch.Tensor, s: set) -> torch.Tensor:
        if _helper_b in s:
            return x.sin()
        return x.cos()

    compiled, backend = _compiled(fn)
    x = torch.randn(4)
    assert torch.equal(compiled(x, members), x.sin())
    compiled(x, members)
    assert backend.count == 1
    members.remove(_helper_b)
    assert torch.equal(compiled(x, members), x.cos())
    assert backend.count == 2
    members.add(_helper_b)
    members.add(torch._C._set_fwd_grad_enabled)
    assert torch.equal(compiled(x, members), x.sin())


def test_iterating_a_set_of_functions_follows_its_order():
    def fn(x: torch.Tensor, s: set) -> torch.Tensor:
        for i, member in enumerate(s):
            x = x + (i + 1) * (2 if member is _helper_a else 3)
        return x

    compiled, _ = _compiled(fn)
    x = torch.zeros(1)
    for members in ({_helper_a, _helper_b, "z"}, {_helper_b, 1, _helper_a}):
        assert torch.equal(compiled(x, members), fn(x, members))


_POOL_SIZE = 4


@settings(max_examples=40, deadline=None)
@given(
    layout=st.lists(st.sampled_from(["tensor", "str", "function", "object"]), max_size=6),
    probes=st.lists(st.integers(0, 2 * _POOL_SIZE - 1), min_size=1, max_size=5),
    reorder=st.booleans(),
)
def test_lookups_in_dicts_of_mixed_keys_match_eager(
    layout: list[str], probes: list[int], reorder: bool
) -> None:
    tensors = [torch.full((2,), float(i)) for i in range(_POOL_SIZE)]
    objects = [_Token() for _ in range(_POOL_SIZE)]
    functions = [_helper_a, _helper_b, len, abs]
    kinds = {
        "tensor": tensors,
        "str": [f"k{i}" for i in range(_POOL_SIZE)],
        "function": functions,
        "object": objects,
    }
    candidates = [k for pool in kinds.values() for k in pool]
    table: dict[Any, float] = {}
    for n, kind in enumerate(layout):
        table[kinds[kind][n % _POOL_SIZE]] = float(n + 1)

    def fn(x: torch.Tensor, table: dict, keys: list) -> torch.Tensor:
        for key in keys:
            x = x + table.get(key, -1.0)
        return x * len(table)

    keys = [candidates[i % len(candidates)] for i in probes]
    compiled, _ = _compiled(fn)
    x = torch.zeros(2)
    assert torch.equal(compiled(x, table, keys), fn(x, table, keys))
    if reorder:  # the same keys in another order, other values: guarded, not stale
        table = dict(reversed([(k, v * 2) for k, v in table.items()]))
    assert torch.equal(compiled(x, table, keys), fn(x, table, keys))
