"""``torch.cond(pred, true_fn, false_fn, operands)`` with a tensor predicate is one node of
the caller's graph (torch's ``cond`` over both branches traced as child graphs), where
torch.compile captures it; a Python predicate calls its branch, as eager ``torch.cond`` does.
Before, the call was a graph break ("a callee that breaks"), and ``fullgraph=True`` raised.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import sapwood_tracer

from .conftest import CountingBackend

_BRANCHES = {
    "relu": lambda lin: lambda t: lin(t).relu(),
    "minus": lambda lin: lambda t: lin(t) - 1,
    "scaled": lambda lin: lambda t: lin(t * 0.5).sin() * 2,
    "sum_kept": lambda lin: lambda t: lin(t) + t.sum(-1, keepdim=True),
}


def _cond_ops(backend: CountingBackend) -> int:
    return sum(
        n.target is torch.ops.higher_order.cond
        for g in backend.graphs
        for n in g.graph.nodes
        if n.op == "call_function"
    )


def test_one_graph_takes_either_branch_at_run_time() -> None:
    lin, w = nn.Linear(4, 4), torch.randn(4)

    def f(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        return torch.cond(y.sum() > 0, lambda t: lin(t).relu() + w, lambda t: lin(t) - 1, (y,)) * 3

    backend = CountingBackend()
    compiled = sapwood_tracer.compile(f, backend=backend, fullgraph=True)
    for x in (torch.ones(2, 4), -torch.ones(2, 4), torch.randn(2, 4)):
        torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1 and _cond_ops(backend) == 1


def test_gradients_flow_through_the_branch_taken() -> None:
    lin = nn.Linear(3, 3)

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.mean() > 0, lambda t: lin(t).tanh(), lambda t: lin(t) * 2, [x]).sum()

    compiled = sapwood_tracer.compile(f, backend=CountingBackend(), fullgraph=True)
    for sign in (1, -1):
        x = (sign * torch.rand(2, 3) + sign * 0.1).requires_grad_()
        compiled(x).backward()
        got = (x.grad, lin.weight.grad.clone())
        x.grad = None
        lin.zero_grad(set_to_none=True)
        f(x).backward()
        torch.testing.assert_close(got[0], x.grad)
        torch.testing.assert_close(got[1], lin.weight.grad)
        lin.zero_grad(set_to_none=True)


def test_a_python_predicate_calls_its_branch_inline() -> None:
    backend = CountingBackend()

    def f(x: torch.Tensor, flag: bool) -> torch.Tensor:
        return torch.cond(flag, lambda t: t + 1, lambda t: t - 1, (x,))

    compiled = sapwood_tracer.compile(f, backend=backend, fullgraph=True)
    x = torch.zeros(2)
    torch.testing.assert_close(compiled(x, True), x + 1)
    torch.testing.assert_close(compiled(x, False), x - 1)
    assert _cond_ops(backend) == 0


def test_branches_torch_cond_would_not_take_are_refused_with_a_reason() -> None:
    lin, seen = nn.Linear(2, 2), []

    def appends(t: torch.Tensor) -> torch.Tensor:
        seen.append(1)
        return lin(t)

    cases = [
        (lambda t: lin(t), lambda t: lin(t).sum(0), "differ in shape"),
        (lambda t: lin(t), lambda t: lin(t)[:, 0:1].expand(2, 2), "differ in shape, strides"),
        (lambda t: lin(t), lambda t: (lin(t), lin(t)), "different structures"),
        (appends, lambda t: lin(t), "writes to objects outside"),
        (lambda t: t, lambda t: lin(t), "returning a tensor it was given"),
    ]
    x = torch.randn(2, 2)
    for true_fn, false_fn, reason in cases:
        sapwood_tracer.reset()

        def f(x: torch.Tensor, true_fn: Any = true_fn, false_fn: Any = false_fn) -> Any:
            return torch.cond(x.sum() > 0, true_fn, false_fn, (x * 1,))

        with pytest.raises(sapwood_tracer.Unsupported, match="cond") as caught:
            sapwood_tracer.compile(f, backend=CountingBackend(), fullgraph=True)(x)
        assert reason in str(caught.value)
    assert seen == []


@settings(max_examples=30, deadline=None)
@given(
    true_name=st.sampled_from(sorted(_BRANCHES)),
    false_name=st.sampled_from(sorted(_BRANCHES)),
    signs=st.lists(st.sampled_from([-1.0, 1.0]), min_size=1, max_size=3),
    rows=st.integers(1, 3),
)
def test_cond_matches_eager(true_name, false_name, signs, rows) -> None:
    lin = nn.Linear(4, 4)
    true_fn, false_fn = _BRANCHES[true_name](lin), _BRANCHES[false_name](lin)

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,)) + 1

    sapwood_tracer.reset()
    backend = CountingBackend()
    compiled = sapwood_tracer.compile(f, backend=backend, fullgraph=True)
    for sign in signs:
        x = sign * (torch.rand(rows, 4) + 0.1)
        torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1
