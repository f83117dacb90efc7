"""Modules whose hooks or wrappers run eagerly around a compiled forward (the way FSDP2 blocks
and DDP's wrapped model compile): the hooks run as ``nn.Module.__call__`` runs them, the
forward is compiled, and the module is left as it was found."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import sapwood_tracer
from sapwood_tracer.api.distributed import call_with_forward, is_ddp


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.fc(x)) * 2


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.inner(x + 1))


def _breaking_hook(seen):
    def hook(module, args):
        sapwood_tracer.graph_break()  # the trace cannot inline it: the call breaks
        seen.append(args[0].shape)
        return (args[0] * 3,)

    return hook


def test_a_module_whose_hooks_break_has_its_forward_compiled_and_hooks_run(backend):
    torch.manual_seed(0)
    model = Outer()
    seen = []
    model.inner.register_forward_pre_hook(_breaking_hook(seen))
    x = torch.randn(2, 4)
    expected = model(x)
    seen.clear()
    report = sapwood_tracer.explain(model)(x)
    assert "Inner.forward" in [g.function for g in report.graphs]
    assert len(seen) == 1
    compiled = sapwood_tracer.compile(model, backend=backend)
    torch.testing.assert_close(compiled(x), expected)
    torch.testing.assert_close(compiled(x), expected)
    assert len(seen) == 3
    assert "forward" not in model.inner.__dict__  # left as it was found


def test_gradients_flow_through_a_hooked_module_compiled_at_a_break(backend):
    torch.manual_seed(0)
    model = Outer()
    model.inner.register_forward_pre_hook(_breaking_hook([]))
    x = torch.randn(2, 4)
    model(x).sum().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    sapwood_tracer.compile(model, backend=backend)(x).sum().backward()
    for p, g in zip(model.parameters(), expected, strict=True):
        torch.testing.assert_close(p.grad, g)


def test_a_forward_set_on_the_instance_is_the_one_that_runs(backend):
    torch.manual_seed(0)
    model = Outer()
    model.inner.register_forward_pre_hook(_breaking_hook([]))
    model.inner.forward = lambda x: x - 5  # the instance's own forward, not the class's
    x = torch.randn(2, 4)
    expected = model(x)
    torch.testing.assert_close(sapwood_tracer.compile(model, backend=backend)(x), expected)
    assert model.inner.forward(torch.zeros(1)).item() == -5


def test_call_with_forward_puts_back_what_it_found():
    module = Inner()
    own = module.forward  # a bound method, stored on the instance below
    module.forward = own
    result = call_with_forward(module, lambda x: x + 7, (torch.zeros(1),), {})
    assert result.item() == 7
    assert module.__dict__["forward"] is own
    plain = Inner()
    call_with_forward(plain, lambda x: x, (torch.zeros(1),), {})
    assert "forward" not in plain.__dict__


def test_call_with_forward_puts_back_after_an_exception():
    module = Inner()

    def failing(x):
        raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        call_with_forward(module, failing, (torch.zeros(1),), {})
    assert "forward" not in module.__dict__


def test_plain_modules_are_not_ddp():
    assert not is_ddp(Inner())


def test_backward_hooks_of_a_module_called_at_a_break_run(backend):
    # a module with backward hooks is not inlined: its call is a break, and the hooks run
    torch.manual_seed(0)
    model = Outer()
    seen = []
    model.inner.register_full_backward_hook(lambda mod, gin, gout: seen.append(gout[0].shape))
    x = torch.randn(2, 4, requires_grad=True)
    model(x).sum().backward()
    assert len(seen) == 1
    sapwood_tracer.compile(model, backend=backend)(x).sum().backward()
    assert len(seen) == 2


class _Delegating(nn.Module):
    """A wrapper whose ``__getattr__`` falls back to the module it wraps (PEFT-style)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.register_buffer("offset", torch.ones(4))

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "alias":
                return self.offset * 2
            return getattr(self.inner, name)

    def forward(self, x):
        return self.inner(x) + self.fc.weight.sum() + self.offset + self.alias


def _counting():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return backend, graphs


def test_a_module_with_its_own_getattr_is_one_graph_and_follows_its_hook():
    model, x = _Delegating(Inner()), torch.randn(2, 4)
    backend, graphs = _counting()
    compiled = sapwood_tracer.compile(model, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x), model(x))
    assert len(graphs) == 1
    model.alias = torch.zeros(4)  # now an instance attribute: Python no longer asks the hook
    torch.testing.assert_close(compiled(x), model(x))
    assert len(graphs) == 2


def test_a_getattr_hook_that_raises_is_the_attribute_error_of_eager():
    class Strict(nn.Module):
        def __getattr__(self, name):
            return super().__getattr__(name)

        def forward(self, x):
            return x + (1 if hasattr(self, "missing") else 0)

    model, x = Strict(), torch.randn(3)
    backend, graphs = _counting()
    torch.testing.assert_close(
        sapwood_tracer.compile(model, backend=backend, fullgraph=True)(x), model(x)
    )
    assert len(graphs) == 1
