"""Python's and torch's own semantics, where the tracer once answered differently.

Each case was a silent wrong result or an internal error reaching the user (issue #15); each
now matches eager, compiled in default mode, and stays in one graph where it can.
"""

from __future__ import annotations

import pytest
import torch

import sapwood_tracer


def _compiled(fn, backend):
    return sapwood_tracer.compile(fn, backend=backend)


# ------------------------------------------------------------- attribute lookup on modules
class _MethodShadowsSubmodule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(3, 3)

    def proj(self, x):
        return x * 100

    def forward(self, x):
        return self.proj(x)


class _ClassDefaultShadowsSubmodule(torch.nn.Module):
    act = None

    def __init__(self) -> None:
        super().__init__()
        self.act = torch.nn.ReLU()  # lands in _modules; the class attribute still wins

    def forward(self, x):
        return x if self.act is None else self.act(x)


class _BufferShadowedByClassConstant(torch.nn.Module):
    scale = 3.0

    def __init__(self) -> None:
        super().__init__()
        self._buffers["scale"] = torch.full((3,), 7.0)  # a buffer the class attribute hides

    def forward(self, x):
        return x * self.scale


@pytest.mark.parametrize(
    "module",
    [_MethodShadowsSubmodule(), _ClassDefaultShadowsSubmodule(), _BufferShadowedByClassConstant()],
    ids=lambda m: type(m).__name__,
)
def test_module_attributes_are_looked_up_in_pythons_order(module, check):
    x = torch.randn(2, 3)
    check(lambda t: module(t), (x,))


# ------------------------------------------------------------- legacy constructors
_NEW_ARGUMENTS = [
    ((), {}),
    ((5,), {}),
    ((5, 8), {}),
    ((torch.Size([5, 8]),), {}),
    ((torch.Size([]),), {}),
    (([5, 8],), {}),
    (((5, 8),), {}),
    (([[1, 2], [3, 4]],), {}),
    (([1.5, -2.0],), {"device": "cpu"}),
    ((3,), {"device": torch.device("cpu")}),
]


def _signature(t: torch.Tensor) -> tuple:
    return type(t), t.shape, t.dtype, t.device, t.requires_grad


@pytest.mark.parametrize(("args", "kwargs"), _NEW_ARGUMENTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float64])
def test_tensor_new_reads_its_arguments_as_torch_does(args, kwargs, dtype, backend):
    def fn(x):
        return x.new(*args, **kwargs)

    x = torch.ones(2, dtype=dtype)
    expected, got = fn(x), _compiled(fn, backend)(x)
    assert _signature(got) == _signature(expected)
    if args and not all(isinstance(a, int) for a in args) and not isinstance(args[0], torch.Size):
        torch.testing.assert_close(got, expected)  # data, not an uninitialised tensor
    assert backend.count == 1


@pytest.mark.parametrize(("args", "kwargs"), _NEW_ARGUMENTS)
@pytest.mark.parametrize(
    "cls", [torch.Tensor, torch.FloatTensor, torch.DoubleTensor, torch.LongTensor, torch.BoolTensor]
)
def test_legacy_tensor_classes_construct_as_torch_does(args, kwargs, cls, backend):
    def fn(x):
        return cls(*args, **kwargs), x + 1

    x = torch.ones(2)
    (expected, _), (got, _) = fn(x), _compiled(fn, backend)(x)
    assert _signature(got) == _signature(expected)
    if args and not all(isinstance(a, int) for a in args) and not isinstance(args[0], torch.Size):
        torch.testing.assert_close(got, expected)


def test_torch_tensor_of_a_list_keeps_the_default_dtype(backend):
    # torch.Tensor([1, 2]) is float32 (the default dtype); torch.tensor([1, 2]) is int64
    def fn(x):
        return torch.Tensor([1, 2]) + x

    x = torch.zeros(2)
    got = _compiled(fn, backend)(x)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, fn(x))


@pytest.mark.parametrize("kind", [torch.HalfTensor, torch.LongTensor, torch.FloatTensor])
def test_tensor_type_of_a_legacy_class_converts_as_its_name_does(kind, backend):
    def fn(a, b):
        m = a.type(kind)
        return m, b.type(m.type())

    a, b = torch.ones(2), torch.arange(2.0)
    got, expected = _compiled(fn, backend)(a, b), fn(a, b)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)


def test_tensor_new_of_a_tensor_runs_eagerly(backend):
    def fn(x, y):
        return x.new(y) * 2

    x, y = torch.ones(2), torch.arange(3.0)
    torch.testing.assert_close(_compiled(fn, backend)(x, y), fn(x, y))


# ------------------------------------------------------------- isinstance
@pytest.mark.parametrize(
    "classinfo",
    [
        torch.FloatTensor,
        torch.DoubleTensor,
        torch.LongTensor,
        torch.cuda.FloatTensor,
        (torch.DoubleTensor, torch.FloatTensor),
        torch.Tensor,
        torch.nn.Parameter,
        int | torch.Tensor,
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_isinstance_with_tensor_types_as_eager(classinfo, dtype, backend):
    def fn(x):
        return isinstance(x, classinfo), x + 1

    x = torch.zeros(2, dtype=dtype)
    assert _compiled(fn, backend)(x)[0] is fn(x)[0]
    assert backend.count == 1


def test_isinstance_with_a_metaclass_that_decides_breaks_instead_of_guessing(backend):
    class Meta(type):
        def __instancecheck__(cls, instance):
            return True  # everything is an instance

    class Anything(metaclass=Meta):
        pass

    def fn(x):
        return x * 2 if isinstance(x, Anything) else x

    x = torch.ones(2)
    torch.testing.assert_close(_compiled(fn, backend)(x), x * 2)


# ------------------------------------------------------------- internal errors, once
def test_a_slice_argument_is_guarded_without_hashing_it(check):
    def fn(x, s):
        return x[s] * 2

    x = torch.arange(6.0)
    check(fn, (x, slice(1, 3)), (x, slice(None, None, 2)))


def test_constructing_a_parameter_inside_the_function_runs_it_eagerly(backend):
    def fn(x):
        p = torch.nn.Parameter(x * 2)
        return p.sum(), type(p)

    x = torch.ones(3)
    got, expected = _compiled(fn, backend)(x), fn(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] is torch.nn.Parameter
