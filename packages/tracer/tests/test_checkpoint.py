"""``torch.utils.checkpoint.checkpoint(fn, ..., use_reentrant=False)`` is captured in the
caller's graph, as the body of torch's ``tag_activation_checkpoint``, where torch.compile
captures it; a body whose second run (the recompute in the backward) could differ from the
first is a graph break with its reason, and the checkpoint runs eagerly.

Before, every checkpoint ran uncompiled ("a callee that breaks"), and with ``fullgraph=True``
the call raised ``Unsupported``.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
import torch
import torch.utils.checkpoint as cp
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import sapwood_tracer

from .conftest import CountingBackend


class Block(nn.Module):
    def __init__(self, dim: int = 8, p: float = 0.0) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)
        self.drop = nn.Dropout(p)

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return x + self.drop(self.down(nn.functional.gelu(self.up(self.norm(x))))) * scale


class Stack(nn.Module):
    def __init__(self, layers: int = 3, p: float = 0.0, **options: Any) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(p=p) for _ in range(layers)])
        self.options = {"use_reentrant": False, **options}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = cp.checkpoint(block, x, **self.options)
        return x.square().mean()


def _loss_and_grads(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = model(x)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def _same_training(model: nn.Module, compiled: Any, x: torch.Tensor) -> None:
    reference = copy.deepcopy(model)
    expected, expected_grads = _loss_and_grads(reference, x)
    model.zero_grad(set_to_none=True)
    loss = compiled(x)
    loss.backward()
    torch.testing.assert_close(loss.detach(), expected)
    for p, g in zip(model.parameters(), expected_grads):
        torch.testing.assert_close(p.grad, g)


def test_a_stack_of_checkpointed_blocks_is_one_graph_with_eager_gradients() -> None:
    torch.manual_seed(0)
    model, backend = Stack(), CountingBackend()
    compiled = sapwood_tracer.compile(model, backend=backend, fullgraph=True)
    _same_training(model, compiled, torch.randn(4, 8))
    assert backend.count == 1
    ops = [n.target for n in backend.graphs[0].graph.nodes if n.op == "call_function"]
    assert ops.count(torch.ops.higher_order.tag_activation_checkpoint) == 3


def test_the_huggingface_form_partial_and_bound_call_with_keywords() -> None:
    torch.manual_seed(0)
    block = Block()
    checkpointing = functools.partial(cp.checkpoint, use_reentrant=False)

    def step(x: torch.Tensor) -> tuple[torch.Tensor, None]:
        out = checkpointing(block.__call__, x, scale=0.5)
        return out.sum(), None

    backend = CountingBackend()
    compiled = sapwood_tracer.compile(step, backend=backend, fullgraph=True)
    x = torch.randn(2, 8, requires_grad=True)
    loss, nothing = compiled(x)
    loss.backward()
    grad, x.grad = x.grad, None
    step(x)[0].backward()
    assert nothing is None and backend.count == 1
    torch.testing.assert_close(grad, x.grad)


def test_a_body_returning_a_tuple_with_constants_keeps_its_structure() -> None:
    lin = nn.Linear(4, 4)

    def body(t: torch.Tensor) -> tuple[torch.Tensor, int, tuple[torch.Tensor, None]]:
        h = lin(t)
        return h.relu(), 3, (h * 2, None)

    def f(x: torch.Tensor) -> Any:
        return cp.checkpoint(body, x, use_reentrant=False)

    backend = CountingBackend()
    x = torch.randn(3, 4)
    out = sapwood_tracer.compile(f, backend=backend, fullgraph=True)(x)
    expected = f(x)
    assert backend.count == 1 and out[1] == 3 and out[2][1] is None
    torch.testing.assert_close(out[0], expected[0])
    torch.testing.assert_close(out[2][0], expected[2][0])


def _refusal(fn: Any, *args: Any) -> str:
    with pytest.raises(sapwood_tracer.Unsupported) as caught:
        sapwood_tracer.compile(fn, backend=CountingBackend(), fullgraph=True)(*args)
    return str(caught.value)


def test_bodies_whose_recompute_could_differ_are_refused_with_their_reason() -> None:
    lin = nn.Linear(4, 4)
    x = torch.randn(2, 4)
    seen: list[torch.Tensor] = []

    def appends(t: torch.Tensor) -> torch.Tensor:
        seen.append(t)
        return lin(t)

    def writes_given(t: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
        buf.add_(1)
        return lin(t) + buf

    def drops(t: torch.Tensor) -> torch.Tensor:
        return nn.functional.dropout(lin(t), 0.5, training=True)

    def returns_given(t: torch.Tensor) -> torch.Tensor:
        return t[0]

    def made_here(t: torch.Tensor) -> torch.Tensor:
        box: list[torch.Tensor] = []
        cp.checkpoint(lambda u: box.append(u) or lin(u), t, use_reentrant=False)
        return box[0]

    cases = [
        (lambda t: cp.checkpoint(appends, t, use_reentrant=False), "writes to objects outside"),
        (lambda t: cp.checkpoint(writes_given, t, torch.zeros(4), use_reentrant=False), "in place"),
        (lambda t: cp.checkpoint(drops, t, use_reentrant=False), "random numbers"),
        (lambda t: cp.checkpoint(returns_given, t, use_reentrant=False), "returning a tensor"),
        (made_here, "changes Python values"),
        (lambda t: cp.checkpoint(lin, t, use_reentrant=True), "use_reentrant=False"),
        (lambda t: cp.checkpoint(lin, t, use_reentrant=False, debug=True), "debug"),
    ]
    for fn, reason in cases:
        sapwood_tracer.reset()
        assert reason in _refusal(fn, x)


def test_a_refused_checkpoint_runs_eagerly_between_graphs_and_trains_as_eager() -> None:
    torch.manual_seed(0)
    model, backend = Stack(p=0.3), CountingBackend()
    compiled = sapwood_tracer.compile(model, backend=backend)
    x = torch.randn(4, 8)
    torch.manual_seed(1)
    compiled_loss = compiled(x)
    compiled_loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)
    model(x).backward()
    for p, g in zip(model.parameters(), grads):
        torch.testing.assert_close(p.grad, g)
    report = sapwood_tracer.explain(Stack(p=0.3))(x)
    assert any("random numbers" in b.reason for b in report.breaks)


@settings(max_examples=12, deadline=None)
@given(
    layers=st.integers(1, 3),
    scale=st.sampled_from([0.5, 1.0, 2.0]),
    grad_input=st.booleans(),
    no_grad=st.booleans(),
)
def test_checkpointed_stacks_match_eager(layers, scale, grad_input, no_grad) -> None:
    torch.manual_seed(layers)
    blocks = nn.ModuleList([Block() for _ in range(layers)])

    def f(x: torch.Tensor) -> torch.Tensor:
        for block in blocks:
            x = cp.checkpoint(block, x, use_reentrant=False, scale=scale)
        return x.sum()

    sapwood_tracer.reset()
    compiled = sapwood_tracer.compile(f, backend=CountingBackend(), fullgraph=True)
    x = torch.randn(3, 8, requires_grad=grad_input)
    if no_grad:
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), f(x))
        return
    out = compiled(x)
    out.backward()
    grads = [p.grad.clone() for p in blocks.parameters()]
    blocks.zero_grad(set_to_none=True)
    got_x = x.grad
    x.grad = None
    f(x).backward()
    for p, g in zip(blocks.parameters(), grads):
        torch.testing.assert_close(p.grad, g)
    if grad_input:
        torch.testing.assert_close(got_x, x.grad)


class _Flags:
    active = False


def test_a_flag_set_and_reset_in_the_body_is_captured_and_a_lasting_write_refused() -> None:
    flags, lin = _Flags(), nn.Linear(4, 4)
    flags.active = False

    def toggles(t: torch.Tensor) -> torch.Tensor:
        flags.active = True
        out = lin(t)
        flags.active = False
        return out

    def leaves_set(t: torch.Tensor) -> torch.Tensor:
        flags.active = True
        return lin(t)

    backend = CountingBackend()
    x = torch.randn(2, 4)
    f = lambda t: cp.checkpoint(toggles, t, use_reentrant=False)  # noqa: E731
    torch.testing.assert_close(
        sapwood_tracer.compile(f, backend=backend, fullgraph=True)(x), lin(x)
    )
    assert backend.count == 1 and flags.active is False
    sapwood_tracer.reset()
    reason = _refusal(lambda t: cp.checkpoint(leaves_set, t, use_reentrant=False), x)
    assert "writes to objects outside" in reason
    assert flags.active is False  # (nothing ran: the refusal is at trace time)


def test_attention_without_dropout_in_training_is_captured() -> None:
    q = torch.randn(1, 2, 5, 4, requires_grad=True)

    def attend(t: torch.Tensor) -> torch.Tensor:
        return nn.functional.scaled_dot_product_attention(t, t, t, dropout_p=0.0, is_causal=True)

    f = lambda t: cp.checkpoint(attend, t * 1, use_reentrant=False).sum()  # noqa: E731
    backend = CountingBackend()
    out = sapwood_tracer.compile(f, backend=backend, fullgraph=True)(q)
    out.backward()
    grad, q.grad = q.grad, None
    f(q).backward()
    assert backend.count == 1
    torch.testing.assert_close(grad, q.grad)


def test_a_tensor_the_body_returns_as_given_is_the_callers_own() -> None:
    """T5's layers take the position bias and hand it back unchanged: the checkpoint returns
    the very tensor it was given (a view of it is still refused, above)."""
    lin = nn.Linear(4, 4)

    def layer(h: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return lin(h) + bias, bias

    def f(x: torch.Tensor, bias: torch.Tensor) -> Any:
        out, same = cp.checkpoint(layer, x, bias, use_reentrant=False)
        return out.sum(), same

    backend = CountingBackend()
    x, bias = torch.randn(2, 4, requires_grad=True), torch.randn(4)
    loss, same = sapwood_tracer.compile(f, backend=backend, fullgraph=True)(x, bias)
    assert same is bias and backend.count == 1
    loss.backward()
    grad, x.grad = x.grad, None
    f(x, bias)[0].backward()
    torch.testing.assert_close(grad, x.grad)
