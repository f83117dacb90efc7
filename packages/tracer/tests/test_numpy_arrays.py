"""numpy arrays of tensors in compiled code: ``t.numpy()``, numpy's functions, methods and
operators on them (through torch._numpy, checked against numpy), ``torch.from_numpy`` back.

Every case compares the compiled result with the eager one, type for type: a numpy scalar
stays a scalar, an array keeps its dtype. Where torch._numpy and numpy differ, or numpy would
write into an array, the call is a graph break and the result is still numpy's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import sapwood_tracer


def _same(eager: Any, compiled: Any) -> None:
    assert type(compiled) is type(eager), (type(eager), type(compiled))
    if isinstance(eager, (tuple, list)):
        assert len(eager) == len(compiled)
        for e, c in zip(eager, compiled):
            _same(e, c)
    elif isinstance(eager, (np.ndarray, np.generic)):
        assert compiled.dtype == eager.dtype
        assert np.shape(compiled) == np.shape(eager)
        np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6)
    elif isinstance(eager, torch.Tensor):
        torch.testing.assert_close(compiled, eager)
    else:
        assert compiled == eager


def _check(fn: Any, *args: Any, graphs: int = 1, breaks: int = 0) -> sapwood_tracer.ExplainOutput:
    sapwood_tracer.reset()
    report = sapwood_tracer.explain(fn)(*args)
    assert (report.graph_count, report.break_count) == (graphs, breaks), str(report)
    sapwood_tracer.reset()
    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    for _ in range(2):
        _same(fn(*args), compiled(*args))
    return report


X = torch.arange(12.0).reshape(3, 4) - 5.5


def test_functions_methods_and_operators_compile_to_one_graph() -> None:
    def fn(x):
        a = x.numpy()
        m = np.mean(a, 1)
        return (
            np.sum(m),  # a numpy scalar, as numpy gives it
            np.asarray(np.sum(m)),  # a 0-d array
            a.max(axis=0),
            a.T,
            a + a * 2,
            -a,
            a > 0,
            a[0, 0],
            a[1],
            a.reshape([1, a.size]),
            np.linalg.norm(a, axis=0),
            np.fft.fftshift(a),
            np.meshgrid(a[0], a[1]),
        )

    _check(fn, X)


def test_metadata_is_constant_and_from_numpy_comes_back_as_a_tensor() -> None:
    def fn(x):
        a = x.numpy()
        b = torch.from_numpy(a.T) * 2
        return a.shape, a.ndim, a.size, a.itemsize, a.nbytes, a.strides, a.dtype, b

    _check(fn, X)


def test_an_array_of_an_input_shares_its_memory_as_in_eager() -> None:
    def fn(x):
        return x.numpy(), torch.from_numpy(x.numpy())

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    x = X.clone()
    array, tensor = compiled(x)
    x[0, 0] = 100.0
    assert array[0, 0] == 100.0 and tensor[0, 0] == 100.0
    assert tensor is not x


def test_a_dtype_torch_numpy_gets_wrong_is_a_break_with_numpys_answer() -> None:
    def fn(x):
        a = x.numpy().astype(np.int64)
        return a / 2  # float64 in numpy, float32 in torch._numpy

    report = _check(fn, X, graphs=1, breaks=1)
    assert "numpy gives float64, torch._numpy float32" in str(report)


def test_writing_into_an_array_is_never_compiled() -> None:
    def fn(x):
        a = x.numpy()
        np.add(a, 1, out=a)
        return x * 2

    x = X.clone()
    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    expected = fn(X.clone())
    torch.testing.assert_close(compiled(x), expected)
    torch.testing.assert_close(x, X + 1)

    def inplace(x):
        a = x.numpy()
        a += 1
        return a

    report = sapwood_tracer.explain(inplace)(X.clone())
    assert report.break_count == 1 and "raising ValueError" in str(report), str(report)


def test_arrays_of_tensors_numpy_cannot_take_are_breaks() -> None:
    def needs_grad(x):
        return x.numpy()

    w = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="requires grad"):  # torch's own error, eagerly
        sapwood_tracer.compile(needs_grad, backend=lambda gm, ex: gm.forward)(w)

    def forced(x):
        return x.numpy(force=True) * 2

    _check(forced, w)


_UNARY = [np.sin, np.exp, np.abs, np.sqrt, np.square, np.negative, np.floor, np.sign]
_REDUCE = ["sum", "mean", "max", "min", "prod", "all", "any", "argmax", "std"]
_DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bool]


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=0, max_size=3),
    dtype=st.sampled_from(_DTYPES),
    unary=st.sampled_from(_UNARY),
    reduce=st.sampled_from(_REDUCE),
    axis=st.one_of(st.none(), st.integers(0, 2)),
    other=st.sampled_from([2, 0.5, True, -3]),
    op=st.sampled_from(["add", "mul", "sub", "truediv", "floordiv", "lt", "eq"]),
)
def test_compiled_numpy_agrees_with_numpy(shape, dtype, unary, reduce, axis, other, op) -> None:
    """Any mix of a ufunc, a reduction and an operator with a Python number: the compiled
    result equals numpy's, type and dtype included, whether compiled or broken at a call
    where torch._numpy and numpy disagree."""
    import operator

    x = (torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape) * 0.7 - 1).to(dtype)
    if axis is not None and axis >= len(shape):
        axis = None
    binop = getattr(operator, op)

    def fn(t):
        a = t.numpy()
        b = unary(a)
        c = getattr(b, reduce)(axis=axis)
        return binop(c, other), binop(a, other)

    try:
        with np.errstate(all="ignore"):
            expected = fn(x)
    except Exception as exc:  # numpy refuses this mix: so does the compiled code
        compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
        with pytest.raises(type(exc)):
            compiled(x)
        return
    sapwood_tracer.reset()
    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    with np.errstate(all="ignore"):
        _same(expected, compiled(x))
