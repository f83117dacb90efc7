"""End to end on the GPU through ``sapwood.compile``: Inductor, reduce-overhead and training.

Runs on the GPU machine through ``nox -s gpu``; skipped elsewhere with its reason.
"""

from __future__ import annotations

import copy

import pytest
import torch
from zoo import HF_NAMES, NAMES, build, build_hf, output_tensors

import sapwood

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _fresh() -> None:
    sapwood.reset()


def _recorded_graphs() -> tuple[int, int]:
    """Graphs now in device 0's tree, and their replays (``sapwood.reset`` empties the tree)."""
    import sapwood_cudagraph_trees

    nodes = sapwood_cudagraph_trees.tree_info(0).nodes.values()
    return len(nodes), sum(node.replays for node in nodes)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_inference_matches_eager(name: str, mode: str | None) -> None:
    model, example = build(name, "cuda")
    model.eval()
    compiled = sapwood.compile(model, mode=mode)
    with torch.no_grad():
        for _ in range(4):
            torch.testing.assert_close(compiled(example), model(example), rtol=2e-3, atol=2e-3)
    graphs, replays = _recorded_graphs()
    if mode == "reduce-overhead":
        assert graphs >= 1 and replays >= 1
    else:
        assert (graphs, replays) == (0, 0)


@pytest.mark.parametrize("name", NAMES)
def test_reduce_overhead_training_follows_eager_for_ten_steps(name: str) -> None:
    reference, example = build(name, "cuda")
    trained = copy.deepcopy(reference)
    compiled = sapwood.compile(trained, mode="reduce-overhead")
    opt_ref = torch.optim.SGD(reference.parameters(), lr=1e-2)
    opt_new = torch.optim.SGD(trained.parameters(), lr=1e-2)
    for _ in range(10):
        losses = []
        for model, opt in ((reference, opt_ref), (compiled, opt_new)):
            loss = model(example).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0], rtol=2e-3, atol=2e-3)
    graphs, replays = _recorded_graphs()
    assert graphs >= 2 and replays >= 2  # a forward and a backward graph


def test_inference_and_training_models_share_one_process() -> None:
    infer_model, infer_x = build("gpt", "cuda")
    infer_model.eval()
    train_model, train_x = build("mlp", "cuda")
    reference = copy.deepcopy(train_model)
    infer = sapwood.compile(infer_model, mode="reduce-overhead")
    train = sapwood.compile(train_model, mode="reduce-overhead")
    opt = torch.optim.SGD(train_model.parameters(), lr=1e-2)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=1e-2)
    for _ in range(5):
        with torch.no_grad():
            out = infer(infer_x)
            torch.testing.assert_close(out, infer_model(infer_x), rtol=2e-3, atol=2e-3)
        loss = train(train_x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss_ref = reference(train_x).pow(2).mean()
        loss_ref.backward()
        opt_ref.step()
        opt_ref.zero_grad()
        torch.testing.assert_close(loss, loss_ref, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("name", HF_NAMES)
def test_transformers_reduce_overhead_inference_matches_eager(name: str) -> None:
    pytest.importorskip("transformers")
    model, inputs = build_hf(name, "cuda")
    model.eval()
    compiled = sapwood.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        expected = output_tensors(model(**inputs))
        for _ in range(3):
            got = output_tensors(compiled(**inputs))
            assert len(got) == len(expected)
            for a, b in zip(got, expected):
                torch.testing.assert_close(a, b, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
def test_transformers_reduce_overhead_training_follows_eager(name: str) -> None:
    pytest.importorskip("transformers")
    reference, inputs = build_hf(name, "cuda")
    reference.train()
    trained = copy.deepcopy(reference)
    compiled = sapwood.compile(trained, mode="reduce-overhead")
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (reference, trained)]
    for _ in range(10):
        losses = []
        for model, opt in zip((reference, compiled), optimizers):
            loss = model(**inputs).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0], rtol=2e-3, atol=2e-3)
