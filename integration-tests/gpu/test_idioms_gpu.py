"""PyTorch idioms captured as higher-order operations, compiled by Inductor on the GPU.

Activation checkpointing (``tag_activation_checkpoint``) and ``torch.cond`` are one graph
under sapwood; here Inductor compiles them for CUDA, in ``default`` and ``reduce-overhead``
modes, and the results and gradients are eager's. Runs on the GPU machine.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.utils.checkpoint as cp
from torch import nn

import sapwood

pytestmark = pytest.mark.gpu


class Block(nn.Module):
    def __init__(self, dim: int = 64) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class Checkpointed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = cp.checkpoint(block, x, use_reentrant=False)
        return x.square().mean()


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_checkpointed_training_on_inductor_matches_eager(mode: str | None) -> None:
    sapwood.reset()
    torch.manual_seed(0)
    model = Checkpointed().cuda()
    reference = copy.deepcopy(model)
    compiled = sapwood.compile(model, mode=mode, fullgraph=True)
    for step in range(4):
        x = torch.randn(8, 16, 64, device="cuda") * (step + 1)
        loss = compiled(x)
        loss.backward()
        expected = reference(x)
        expected.backward()
        torch.testing.assert_close(loss.detach(), expected.detach(), rtol=1e-4, atol=1e-5)
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-5)
            p.grad = q.grad = None


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_cond_on_inductor_takes_either_branch(mode: str | None) -> None:
    sapwood.reset()
    lin = nn.Linear(32, 32).cuda()

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: lin(t).relu(), lambda t: lin(t) * -2, (x,)) + 1

    compiled = sapwood.compile(f, mode=mode, fullgraph=True)
    with torch.no_grad():
        for sign in (1, -1, 1, -1):
            x = sign * (torch.rand(4, 32, device="cuda") + 0.1)
            torch.testing.assert_close(compiled(x), f(x))
