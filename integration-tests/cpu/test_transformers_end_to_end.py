"""Hugging Face models from tiny configs through ``sapwood.compile``, on the CPU.

For each model: one graph, outputs equal to eager, and a training loss curve (the model's
own loss, AdamW; 20 steps for the first models, 5 for the others to keep CI short) equal to
eager's within tolerance. A model that does not yet compile into one graph is listed in
``TRAINING_GRAPHS`` with the count it reaches: the count is still asserted exactly (so a fix or
a regression shows), and equality with eager is checked the same way.
"""

from __future__ import annotations

import copy

import pytest
import torch
from zoo import HF_MORE_NAMES, HF_NAMES, CountingBackend, build_hf, output_tensors

import sapwood

pytest.importorskip("transformers")

ALL_NAMES = HF_NAMES + HF_MORE_NAMES

#: Graphs compiled over the whole training run where it is more than one, with the reason
#: (every call is still one graph: no graph breaks).
TRAINING_GRAPHS = {
    # the first call installs Transformers' output-capturing hooks (under a threading.Lock,
    # registering forward hooks on the layers it then calls): one graph; the hooks in place,
    # the second call takes the other path, and compiles once more (one graph)
    "wav2vec2": 2,
}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    sapwood.reset()


@pytest.mark.parametrize("name", ALL_NAMES)
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


@pytest.mark.parametrize("name", ALL_NAMES)
def test_loss_curve_equals_eager(name: str) -> None:
    reference, inputs = build_hf(name)
    reference.train()
    trained = copy.deepcopy(reference)
    counting = CountingBackend("aot_eager")
    compiled = sapwood.compile(trained, backend=counting)
    curves: list[list[float]] = [[], []]
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (reference, trained)]
    for _ in range(20 if name in HF_NAMES else 5):
        for curve, model, opt in zip(curves, (reference, compiled), optimizers):
            before = len(counting.graphs)
            loss = model(**inputs).loss
            assert len(counting.graphs) - before <= 1  # (each call is one graph)
            loss.backward()
            opt.step()
            opt.zero_grad()
            curve.append(loss.item())
    torch.testing.assert_close(
        torch.tensor(curves[1]), torch.tensor(curves[0]), rtol=1e-3, atol=1e-4
    )
    assert curves[1][-1] < curves[1][0]
    assert len(counting.graphs) == TRAINING_GRAPHS.get(name, 1)


def test_wav2vec2_training_is_one_graph_once_hooks_are_in() -> None:
    # The feature encoder sets ``requires_grad = True`` on a view of its input in training:
    # the entry makes that leaf, so training stays one graph with the gradients of eager.
    reference, inputs = build_hf("wav2vec2")
    reference.train()
    trained = copy.deepcopy(reference)
    trained(**inputs)  # installs the output-capturing hooks
    counting = CountingBackend("aot_eager")
    compiled = sapwood.compile(trained, backend=counting)
    for _ in range(2):
        for model in (reference, trained):
            model.zero_grad()
        expected = reference(**inputs).loss
        expected.backward()
        got = compiled(**inputs).loss
        got.backward()
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
        for p, q in zip(trained.parameters(), reference.parameters()):
            assert (p.grad is None) == (q.grad is None)
            if q.grad is not None:
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    assert len(counting.graphs) == 1
    assert not sapwood.explain(trained)(**inputs).breaks


def test_wav2vec2_first_call_installs_its_hooks_in_one_graph() -> None:
    # Transformers installs its output-capturing hooks on the first call, under a lock, and
    # the same forward runs them: one graph, the hooks then in place for real
    reference, inputs = build_hf("wav2vec2")
    reference.train()
    trained = copy.deepcopy(reference)
    report = sapwood.explain(copy.deepcopy(reference))(**inputs)
    assert report.graph_count == 1 and not report.breaks and not report.eager_functions
    sapwood.reset()
    counting = CountingBackend("aot_eager")
    got = sapwood.compile(trained, backend=counting)(**inputs)
    assert len(counting.graphs) == 1
    assert trained.wav2vec2._output_capturing_hooks_installed
    hooked = [m for m in trained.modules() if m._forward_hooks]
    assert hooked
    expected = reference(**inputs)
    torch.testing.assert_close(got.loss, expected.loss, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(trained(**inputs).loss, expected.loss, rtol=1e-4, atol=1e-5)
    assert [type(m) for m in reference.modules() if m._forward_hooks] == [type(m) for m in hooked]


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_gradient_checkpointing_trains_in_one_graph_like_eager(name: str) -> None:
    """``model.gradient_checkpointing_enable()`` (transformers' default use_reentrant=False):
    each checkpointed layer is the body of a ``tag_activation_checkpoint`` in the one graph
    (torch.compile takes several here), and the loss curve is eager's."""
    reference, inputs = build_hf(name)
    reference.train()
    reference.gradient_checkpointing_enable()
    trained = copy.deepcopy(reference)
    counting = CountingBackend("aot_eager")
    compiled = sapwood.compile(trained, backend=counting)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (reference, trained)]
    for _ in range(3):
        losses = []
        for model, opt in zip((reference, compiled), optimizers):
            loss = model(**inputs).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-4, abs=1e-5)
    assert len(counting.graphs) == 1
    checkpoints = [
        n
        for n in counting.graphs[0].graph.nodes
        if n.target is torch.ops.higher_order.tag_activation_checkpoint
    ]
    assert len(checkpoints) == reference.config.num_hidden_layers
