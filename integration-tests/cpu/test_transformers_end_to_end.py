"""Hugging Face models from tiny configs through ``sapwood.compile``, on the CPU.

For each model: one graph, outputs equal to eager, and a 20-step training loss curve (the
model's own loss, AdamW) equal to eager's within tolerance.
"""

from __future__ import annotations

import copy

import pytest
import torch
from zoo import HF_NAMES, CountingBackend, build_hf, output_tensors

import sapwood

pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def _fresh() -> None:
    sapwood.reset()


@pytest.mark.parametrize("name", HF_NAMES)
def test_inference_is_one_graph_equal_to_eager(name: str) -> None:
    model, inputs = build_hf(name)
    model.eval()
    counting = CountingBackend("aot_eager")
    compiled = sapwood.compile(model, backend=counting)
    with torch.no_grad():
        expected = output_tensors(model(**inputs))
        for _ in range(2):
            got = output_tensors(compiled(**inputs))
            assert len(got) == len(expected)
            for a, b in zip(got, expected):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert len(counting.graphs) == 1


@pytest.mark.parametrize("name", HF_NAMES)
def test_twenty_step_loss_curve_equals_eager(name: str) -> None:
    reference, inputs = build_hf(name)
    reference.train()
    trained = copy.deepcopy(reference)
    counting = CountingBackend("aot_eager")
    compiled = sapwood.compile(trained, backend=counting)
    curves: list[list[float]] = [[], []]
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (reference, trained)]
    for _ in range(20):
        for curve, model, opt in zip(curves, (reference, compiled), optimizers):
            loss = model(**inputs).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            curve.append(loss.item())
    torch.testing.assert_close(
        torch.tensor(curves[1]), torch.tensor(curves[0]), rtol=1e-3, atol=1e-4
    )
    assert curves[1][-1] < curves[1][0]
    assert len(counting.graphs) == 1
