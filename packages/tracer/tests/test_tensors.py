"""Tensors as proxies: operators, torch functions, F.*, methods, indexing, attributes."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn.functional as F

import sapwood_tracer
from sapwood_tracer import Unsupported

X = torch.randn(4, 5)
Y = torch.randn(4, 5)
X2 = torch.randn(4, 5)
Y2 = torch.randn(4, 5)


def test_binary_operators_on_tensors(check):
    def fn(x, y):
        return x + y, x - y, x * y, x / (y.abs() + 1), x @ y.T, x**2, x // 0.5, x % 1.5

    check(fn, (X, Y), (X2, Y2), graphs=1)


def test_reflected_operators_with_python_numbers(check):
    def fn(x):
        return 1 + x, 2 - x, 3 * x, 1 / (x.abs() + 1), 2**x, -x, +x, abs(x)

    check(fn, (X,))


def test_comparison_and_bitwise_operators(check):
    def fn(x, y):
        m = (x > y) & (x < 1) | ~(y >= 0)
        return m, x == y, x != y, m ^ (x <= y)

    check(fn, (X, Y))


def test_inplace_operators_on_intermediates(check):
    def fn(x):
        y = x.clone()
        y += 1
        y *= 2
        y.add_(3)
        y[0] = 0.0
        return y

    check(fn, (X,))


def test_inplace_operator_on_input_mutates_it():
    backend_graphs = []
    fn = sapwood_tracer.compile(
        lambda x: x.add_(1), backend=lambda gm, ex: (backend_graphs.append(gm), gm.forward)[1]
    )
    x = torch.zeros(3)
    out = fn(x)
    assert out is x or torch.equal(out, x)
    assert torch.equal(x, torch.ones(3))


def test_torch_functions(check):
    def fn(x, y):
        z = torch.cat([x, y], dim=0)
        s = torch.stack((x, y))
        return (
            torch.where(x > 0, x, y),
            z.sum(0),
            s.mean(),
            torch.matmul(x, y.t()),
            torch.softmax(x, -1),
        )

    check(fn, (X, Y))


def test_factory_functions(check):
    def fn(x):
        return x + torch.ones(4, 5), torch.zeros_like(x), torch.arange(5) * 2, torch.full((2,), 3.0)

    check(fn, (X,))


def test_functional_api(check):
    def fn(x):
        return (
            F.relu(x),
            F.gelu(x),
            F.softmax(x, dim=-1),
            F.layer_norm(x, (5,)),
            F.dropout(x, 0.5, training=False),
        )

    check(fn, (X,))


def test_tensor_methods(check):
    def fn(x):
        return (
            x.view(5, 4),
            x.reshape(-1),
            x.transpose(0, 1).contiguous(),
            x.sum(dim=1, keepdim=True),
            x.float().to(torch.float64),
            x.unsqueeze(0).squeeze(0),
        )

    check(fn, (X,))


def test_methods_returning_several_tensors(check):
    def fn(x):
        a, b = x.chunk(2, dim=1)
        parts = torch.split(x, 2)
        values, indices = x.max(dim=1)
        top = x.topk(2)
        return a, b, parts, values, indices, top.values, top.indices

    check(fn, (X,))


def test_indexing_and_slicing(check):
    idx = torch.tensor([0, 2])

    def fn(x, i):
        return x[0], x[1:3], x[:, 1], x[..., -1], x[None], x[:, None, 1:4:2], x[i], x[x > 0]

    check(fn, (X, idx))


def test_setitem_with_slices_and_masks(check):
    def fn(x):
        y = x.clone()
        y[:, 0] = 1.0
        y[y < 0] = 0.0
        return y

    check(fn, (X,))


def test_static_metadata_is_python_values(check):
    def fn(x):
        n, m = x.shape
        return (
            x.size(),
            x.size(1),
            x.dim(),
            x.numel(),
            x.ndim,
            n * m,
            len(x),
            x.dtype,
            x.device,
            x.is_cuda,
            x.requires_grad,
        )

    check(fn, (X,))


def test_shape_arithmetic_feeds_ops(check):
    def fn(x):
        b = x.shape[0]
        return x.reshape(b, -1, 1).expand(b, x.size(1), 3)

    check(fn, (X,))


def test_transpose_attributes(check):
    def fn(x):
        return x.T, x.mT, x.unsqueeze(0).mT

    check(fn, (X,))


def test_dtype_and_device_arguments(check):
    def fn(x):
        return x.to(x.dtype), torch.zeros(2, dtype=x.dtype, device=x.device), x.new_ones(3)

    check(fn, (X,))


def test_conversions_that_change_nothing_are_the_tensor_itself(backend):
    # torch returns the receiver itself when there is nothing to convert; the trace does
    # the same and records no node for it, so the call costs no dispatch
    def fn(x, y):
        a = x.to(x.dtype)
        b = x.float().contiguous().cpu()
        c = y.contiguous()  # y is a transposed view: a real copy
        d = x.to(torch.float64)  # a real conversion
        return a, b, c, d, a is x, c is y

    y = torch.randn(5, 4).t()
    compiled = sapwood_tracer.compile(fn, backend=backend)
    for _ in range(2):
        out = compiled(X, y)
        assert out[0] is X and out[1] is X
        assert out[4] is True and out[5] is False
        assert out[2] is not y and out[2].is_contiguous() and torch.equal(out[2], y)
        assert out[3].dtype is torch.float64 and torch.equal(out[3], X.double())
    (gm,) = backend.graphs
    targets = sorted(str(n.target) for n in gm.graph.nodes if n.op == "call_method")
    assert targets == ["contiguous", "to"]
    # another dtype is another trace, where the conversion is a node again
    half = X.half()
    out = compiled(half, y)
    assert out[0] is half and out[1] is not half and out[1].dtype is torch.float32


def test_branching_on_a_tensor_is_refused():
    def fn(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(Unsupported, match="data-dependent"):
        sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)(X)


def test_item_is_refused_with_location():
    def fn(x):
        return x.sum().item()

    with pytest.raises(Unsupported, match=r"item.*test_tensors\.py:\d+"):
        sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)(X)


def test_operator_module_functions(check):
    def fn(x, y):
        return operator.add(x, y), operator.mul(x, 2), operator.neg(x), operator.getitem(x, 0)

    check(fn, (X, Y))


def test_tensor_iteration_unbinds_first_dim(check):
    def fn(x):
        rows = [r * i for i, r in enumerate(x)]
        a, _b, _c, d = x
        return rows, a + d

    check(fn, (X,))


def test_requires_grad_inputs_keep_autograd(check):
    x = torch.randn(3, requires_grad=True)

    def fn(x):
        return (x * 2).sum()

    out = check(fn, (x,))
    out.backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))
