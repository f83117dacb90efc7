"""Graph breaks on the GPU: the pieces around each break go to Inductor and, with
reduce-overhead, each piece becomes a CUDA graph of the same tree (one pool per device).

Runs on the GPU machine through ``nox -s gpu``; skipped elsewhere with its reason.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from zoo import GPT

import sapwood

pytestmark = pytest.mark.gpu

_seen: list[float] = []


@sapwood.disable
def _host_read(t: torch.Tensor) -> torch.Tensor:
    _seen.append(float(t.float().abs().mean()))  # a device-to-host read, eagerly
    return t


class BreakingGPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.gpt = GPT()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        logits = self.gpt(tokens)
        logits = _host_read(logits)
        if logits.mean() > 0:  # data-dependent
            logits = logits * 1.5
        return logits.log_softmax(-1)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    sapwood.reset()
    _seen.clear()


def _tokens(seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 64, (2, 16), generator=gen).cuda()


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_inference_with_breaks_matches_eager(mode: str | None) -> None:
    model = BreakingGPT().cuda().eval()
    compiled = sapwood.compile(model, mode=mode)
    with torch.no_grad():
        for step in range(5):
            tokens = _tokens(step % 2)
            torch.testing.assert_close(compiled(tokens), model(tokens), rtol=2e-3, atol=2e-3)
    assert len(_seen) == 10  # the eager part ran once per call, compiled and eager alike
    if mode == "reduce-overhead":
        import sapwood_cudagraph_trees

        nodes = sapwood_cudagraph_trees.tree_info(0).nodes.values()
        assert len(nodes) >= 2  # pieces before and after the breaks
        assert sum(node.replays for node in nodes) >= 2


def test_reduce_overhead_training_with_breaks_follows_eager() -> None:
    reference = BreakingGPT().cuda()
    trained = copy.deepcopy(reference)
    compiled = sapwood.compile(trained, mode="reduce-overhead")
    opt_ref = torch.optim.SGD(reference.parameters(), lr=1e-2)
    opt_new = torch.optim.SGD(trained.parameters(), lr=1e-2)
    for step in range(8):
        tokens = _tokens(step % 2)
        losses = []
        for model, opt in ((reference, opt_ref), (compiled, opt_new)):
            loss = -model(tokens).float().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=2e-3, abs=2e-3)
