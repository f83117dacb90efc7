"""Graph breaks end to end through the meta-package, on the CPU.

A GPT block stack whose forward logs, checks a tensor's value and calls a disabled function
still runs through ``sapwood.compile``: the parts around the breaks are compiled, inference
equals eager, and a 10-step training loss curve equals eager's (AOT autograd compiles each
piece's forward and backward).
"""

from __future__ import annotations

import copy
import logging

import pytest
import torch
from torch import nn
from zoo import GPT, CountingBackend

import sapwood

log = logging.getLogger("sapwood.integration.breaks")


@sapwood.disable
def _host_check(t: torch.Tensor) -> torch.Tensor:
    assert torch.isfinite(t).all().item()
    return t


class BreakingGPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.gpt = GPT()
        self.steps = 0

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        logits = self.gpt(tokens)
        log.info("logits %s", tuple(logits.shape))  # break: logging runs every call
        logits = _host_check(logits)  # break: a disabled function
        if logits.mean() > 0:  # break: data-dependent branch
            logits = logits * 1.5
        self.steps += 1
        return logits


@pytest.fixture(autouse=True)
def _fresh() -> None:
    sapwood.reset()


def _tokens(seed: int) -> torch.Tensor:
    return torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_inference_through_breaks_equals_eager(backend: str) -> None:
    model = BreakingGPT().eval()
    reference = copy.deepcopy(model)
    counting = CountingBackend(backend)
    compiled = sapwood.compile(model, backend=counting)
    with torch.no_grad():
        for seed in range(3):
            torch.testing.assert_close(compiled(_tokens(seed)), reference(_tokens(seed)))
    assert len(counting.graphs) >= 2  # the stack before the first break is one graph
    assert model.steps == reference.steps == 3


def test_training_through_breaks_follows_the_eager_loss_curve() -> None:
    model = BreakingGPT()
    reference = copy.deepcopy(model)
    compiled = sapwood.compile(model, backend="aot_eager")
    curves = []
    for net, run in ((reference, reference), (model, compiled)):
        opt = torch.optim.SGD(net.parameters(), lr=0.05)
        losses = []
        for step in range(10):
            tokens = _tokens(step % 3)
            loss = run(tokens).float().logsumexp(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        curves.append(losses)
    torch.testing.assert_close(curves[1], curves[0], rtol=1e-4, atol=1e-5)


def test_explain_names_each_break_and_its_line() -> None:
    model = BreakingGPT().eval()
    with torch.no_grad():
        report = sapwood.explain(model)(_tokens(0))
    reasons = [b.reason for b in report.breaks]
    assert report.graph_count >= 2
    assert any("logging call info()" in r for r in reasons), reasons
    assert any("_host_check" in r for r in reasons), reasons
    assert any("data-dependent" in r for r in reasons), reasons
    assert all("test_graph_breaks_end_to_end.py:" in b.location for b in report.breaks)


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
def test_hugging_face_models_with_attention_kept_out_of_the_graphs(name: str) -> None:
    """Every attention call breaks, deep inside the model: each caller breaks at its call and
    is compiled around it, and nothing falls back to running eagerly as a whole."""
    pytest.importorskip("transformers")
    from zoo import build_hf

    from sapwood_tracer import marks as _disable

    sdpa = torch.nn.functional.scaled_dot_product_attention
    model, inputs = build_hf(name)
    model.eval()
    sapwood.disallow_in_graph(sdpa)
    try:
        with torch.no_grad():
            expected = model(**inputs)
            report = sapwood.explain(model)(**inputs)
            compiled = sapwood.compile(model, backend="eager")
            for _ in range(2):
                got = compiled(**inputs)
                torch.testing.assert_close(got[0], expected[0])
    finally:
        _disable._disallowed.discard(sdpa)
    assert report.eager_functions == []
    assert report.graph_count >= 2
    assert any("scaled_dot_product_attention" in b.reason for b in report.breaks)
