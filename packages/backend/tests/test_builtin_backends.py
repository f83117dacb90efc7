"""The built-in backends give eager's results, for inference and for training.

torch.compile(fullgraph=True) captures the graphs here: the backends follow its protocol, so
this is also the proof that sapwood's backends plug into torch.compile unchanged.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
import torch

import sapwood_backend
from sapwood_backend.registry import lookup_backend

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


def test_inductor_is_told_which_inputs_are_parameters_and_buffers(monkeypatch) -> None:
    """Parameters and buffers reach Inductor as static inputs (no per-call alignment check of
    each), in inference and in the forward of training; tensors passed by the caller do not."""
    from torch._inductor import compile_fx as inductor

    import sapwood

    seen: list[tuple[bool, tuple[int, ...], list[Any]]] = []
    original = inductor.compile_fx_inner

    def spy(gm, example_inputs, **kwargs):
        seen.append(
            (
                bool(kwargs.get("is_backward")),
                tuple(kwargs.get("static_input_idxs") or ()),
                [tuple(x.shape) if isinstance(x, torch.Tensor) else x for x in example_inputs],
            )
        )
        return original(gm, example_inputs, **kwargs)

    monkeypatch.setattr(inductor, "compile_fx_inner", spy)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5))
    x = torch.randn(4, 6)
    expected = model(x)
    out = sapwood.compile(model, backend="inductor")(x)
    torch.testing.assert_close(out, expected)
    with torch.no_grad():
        model.eval()
        torch.testing.assert_close(sapwood.compile(model, backend="inductor")(x), model(x))
    forwards = [(static, shapes) for backward, static, shapes in seen if not backward]
    assert len(forwards) == 2, seen
    for static, shapes in forwards:
        input_index = shapes.index((4, 6))
        assert input_index not in static
        weight_index = shapes.index((5, 6))
        assert weight_index in static, (static, shapes)
        # weight, bias, BN weight, bias, running mean, running var (and the batch counter)
        assert len(static) >= 6, (static, shapes)


def test_inductor_graphs_are_called_without_the_dynamo_disable_wrapper(monkeypatch) -> None:
    from sapwood_backend import builtin

    calls: list[str] = []

    def wrapped_call(*args: Any) -> Any:
        calls.append("wrapper")
        return orig(*args)

    def orig(*args: Any) -> Any:
        calls.append("inner")
        return args

    wrapped_call._torchdynamo_disable = True  # type: ignore[attr-defined]
    wrapped_call._torchdynamo_orig_callable = orig  # type: ignore[attr-defined]
    wrapped_call._torchdynamo_wrapper_id = id(wrapped_call)  # type: ignore[attr-defined]
    copied = functools.wraps(wrapped_call)(lambda *args: ("copied", *args))
    assert builtin.direct_call(copied) is copied  # its attributes copied: not the wrapper
    direct = builtin.direct_call(wrapped_call)
    assert direct(1, 2) == (1, 2) and calls == ["inner"]  # no frame hook: straight in
    calls.clear()
    monkeypatch.setattr(
        torch._C._dynamo.eval_frame, "get_eval_frame_callback", lambda: lambda *a: None
    )
    hooked = builtin.direct_call(wrapped_call)
    assert hooked(3) == (3,) and calls == ["wrapper", "inner"]  # a hook is on: the wrapper
    plain = builtin.direct_call(orig)
    assert plain is orig  # nothing to unwrap


def test_inductor_graph_called_directly_matches_eager() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.sin(x) * 2 + 1,)

    gm = torch.fx.symbolic_trace(f)
    x = torch.randn(8)
    compiled = lookup_backend("inductor")(gm, [x])  # a tuple out: AOT autograd's own wrapper
    assert getattr(compiled, "__wrapped__", None) is not None  # the disable wrapper, unwrapped
    torch.testing.assert_close(tuple(compiled(x)), f(x))
