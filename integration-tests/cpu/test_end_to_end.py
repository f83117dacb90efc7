"""End to end through the meta-package: ``sapwood.compile`` on handwritten models, on the CPU.

For each model: one graph, outputs equal to eager on several inputs, and a 20-step training
loss curve equal to eager's. Inductor compiles C++ on the CPU, slow on CI's two cores, so it
gets the MLP only; the other backends get every model.
"""

from __future__ import annotations

import copy

import pytest
import torch
from zoo import NAMES, CountingBackend, build

import sapwood

INFERENCE = [(b, m) for b in ("eager", "aot_eager") for m in NAMES] + [("inductor", "mlp")]
TRAINING = [("aot_eager", m) for m in NAMES] + [("inductor", "mlp")]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    sapwood.reset()


def _vary(example: torch.Tensor, trial: int) -> torch.Tensor:
    if example.is_floating_point():
        return example * (trial + 1) - trial
    return (example * (trial + 1) + trial) % 64


@pytest.mark.parametrize(("backend", "name"), INFERENCE)
def test_one_graph_and_eager_results(backend: str, name: str) -> None:
    model, example = build(name)
    model.eval()
    counting = CountingBackend(backend)
    compiled = sapwood.compile(model, backend=counting)
    with torch.no_grad():
        for trial in range(3):
            x = _vary(example, trial)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert len(counting.graphs) == 1
    ops = [n for n in counting.graphs[0].graph.nodes if n.op.startswith("call_")]
    assert len(ops) >= 3


@pytest.mark.parametrize(("backend", "name"), TRAINING)
def test_twenty_step_loss_curve_equals_eager(backend: str, name: str) -> None:
    reference, example = build(name)
    trained = copy.deepcopy(reference)
    counting = CountingBackend(backend)
    compiled = sapwood.compile(trained, backend=counting)
    opt_ref = torch.optim.Adam(reference.parameters(), lr=1e-2)
    opt_new = torch.optim.Adam(trained.parameters(), lr=1e-2)
    curve_ref, curve_new = [], []
    for _ in range(20):
        for model, opt, curve in (
            (reference, opt_ref, curve_ref),
            (compiled, opt_new, curve_new),
        ):
            loss = model(example).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            curve.append(loss.item())
    torch.testing.assert_close(
        torch.tensor(curve_new), torch.tensor(curve_ref), rtol=1e-3, atol=1e-5
    )
    assert curve_new[-1] < curve_new[0]
    assert len(counting.graphs) == 1
