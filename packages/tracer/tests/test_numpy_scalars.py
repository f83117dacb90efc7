"""numpy scalars are constants: as inputs, module attributes, closure cells, and the results
of numpy's scalar functions on numbers (``np.sqrt(d)``, ``np.float32(0.5)``).

Before, any numpy scalar reached by the trace made the whole frame run eagerly ("an input of
type float64"), where torch.compile captures one graph. A numpy scalar passed to a torch
operation stays a numpy scalar in the graph: torch promotes numpy scalars unlike the equal
Python numbers (``int32 tensor * np.bool_(True)`` is float32), so converting would be wrong.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import sapwood_tracer

from .conftest import CountingBackend


def _compiled(fn, **kwargs):
    sapwood_tracer.reset()
    backend = CountingBackend()
    return sapwood_tracer.compile(fn, backend=backend, **kwargs), backend


def _same(actual, expected) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor)
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected, equal_nan=True, rtol=0, atol=0)
    else:
        assert type(actual) is type(expected) and repr(actual) == repr(expected)


class Attention(torch.nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim
        self.scale = np.sqrt(dim)  # a numpy float64

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = x @ x.transpose(-1, -2) / self.scale
        bias = np.float32(0.5) * np.log2(np.float32(self.dim))
        return scores.softmax(-1) * bias + np.int64(2)


def test_a_module_with_numpy_attributes_is_one_graph() -> None:
    model = Attention(8)
    x = torch.randn(2, 5, 8)
    compiled, backend = _compiled(model, fullgraph=True)
    _same(compiled(x), model(x))
    assert backend.count == 1


def test_a_numpy_scalar_input_is_guarded_on_its_type_and_exact_value() -> None:
    def f(x, n):
        return x * n

    compiled, backend = _compiled(f, fullgraph=True)
    x = torch.ones(3, dtype=torch.int32)
    values = [np.float32(2.0), np.float32(2.0), np.float64(2.0), np.float32(-0.0), np.int64(2)]
    values += [np.bool_(True), np.float32("nan"), np.float32("nan")]
    for n in values:
        _same(compiled(x, n), f(x, n))
    # one graph per distinct (type, bits); a repeated value (a nan too) reuses its entry
    assert backend.count == 6


def test_the_reflected_operator_keeps_numpys_order() -> None:
    def f(x):
        return np.float64(2.0) * x + np.int32(1) - x, np.float32(3.0) > x

    compiled, _ = _compiled(f, fullgraph=True)
    x = torch.arange(4, dtype=torch.float16)
    for actual, expected in zip(compiled(x), f(x)):
        _same(actual, expected)


def test_where_numpy_would_warn_the_operation_runs_eagerly_and_warns() -> None:
    def f(x, n):
        return x + int(n + np.int8(1))

    compiled, _ = _compiled(f)
    x = torch.zeros(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(x, np.int8(127))
    _same(out, x + int(np.int8(-128)))
    assert any("overflow" in str(w.message) for w in caught)
    sapwood_tracer.reset()
    with pytest.raises(sapwood_tracer.Unsupported, match="numpy warns"):
        sapwood_tracer.compile(f, backend=CountingBackend(), fullgraph=True)(x, np.int8(127))


def test_a_ufunc_on_a_tensor_is_a_graph_break_with_its_reason() -> None:
    def f(x):
        y = x * 2
        return np.sqrt(y) + 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (numpy's, about torch's wrap)
        report = sapwood_tracer.explain(f)(torch.ones(2))
    assert report.graph_count == 2  # before the call, and after it
    assert any(
        "numpy.sqrt() compiled through torch._numpy: numpy gives a Tensor" in b.reason
        for b in report.breaks
    ), report


_SCALAR_TYPES = [np.int8, np.int32, np.int64, np.uint8, np.float16, np.float32, np.float64]
_TENSOR_DTYPES = [torch.int32, torch.int64, torch.float16, torch.float32, torch.bfloat16]
_OPS = [operator.add, operator.mul, operator.sub, operator.truediv, operator.lt]


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(_SCALAR_TYPES),
    value=st.integers(-3, 3),
    other=st.sampled_from(_SCALAR_TYPES),
    dtype=st.sampled_from(_TENSOR_DTYPES),
    op=st.sampled_from(_OPS),
    reflected=st.booleans(),
)
def test_numpy_scalars_with_tensors_match_eager(kind, value, other, dtype, op, reflected) -> None:
    """A numpy scalar computed from another (folded at trace time) meets a tensor: the same
    values and dtypes as eager, or the same exception type."""
    k = kind(value) if value >= 0 or not issubclass(kind, np.unsignedinteger) else kind(0)

    def f(x, k):
        scalar = other(k) * other(2)
        return op(scalar, x) if reflected else op(x, scalar)

    x = torch.arange(1, 4).to(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = f(x, k)
        except Exception as exc:  # (the compiled call must raise the same)
            with pytest.raises(type(exc)):
                _compiled(f)[0](x, k)
            return
        actual = _compiled(f)[0](x, k)
    _same(actual, expected)
