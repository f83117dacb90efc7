"""``compile()`` takes what ``torch.compile`` takes: any callable. A function, a bound method
or an ``nn.Module`` compiles as before; a ``functools.partial`` compiles its function; a
callable object compiles its class's ``__call__``; a builtin, a class or any other callable
compiles a call of it, so what that call runs of the user's code (a ``__bool__``, an
``__init__``, a callback) is traced like any other code."""

from __future__ import annotations

import functools
import operator
from typing import Any

import pytest
import torch

import sapwood_tracer

X = torch.arange(4.0)


def _scaled(x, a, b, *, c=1):
    return x * a - b * c


def test_a_partial_compiles_its_function(backend):
    part = functools.partial(_scaled, a=2, c=3)
    compiled = sapwood_tracer.compile(part, backend=backend, fullgraph=True)
    assert torch.equal(compiled(X, b=1), part(X, b=1))
    assert torch.equal(compiled(X, b=1, c=-2), part(X, b=1, c=-2))
    assert backend.count == 2  # (c is a constant of the trace: a new value, a new graph)
    nested = functools.partial(functools.partial(_scaled, X), 5)
    assert torch.equal(sapwood_tracer.compile(nested, backend=backend)(1), nested(1))


def test_a_partial_of_a_builtin(backend):
    part = functools.partial(operator.mul, 3)
    assert torch.equal(sapwood_tracer.compile(part, backend=backend)(X), part(X))


def test_a_builtin_traces_what_it_calls(backend):
    seen = []

    class Flag:
        def __bool__(self):
            seen.append(torch.compiler.is_compiling())
            return False

        def __len__(self):
            return 3

    assert sapwood_tracer.compile(bool, backend=backend, fullgraph=True)(Flag()) is False
    assert sapwood_tracer.compile(len, backend=backend, fullgraph=True)(Flag()) == 3
    assert seen == [True]  # (__bool__ ran in the trace, not eagerly)
    torch_sin = sapwood_tracer.compile(torch.sin, backend=backend, fullgraph=True)
    assert torch.equal(torch_sin(X), torch.sin(X))
    assert backend.count == 3


def test_builtins_compile_apart(backend):
    # each compiled callable has a code of its own: many of them never reach a recompile limit
    for fn in (abs, torch.neg, torch.cos, torch.exp, torch.tanh, torch.relu, torch.sigmoid):
        for shape in ((2,), (3,)):
            x = torch.randn(shape)
            torch.testing.assert_close(sapwood_tracer.compile(fn, backend=backend)(x), fn(x))
    assert backend.count == 14  # (two shapes each: none ran eagerly past a limit)


def test_getattr_and_a_class(backend):
    compiled = sapwood_tracer.compile(getattr, backend=backend)
    assert compiled(5, "__add__") == (5).__add__

    class Pair:
        def __init__(self, a, b):
            self.total = a + b

    made = sapwood_tracer.compile(Pair, backend=backend)(X, 1)
    assert isinstance(made, Pair) and torch.equal(made.total, X + 1)


def test_a_callable_object_compiles_its_call(backend):
    class Scale:
        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return x * self.k

    scale = Scale(3)
    compiled = sapwood_tracer.compile(scale, backend=backend, fullgraph=True)
    assert torch.equal(compiled(X), X * 3)
    scale.k = 4  # (an attribute the trace read: guarded)
    assert torch.equal(compiled(X), X * 4)
    assert backend.count == 2


def test_a_method_of_a_builtin_object(backend):
    items: list[Any] = []
    compiled = sapwood_tracer.compile(items.append, backend=backend)
    compiled(X)
    assert items == [X]


def test_what_is_not_callable_is_refused(backend):
    with pytest.raises(TypeError, match="not callable"):
        sapwood_tracer.compile(42, backend=backend)
