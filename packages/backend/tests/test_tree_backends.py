"""Backends that put compiled graphs on sapwood's CUDA graph trees.

The CPU tests check the parts that need no GPU: graphs without CUDA tensors are not wrapped
and give eager's results. The GPU tests (marked ``gpu``) run on the GPU machine: inference and
training through the trees, models mixed in one process, and torch.compile interop.
"""

from __future__ import annotations

import copy

import pytest
import torch

import sapwood_backend
from sapwood_backend import torch_backend

from .models import MODEL_NAMES, model_and_input


@pytest.fixture(autouse=True)
def _fresh_state() -> None:
    torch._dynamo.reset()
    import sapwood_cudagraph_trees

    sapwood_cudagraph_trees.reset()


def test_cudagraphs_backend_on_cpu_inputs_gives_eager_results() -> None:
    model, example = model_and_input("mlp")
    compiled = torch.compile(model, backend=sapwood_backend.lookup_backend("cudagraphs"))
    torch.testing.assert_close(compiled(example), model(example))


def test_torch_backend_refuses_a_mode_without_cuda_graphs() -> None:
    with pytest.raises(sapwood_backend.InvalidModeError, match="'default'"):
        torch_backend(mode="default")


def test_reduce_overhead_on_cpu_inputs_gives_eager_results() -> None:
    model, example = model_and_input("mlp")
    backend = sapwood_backend.resolve_backend("inductor", mode="reduce-overhead")
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        torch.testing.assert_close(compiled(example), model(example), rtol=1e-4, atol=1e-4)


def _on_cuda(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    model, example = model_and_input(name)
    return model.cuda(), example.cuda()


@pytest.mark.gpu
@pytest.mark.parametrize("model_name", MODEL_NAMES)
@pytest.mark.parametrize("how", ["reduce-overhead", "cudagraphs", "torch_backend"])
def test_inference_through_the_trees_matches_eager(how: str, model_name: str) -> None:
    import sapwood_cudagraph_trees

    model, example = _on_cuda(model_name)
    model.eval()
    if how == "reduce-overhead":
        backend = sapwood_backend.resolve_backend("inductor", mode="reduce-overhead")
    elif how == "cudagraphs":
        backend = sapwood_backend.lookup_backend("cudagraphs")
    else:
        backend = torch_backend()
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        for _ in range(4):  # warm-up, record, then replays
            expected = model(example)
            torch.testing.assert_close(compiled(example), expected, rtol=1e-3, atol=1e-3)
    functions = sapwood_cudagraph_trees.tree_info(0).functions
    assert sum(f.recordings for f in functions) >= 1, sapwood_cudagraph_trees.render(0)
    assert sum(f.replays for f in functions) >= 1, sapwood_cudagraph_trees.render(0)


@pytest.mark.gpu
@pytest.mark.parametrize("model_name", MODEL_NAMES)
@pytest.mark.parametrize("how", ["reduce-overhead", "cudagraphs"])
def test_training_through_the_trees_matches_eager(how: str, model_name: str) -> None:
    reference, example = _on_cuda(model_name)
    trained = copy.deepcopy(reference)
    backend = (
        sapwood_backend.resolve_backend("inductor", mode="reduce-overhead")
        if how == "reduce-overhead"
        else sapwood_backend.lookup_backend("cudagraphs")
    )
    compiled = torch.compile(trained, backend=backend)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.01)
    opt_new = torch.optim.SGD(trained.parameters(), lr=0.01)
    for _ in range(10):
        loss_ref = reference(example).float().pow(2).mean()
        loss_new = compiled(example).float().pow(2).mean()
        loss_ref.backward()
        loss_new.backward()
        opt_ref.step()
        opt_new.step()
        opt_ref.zero_grad()
        opt_new.zero_grad()
        torch.testing.assert_close(loss_new, loss_ref, rtol=1e-3, atol=1e-3)
    for p_ref, p_new in zip(reference.parameters(), trained.parameters()):
        torch.testing.assert_close(p_new, p_ref, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_inference_and_training_models_mixed_in_one_process() -> None:
    backend = sapwood_backend.resolve_backend("inductor", mode="reduce-overhead")
    infer_model, infer_x = _on_cuda("gpt")
    infer_model.eval()
    train_model, train_x = _on_cuda("mlp")
    reference = copy.deepcopy(train_model)
    infer = torch.compile(infer_model, backend=backend)
    train = torch.compile(train_model, backend=backend)
    opt = torch.optim.SGD(train_model.parameters(), lr=0.01)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.01)
    for _ in range(5):
        with torch.no_grad():
            torch.testing.assert_close(infer(infer_x), infer_model(infer_x), rtol=1e-3, atol=1e-3)
        loss = train(train_x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss_ref = reference(train_x).pow(2).mean()
        loss_ref.backward()
        opt_ref.step()
        opt_ref.zero_grad()
        torch.testing.assert_close(loss, loss_ref, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_a_warm_compile_cache_still_replays_through_the_trees() -> None:
    """A second compile of the same graph may come from torch's caches; it must still record."""
    import sapwood_cudagraph_trees

    model, example = _on_cuda("mlp")
    model.eval()
    backend = sapwood_backend.resolve_backend("inductor", mode="reduce-overhead")
    for _ in range(2):
        torch._dynamo.reset()
        sapwood_cudagraph_trees.reset()
        compiled = torch.compile(model, backend=backend)
        with torch.no_grad():
            for _ in range(3):
                torch.testing.assert_close(compiled(example), model(example), rtol=1e-3, atol=1e-3)
        functions = sapwood_cudagraph_trees.tree_info(0).functions
        assert sum(f.recordings for f in functions) >= 1
        assert sum(f.replays for f in functions) >= 1
