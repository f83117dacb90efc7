"""A compiled module follows every change made to its module between calls.

Two copies of one model: the reference runs eagerly, the other through ``compile``. A random
sequence of changes is applied to both (the same change, the same values), and after each the
two are called twice and compared: outputs, ``requires_grad``, the gradients of every
parameter after a backward, and every buffer (BatchNorm's running statistics). The changes
are those a user makes to a live model: parameters and buffers swapped, re-strided, edited in
place, replaced, removed and tied; submodules replaced, added and removed; hooks through the
API, straight into the hook dicts and globally; plain attributes; train/eval; requires_grad;
a forward assigned to the instance or to the class, and a new ``__class__``; the dtype.

All the guard shortcuts are on (they are the default): the dict version tags, defaults by
identity, the reads gated by them. The unit tests of each are in ``test_guard_gates`` and
``test_guard_fast_path``; this test is the one that would see a change they miss.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from torch import nn

import sapwood_tracer
from sapwood_tracer.errors import EagerFallbackWarning


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = nn.ReLU()
        self.gain = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.lin(x)) * self.gain


class OtherBlock(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) - self.gain


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 4, bias=False)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.norm = nn.BatchNorm1d(4)
        self.head = nn.Linear(4, 4, bias=False)
        self.register_buffer("shift", torch.zeros(4))
        self.extra: nn.Module | None = None
        self.alpha = 0.5
        self.use_norm = True
        self.mode = "sum"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x.to(self.embed.weight.dtype))
        for block in self.blocks:
            h = h + block(h)
        if self.use_norm:
            h = self.norm(h)
        if self.extra is not None:
            h = self.extra(h)
        h = self.head(h) * self.alpha + self.shift
        return h.sum(-1) if self.mode == "sum" else h.mean(-1)


def doubled_forward(self: Block, x: torch.Tensor) -> torch.Tensor:
    return self.lin(x) * 2


def top_forward(self: Net, x: torch.Tensor) -> torch.Tensor:
    return self.head(self.embed(x.to(self.embed.weight.dtype))).sum(-1) * 3


def class_forward(self: Block, x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(self.lin(x)) + self.gain


X = torch.randn(3, 4)


def _values(k: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(k))


def _seeded(k: int, make: Callable[[], nn.Module]) -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(k)
        return make()


class Session:
    """The per-model state a change needs later (hook handles to remove)."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.dict_hooks: list[tuple[nn.Module, int]] = []


def _block(net: Net, k: int) -> nn.Module:
    return net.blocks[k % len(net.blocks)]


def _scale_hook(k: int) -> Callable[..., Any]:
    def hook(module: nn.Module, args: Any, output: Any) -> Any:
        return output * (k + 2)

    return hook


def _shift_pre_hook(k: int) -> Callable[..., Any]:
    def hook(module: nn.Module, args: Any) -> Any:
        return (args[0] + k,)

    return hook


# Changes made to each model: ``change(net, session, k)``.
def _weight_data(net: Net, s: Session, k: int) -> None:
    w = _block(net, k).lin.weight
    w.data = _values(k, 4, 4).to(w.dtype)


def _new_strides(net: Net, s: Session, k: int) -> None:
    w = net.embed.weight
    w.data = w.data.t().contiguous().t() if k % 2 else w.data.contiguous()


def _in_place(net: Net, s: Session, k: int) -> None:
    with torch.no_grad():
        net.head.weight.mul_(0.5 + k)


def _new_parameter(net: Net, s: Session, k: int) -> None:
    lin = _block(net, k).lin
    lin.bias = nn.Parameter(_values(k, 4).to(lin.weight.dtype))


def _no_bias(net: Net, s: Session, k: int) -> None:
    _block(net, k).lin.bias = None


def _new_activation(net: Net, s: Session, k: int) -> None:
    _block(net, k).act = (nn.ReLU, nn.Tanh, nn.GELU, nn.Identity)[k % 4]()


def _append_block(net: Net, s: Session, k: int) -> None:
    if len(net.blocks) < 4:
        net.blocks.append(_seeded(k, Block).to(net.embed.weight.dtype))


def _pop_block(net: Net, s: Session, k: int) -> None:
    if len(net.blocks) > 1:
        del net.blocks[-1]


def _extra(net: Net, s: Session, k: int) -> None:
    net.extra = None if k % 2 else _seeded(k, lambda: nn.Linear(4, 4)).to(net.embed.weight.dtype)


def _api_hook(net: Net, s: Session, k: int) -> None:
    target = (net, _block(net, k), net.head, net.norm)[k % 4]
    s.handles.append(target.register_forward_hook(_scale_hook(k)))


def _api_pre_hook(net: Net, s: Session, k: int) -> None:
    target = (net, _block(net, k), net.head, net.embed)[k % 4]
    s.handles.append(target.register_forward_pre_hook(_shift_pre_hook(k)))


def _remove_hook(net: Net, s: Session, k: int) -> None:
    if s.handles:
        s.handles.pop(k % len(s.handles)).remove()


def _dict_hook(net: Net, s: Session, k: int) -> None:
    target = (net.head, _block(net, k).lin)[k % 2]
    key = 10_000 + len(s.dict_hooks)
    target._forward_hooks[key] = _scale_hook(k)
    s.dict_hooks.append((target, key))


def _remove_dict_hook(net: Net, s: Session, k: int) -> None:
    if s.dict_hooks:
        target, key = s.dict_hooks.pop()
        target._forward_hooks.pop(key, None)


def _buffer_in_place(net: Net, s: Session, k: int) -> None:
    net.shift.fill_(float(k))


def _buffer_replaced(net: Net, s: Session, k: int) -> None:
    net.shift = _values(k, 4).to(net.embed.weight.dtype)


def _alpha(net: Net, s: Session, k: int) -> None:
    net.alpha = (0.5, 2.0, -1.0, 3)[k % 4]


def _gain(net: Net, s: Session, k: int) -> None:
    _block(net, k).gain = (1.0, 0.0, 2, -0.5)[k % 4]


def _use_norm(net: Net, s: Session, k: int) -> None:
    net.use_norm = bool(k % 2)


def _mode(net: Net, s: Session, k: int) -> None:
    net.mode = ("sum", "mean")[k % 2]


def _train(net: Net, s: Session, k: int) -> None:
    net.train(bool(k % 2))


def _norm_training(net: Net, s: Session, k: int) -> None:
    net.norm.training = bool(k % 2)


def _tie(net: Net, s: Session, k: int) -> None:
    net.head.weight = net.embed.weight


def _untie(net: Net, s: Session, k: int) -> None:
    net.head.weight = nn.Parameter(net.head.weight.detach().clone())


def _requires_grad(net: Net, s: Session, k: int) -> None:
    (net.embed.weight, _block(net, k).lin.weight)[k % 2].requires_grad_(bool(k // 2 % 2))


def _instance_forward(net: Net, s: Session, k: int) -> None:
    if k % 2:
        block = _block(net, k)
        block.forward = doubled_forward.__get__(block)
    else:
        net.forward = top_forward.__get__(net)


def _no_instance_forward(net: Net, s: Session, k: int) -> None:
    for module in (net, *net.blocks):
        module.__dict__.pop("forward", None)


def _swap_class(net: Net, s: Session, k: int) -> None:
    _block(net, k).__class__ = (Block, OtherBlock)[k % 2]


def _dtype(net: Net, s: Session, k: int) -> None:
    net.to((torch.float32, torch.float64)[k % 2])


CHANGES: dict[str, Callable[[Net, Session, int], None]] = {
    f.__name__.lstrip("_"): f
    for f in (
        _weight_data,
        _new_strides,
        _in_place,
        _new_parameter,
        _no_bias,
        _new_activation,
        _append_block,
        _pop_block,
        _extra,
        _api_hook,
        _api_pre_hook,
        _remove_hook,
        _dict_hook,
        _remove_dict_hook,
        _buffer_in_place,
        _buffer_replaced,
        _alpha,
        _gain,
        _use_norm,
        _mode,
        _train,
        _norm_training,
        _tie,
        _untie,
        _requires_grad,
        _instance_forward,
        _no_instance_forward,
        _swap_class,
        _dtype,
    )
}
# Changes made once for both models: the class they share, torch's global hook table.
SHARED = ("class_forward", "class_forward_restored", "global_hook", "global_hook_removed")


def _run(module: Callable[..., Any], net: Net) -> tuple[torch.Tensor, dict[str, Any]]:
    out = module(X)
    if out.requires_grad:
        out.sum().backward()
    grads = {name: p.grad for name, p in net.named_parameters()}
    for p in net.parameters():
        p.grad = None
    return out, grads


def _compare(compiled: Callable[..., Any], mine: Net, reference: Net) -> None:
    for _ in range(2):
        got, got_grads = _run(compiled, mine)
        expected, expected_grads = _run(reference, reference)
        assert got.requires_grad == expected.requires_grad
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got.detach(), expected.detach())
        assert got_grads.keys() == expected_grads.keys()
        for name, grad in expected_grads.items():
            if grad is None:
                assert got_grads[name] is None, name
            else:
                torch.testing.assert_close(got_grads[name], grad, msg=name)
        for (name, a), (_, b) in zip(mine.named_buffers(), reference.named_buffers(), strict=True):
            torch.testing.assert_close(a, b, msg=name)


def _graph_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _aot_backend() -> Any:
    """AOT autograd with no code generation: functionalized graphs, input mutations and
    the joint forward/backward split, as Inductor gets them."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    def boxed(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=boxed, bw_compiler=boxed)


_CHANGE_LISTS = st.lists(
    st.tuples(st.sampled_from(sorted(CHANGES) + list(SHARED)), st.integers(0, 7)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_CHANGE_LISTS)
def test_random_changes_to_a_live_model_always_match_eager(changes) -> None:
    _check_changes(changes, _graph_backend)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_CHANGE_LISTS)
def test_random_changes_match_eager_through_aot_autograd(changes) -> None:
    _check_changes(changes, _aot_backend())


#: what a model declared frozen (``guards="inputs"``) may still undergo: values written in
#: place, and changes outside the model (its class, torch's global hooks)
_FROZEN_ALLOWED = ("in_place", "buffer_in_place", *SHARED)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(_FROZEN_ALLOWED), st.integers(0, 7)), min_size=1, max_size=8)
)
def test_random_changes_a_frozen_model_allows_match_eager(changes) -> None:
    _check_changes(changes, _graph_backend, guards="inputs")


def _check_changes(changes: list[tuple[str, int]], backend: Any, guards: str = "all") -> None:
    sapwood_tracer.reset()
    reference = _seeded(0, Net)
    mine = copy.deepcopy(reference)
    compiled = sapwood_tracer.compile(mine, backend=backend, guards=guards)
    sessions = {id(mine): Session(), id(reference): Session()}
    global_handles: list[Any] = []
    original_forward = Block.__dict__["forward"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EagerFallbackWarning)  # a recompile limit met
            _compare(compiled, mine, reference)
            for name, k in changes:
                if name == "class_forward":
                    Block.forward = class_forward  # type: ignore[method-assign]
                elif name == "class_forward_restored":
                    Block.forward = original_forward  # type: ignore[method-assign]
                elif name == "global_hook":
                    register = nn.modules.module.register_module_forward_hook
                    global_handles.append(register(_scale_hook(k % 2)))
                elif name == "global_hook_removed":
                    if global_handles:
                        global_handles.pop().remove()
                else:
                    for net in (mine, reference):
                        CHANGES[name](net, sessions[id(net)], k)
                _compare(compiled, mine, reference)
    finally:
        Block.forward = original_forward  # type: ignore[method-assign]
        for handle in global_handles:
            handle.remove()


@pytest.mark.parametrize(
    "change",
    ["instance", "class", "new class", "deleted"],
)
def test_the_forward_a_module_has_at_the_call_is_the_one_compiled(change) -> None:
    calls = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        calls.append(gm)
        return gm.forward

    class Local(nn.Linear):
        pass

    class Swapped(nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 9

    model = Local(3, 3)
    compiled = sapwood_tracer.compile(model, backend=backend)
    x = torch.randn(2, 3)
    torch.testing.assert_close(compiled(x), model(x))
    if change == "instance":
        model.forward = (lambda self, x: x * 100).__get__(model)
    elif change == "class":
        Local.forward = lambda self, x: x - 7  # type: ignore[method-assign]
    elif change == "new class":
        model.__class__ = Swapped
    else:
        model.forward = (lambda self, x: x * 100).__get__(model)
        compiled(x)
        del model.forward
    for _ in range(2):
        torch.testing.assert_close(compiled(x), model(x))
    assert len(calls) == (1 if change == "deleted" else 2) + (change == "deleted")
