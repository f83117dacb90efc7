"""Traceable wrapper tensor subclasses as inputs and parameters (issue 35, first part):
``TwoTensor`` and a weight-only int8 quantized weight written here, each compared with
eager and with torch.compile's graph count. Before, any subclass input made the whole frame
run eagerly ("sapwood cannot capture a tensor subclass input")."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils._pytree import tree_map_only
from zoo import CountingBackend

import sapwood
import sapwood_tracer


def _two(shape: tuple[int, ...] = (4,), **kw: Any) -> TwoTensor:
    return TwoTensor(torch.randn(shape, **kw), torch.randn(shape, **kw))


def _f(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).sin() + 1


def _assert_two_close(got: TwoTensor, want: TwoTensor) -> None:
    assert type(got) is type(want)
    torch.testing.assert_close(got.a, want.a)
    torch.testing.assert_close(got.b, want.b)


def _torch_graphs(fn: Any, *args: Any) -> int:
    torch._dynamo.reset()
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()
    torch.compile(fn, backend=counter, fullgraph=True)(*args)
    return counter.frame_count


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_twotensor_input_is_one_graph_and_its_result_is_a_twotensor(backend: str) -> None:
    x = _two()
    counting = CountingBackend()
    compiled = sapwood.compile(_f, backend=counting if backend == "eager" else backend)
    _assert_two_close(compiled(x), _f(x))
    _assert_two_close(compiled(x), _f(x))
    if backend == "eager":
        assert counting.count == 1 == _torch_graphs(_f, x)


def test_the_inner_tensors_are_guarded() -> None:
    counting = CountingBackend()
    compiled = sapwood.compile(_f, backend=counting, fullgraph=True)
    compiled(_two())
    # inner tensors that are one object: another trace (a write through one is the other's)
    shared = torch.randn(4)
    _assert_two_close(compiled(TwoTensor(shared, shared)), _f(TwoTensor(shared, shared)))
    assert counting.count == 2
    # inner tensors of another layout (strided views): another trace
    a, b = torch.randn(4, 2).t()[0], torch.randn(4, 2).t()[0]
    _assert_two_close(compiled(TwoTensor(a, b)), _f(TwoTensor(a, b)))
    assert counting.count == 3
    compiled(_two())  # the first layout again: its trace
    assert counting.count == 3


def test_backward_through_a_twotensor_matches_eager() -> None:
    x = _two(requires_grad=True)
    y = TwoTensor(x.a.detach().clone().requires_grad_(), x.b.detach().clone().requires_grad_())
    sapwood.compile(_f, backend="aot_eager", fullgraph=True)(x).sum().backward()
    _f(y).sum().backward()
    assert isinstance(x.grad, TwoTensor)
    _assert_two_close(x.grad, y.grad)


def test_a_module_with_a_subclass_parameter() -> None:
    linear = torch.nn.Linear(4, 3)
    linear.weight = torch.nn.Parameter(_two((3, 4)))
    inp = torch.randn(2, 4)
    counting = CountingBackend()
    got = sapwood.compile(linear, backend=counting, fullgraph=True)(inp)
    _assert_two_close(got, linear(inp))
    assert counting.count == 1 == _torch_graphs(linear, inp)


def _writes(x: torch.Tensor) -> torch.Tensor:
    x.add_(1)
    return x * 2


def _reads_inner(x: torch.Tensor) -> torch.Tensor:
    return x.a + 1


@pytest.mark.parametrize(
    ("fn", "reason"),
    [(_writes, "writing in place to a tensor subclass"), (_reads_inner, "TwoTensor.a")],
    ids=["in_place", "inner_attribute"],
)
def test_what_is_not_modelled_is_a_break_and_runs_as_eager(fn: Any, reason: str) -> None:
    strict = sapwood.compile(fn, backend=CountingBackend(), fullgraph=True)
    with pytest.raises(sapwood_tracer.Unsupported, match=reason):
        strict(_two())
    x = _two()
    y = TwoTensor(x.a.clone(), x.b.clone())
    got = sapwood.compile(fn, backend=CountingBackend())(x)
    want = fn(y)
    if isinstance(want, TwoTensor):
        _assert_two_close(got, want)
    else:
        torch.testing.assert_close(got, want)
    _assert_two_close(x, y)


# -- a weight-only int8 quantized weight, written as a wrapper subclass --------------------
class Int8Weight(torch.Tensor):
    """``int_data * scale[:, None]`` (per output channel), for ``F.linear``."""

    @staticmethod
    def __new__(cls, int_data: torch.Tensor, scale: torch.Tensor, transposed: bool = False):  # type: ignore[no-untyped-def]
        shape = int_data.shape[::-1] if transposed else int_data.shape
        return torch.Tensor._make_wrapper_subclass(
            cls, shape, dtype=scale.dtype, device=int_data.device
        )

    def __init__(self, int_data: torch.Tensor, scale: torch.Tensor, transposed: bool = False):
        self.int_data, self.scale, self.transposed = int_data, scale, transposed

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __repr__(self) -> str:  # (torch's would print the values, which fakes do not have)
        return f"Int8Weight(shape={tuple(self.shape)}, transposed={self.transposed})"

    def __tensor_flatten__(self):  # type: ignore[no-untyped-def]
        return ["int_data", "scale"], self.transposed

    @staticmethod
    def __tensor_unflatten__(inner, transposed, outer_size, outer_stride):  # type: ignore[no-untyped-def]
        return Int8Weight(inner["int_data"], inner["scale"], transposed)

    def dequantized(self) -> torch.Tensor:
        w = self.int_data.to(self.scale.dtype) * self.scale[:, None]
        return w.t() if self.transposed else w

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func is torch.ops.aten.t.default:
            (w,) = args
            return Int8Weight(w.int_data, w.scale, not w.transposed)
        if func is torch.ops.aten.detach.default:
            (w,) = args
            return Int8Weight(w.int_data, w.scale, w.transposed)
        args, kwargs = tree_map_only(Int8Weight, Int8Weight.dequantized, (args, kwargs))
        return func(*args, **kwargs)

    @classmethod
    def quantize(cls, w: torch.Tensor) -> Int8Weight:
        scale = w.abs().amax(dim=1) / 127
        return cls(torch.round(w / scale[:, None]).to(torch.int8), scale)


def test_a_weight_only_int8_linear_matches_eager_in_one_graph() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    for layer in (model[0], model[2]):
        layer.weight = torch.nn.Parameter(Int8Weight.quantize(layer.weight.detach()), False)
    inp = torch.randn(3, 8)
    with torch.no_grad():
        want = model(inp)
        for backend in ("eager", "aot_eager"):
            counting = CountingBackend()
            compiled = sapwood.compile(
                model, backend=counting if backend == "eager" else backend, fullgraph=True
            )
            torch.testing.assert_close(compiled(inp), want)
            if backend == "eager":
                assert counting.count == 1 == _torch_graphs(model, inp)


# -- DTensor on a one-process gloo group --------------------------------------------------
@pytest.fixture
def one_process_group(tmp_path: Any) -> Any:
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        from torch.distributed.tensor import init_device_mesh

        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_dtensor_inputs_compile_to_one_graph_with_their_placements(
    one_process_group: Any, backend: str
) -> None:
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    x = distribute_tensor(torch.randn(4, 8), one_process_group, [Shard(0)])
    w = distribute_tensor(torch.randn(8, 8), one_process_group, [Replicate()])

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w).sum(dim=1)

    counting = CountingBackend()
    got = sapwood.compile(fn, backend=counting if backend == "eager" else backend, fullgraph=True)(
        x, w
    )
    want = fn(x, w)
    assert type(got) is type(want) and got.placements == want.placements
    torch.testing.assert_close(got.full_tensor(), want.full_tensor())
    if backend == "eager":
        assert counting.count == 1 == _torch_graphs(fn, x, w)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_tensor_parallel_mlp_is_one_graph_forward_and_backward(
    one_process_group: Any, backend: str
) -> None:
    """``parallelize_module`` with a colwise then a rowwise Linear: the module hooks call
    ``DTensor.from_local``, ``redistribute`` and ``to_local``, each one node of the graph."""
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = torch.nn.Linear(8, 16)
            self.down = torch.nn.Linear(16, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.down(torch.relu(self.up(x)))

    model = MLP()
    parallelize_module(
        model, one_process_group, {"up": ColwiseParallel(), "down": RowwiseParallel()}
    )

    def run(fn: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        model.zero_grad()
        x = torch.arange(32.0).reshape(4, 8).div(10).requires_grad_()
        out = fn(x)
        out.square().sum().backward()
        assert x.grad is not None and model.up.weight.grad is not None
        return out, x.grad, model.up.weight.grad.full_tensor()

    counting = CountingBackend()
    compiled = sapwood.compile(model, backend=counting if backend == "eager" else backend)
    for got, want in zip(run(compiled), run(model)):
        assert type(got) is type(want)
        torch.testing.assert_close(got, want)
    if backend == "eager":
        assert counting.count == 1 == _torch_graphs(model, torch.randn(4, 8))


def test_a_subclass_parameter_is_an_nn_parameter_as_eagerly() -> None:
    # nn.Parameter(subclass) keeps the subclass and flags it ``_is_param``: isinstance asks it
    param = torch.nn.Parameter(_two((2,)))

    def fn(p: torch.Tensor) -> tuple[bool, bool]:
        return isinstance(p, torch.nn.Parameter), isinstance(p * 2, torch.nn.Parameter)

    assert sapwood.compile(fn, backend=CountingBackend(), fullgraph=True)(param) == fn(param)
    assert fn(param) == (True, False)


def test_an_in_place_result_is_of_its_targets_type() -> None:
    def fn(p: torch.Tensor) -> tuple[Any, ...]:
        with torch.no_grad():
            same = p.mul_(2)
        return isinstance(same, torch.nn.Parameter), type(same) is type(p), same is p

    param = torch.nn.Parameter(torch.randn(3))
    got = sapwood.compile(fn, backend=CountingBackend(), fullgraph=True)(param)
    assert got == fn(torch.nn.Parameter(torch.randn(3))) == (True, True, True)


class _TaggedParam(torch.nn.Parameter):
    """A plain Parameter subclass (Parameter's disabled __torch_function__) with methods."""

    def scaled(self, k: float) -> torch.Tensor:
        return self * k

    @property
    def doubled(self) -> torch.Tensor:
        return self * 2


def test_a_plain_parameter_subclass_is_a_graph_input_with_its_methods_inlined() -> None:
    linear = torch.nn.Linear(4, 4)
    linear.weight = _TaggedParam(torch.randn(4, 4))

    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[Any, ...]:
        y = w.scaled(3) + w.doubled
        return y @ x, type(y), isinstance(w, torch.nn.Parameter), type(w)

    x = torch.randn(4)
    counting = CountingBackend()
    got = sapwood.compile(fn, backend=counting, fullgraph=True)(x, linear.weight)
    want = fn(x, linear.weight)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:] == (torch.Tensor, True, _TaggedParam)  # results are plain
    assert counting.count == 1
    torch.testing.assert_close(sapwood.compile(linear, backend="aot_eager")(x), linear(x))
