"""The built-in backends give eager's results, for inference and for training.

torch.compile(fullgraph=True) captures the graphs here: the backends follow its protocol, so
this is also the proof that sapwood's backends plug into torch.compile unchanged.
"""

from __future__ import annotations

import copy

import pytest
import torch

import sapwood_backend

from .models import MODEL_NAMES, model_and_input

# Inductor compiles C++ on the CPU, which is slow on CI's two cores: it gets the MLP and the
# GPT stack (inference) and the MLP (training); the AOT backends get every model.
INFERENCE_CASES = [(b, m) for b in ("eager", "aot_eager") for m in MODEL_NAMES] + [
    ("inductor", "mlp"),
    ("inductor", "gpt"),
]
TRAINING_CASES = [("aot_eager", m) for m in MODEL_NAMES] + [("inductor", "mlp")]


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


def _compile(model: torch.nn.Module, backend: str):
    return torch.compile(model, backend=sapwood_backend.lookup_backend(backend), fullgraph=True)


@pytest.mark.parametrize(("backend", "model_name"), INFERENCE_CASES)
def test_inference_matches_eager(backend: str, model_name: str) -> None:
    model, example = model_and_input(model_name)
    model.eval()
    compiled = _compile(model, backend)
    with torch.no_grad():
        for scale in (1, 3):
            x = example * scale if example.is_floating_point() else (example * scale) % 64
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


def _loss(output: torch.Tensor) -> torch.Tensor:
    return output.float().pow(2).mean()


@pytest.mark.parametrize(("backend", "model_name"), TRAINING_CASES)
def test_gradients_and_ten_optimizer_steps_match_eager(backend: str, model_name: str) -> None:
    reference, example = model_and_input(model_name)
    trained = copy.deepcopy(reference)
    compiled = _compile(trained, backend)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    opt_new = torch.optim.SGD(trained.parameters(), lr=0.05, momentum=0.9)
    for step in range(10):
        loss_ref = _loss(reference(example))
        loss_new = _loss(compiled(example))
        loss_ref.backward()
        loss_new.backward()
        if step == 0:
            for (name, p_ref), p_new in zip(reference.named_parameters(), trained.parameters()):
                torch.testing.assert_close(p_new.grad, p_ref.grad, rtol=1e-4, atol=1e-5, msg=name)
        opt_ref.step()
        opt_new.step()
        opt_ref.zero_grad()
        opt_new.zero_grad()
        torch.testing.assert_close(loss_new, loss_ref, rtol=1e-4, atol=1e-5)
    for p_ref, p_new in zip(reference.parameters(), trained.parameters()):
        torch.testing.assert_close(p_new, p_ref, rtol=1e-4, atol=1e-5)


def test_aot_eager_accepts_a_graph_with_a_single_output() -> None:
    model, example = model_and_input("mlp")
    gm = torch.fx.symbolic_trace(model)
    compiled = sapwood_backend.lookup_backend("aot_eager")(gm, [example])
    torch.testing.assert_close(compiled(example), model(example))
