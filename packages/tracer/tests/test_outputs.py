"""Returned structures are rebuilt exactly; identity and aliasing with inputs are kept."""

from __future__ import annotations

import collections
import dataclasses

import torch

import sapwood_tracer

X = torch.randn(3, 4)

_Out = collections.namedtuple("_Out", ["logits", "extra"])


@dataclasses.dataclass
class _Result:
    loss: torch.Tensor
    aux: dict


def test_nested_structures_mixing_tensors_and_constants(check):
    def fn(x):
        return {
            "a": [x, (x + 1, 3)],
            "b": _Out(x * 2, {"k": None, "s": "txt"}),
            "c": _Result(x.sum(), {"n": 1}),
        }

    check(fn, (X,))


def test_returning_an_input_returns_the_same_object(backend):
    def fn(x, y):
        return x, y + 1, [x]

    compiled = sapwood_tracer.compile(fn, backend=backend)
    y = torch.randn(3)
    a, _, (c,) = compiled(X, y)
    assert a is X and c is X


def test_a_value_returned_twice_is_one_object(backend):
    def fn(x):
        y = x + 1
        shared = [y]
        return y, y, shared, shared

    compiled = sapwood_tracer.compile(fn, backend=backend)
    a, b, s1, s2 = compiled(X)
    assert a is b and s1 is s2


def test_returning_an_input_module_and_object(backend):
    class Holder:
        pass

    holder = Holder()
    net = torch.nn.Linear(4, 4)

    def fn(m, h, x):
        return m, h, m(x)

    compiled = sapwood_tracer.compile(fn, backend=backend)
    m, h, _ = compiled(net, holder, X)
    assert m is net and h is holder


def test_returning_none_and_constants_only(check):
    def fn(x):
        return None

    check(fn, (X,))


def test_inplace_update_of_an_input_is_visible(backend):
    def fn(x):
        x.mul_(2)
        return x

    x = torch.ones(3)
    out = sapwood_tracer.compile(fn, backend=backend)(x)
    assert out is x
    assert torch.equal(x, torch.full((3,), 2.0))
