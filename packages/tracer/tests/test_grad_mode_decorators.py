"""Grad-mode contexts used as decorators inside the compiled function (``@torch.no_grad()``,
``@torch.enable_grad``, ``torch.no_grad(fn)``): one graph, results and grad modes as eager."""

from __future__ import annotations

import pytest
import torch

import sapwood_tracer


def _same(out, ref):
    for o, r in zip(out, ref):
        if isinstance(r, torch.Tensor):
            torch.testing.assert_close(o, r)
            assert o.requires_grad == r.requires_grad
        else:
            assert o == r


def decorated_nested(x):
    @torch.no_grad()
    def augment(y):
        return (y + 1) * 2

    return augment(x), x * 3, torch.is_grad_enabled()


def class_as_decorator(x):
    @torch.enable_grad
    def grads(y):
        return y * 3, torch.is_grad_enabled()

    with torch.no_grad():
        inside, mode = grads(x)
    return inside, mode, torch.is_grad_enabled()


def called_form(x):
    doubled = torch.no_grad()(lambda y: y * 2)
    return doubled(x) + x, torch.is_grad_enabled()


def exception_leaves_the_mode(x):
    @torch.no_grad()
    def fails(y):
        raise ValueError("no")

    try:
        fails(x)
    except ValueError:
        caught = True
    return x * 2, caught, torch.is_grad_enabled()


@pytest.mark.parametrize(
    "fn", [decorated_nested, class_as_decorator, called_form, exception_leaves_the_mode]
)
def test_one_graph_with_eagers_results_and_modes(backend, fn):
    x = torch.randn(4, requires_grad=True)
    out = sapwood_tracer.compile(fn, backend=backend, fullgraph=True)(x)
    _same(out, fn(x))
    assert backend.count == 1


def escapes(x):
    @torch.no_grad()
    def h(y):
        return y + 1

    return h, h(x)


def breaks_inside(x):
    @torch.no_grad()
    def h(y):
        torch._dynamo.graph_break()
        return y * 2

    return h(x) + 1, torch.is_grad_enabled()


@pytest.mark.parametrize("fn", [escapes, breaks_inside])
def test_what_cannot_be_rebuilt_runs_eagerly_with_a_reason(backend, fn):
    x = torch.randn(4, requires_grad=True)
    out = sapwood_tracer.compile(fn, backend=backend)(x)
    ref = fn(x)
    if fn is escapes:
        assert out[0](x).requires_grad is False
        _same(out[1:], ref[1:])
    else:
        _same(out, ref)
    report = sapwood_tracer.explain(fn)(x)
    assert (
        report.eager_functions and "decorated with torch.no_grad()" in report.eager_functions[0][1]
    )


def test_a_generator_function_is_refused(backend):
    def fn(x):
        @torch.no_grad()
        def gen(y):
            yield y * 2

        return next(gen(x))

    with pytest.raises(sapwood_tracer.Unsupported, match="generator"):
        sapwood_tracer.compile(fn, backend=backend, fullgraph=True)(torch.randn(2))
