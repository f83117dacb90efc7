"""Which outputs the glue declares reusable to the tree runtime.

Only outputs that autograd alone sees may come back as the same tensor objects: a forward
graph's saved activations and a backward graph's gradients. The CPU tests read the
declaration AOT autograd's graphs get; the GPU tests train through the trees and check that
the nodes do hand those outputs out again, with eager's results.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

import sapwood_backend
from sapwood_backend.cudagraphs import _reusable_outputs

from .models import model_and_input


@pytest.fixture(autouse=True)
def _fresh_state() -> None:
    torch._dynamo.reset()
    import sapwood_cudagraph_trees

    sapwood_cudagraph_trees.reset()


def _declarations(model: Any, example: torch.Tensor, train: bool) -> dict[str, Any]:
    """Compile ``model`` through AOT autograd, noting each graph's output count and the outputs
    the glue would declare reusable."""
    seen: dict[str, Any] = {}

    def compiler(mode: str) -> Any:
        def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
            output = next(n for n in gm.graph.nodes if n.op == "output")
            seen[mode] = (len(output.args[0]), _reusable_outputs(gm, mode))
            return make_boxed_func(gm.forward)

        return compile_graph

    backend = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
    )
    compiled = torch.compile(model, backend=backend)
    if train:
        compiled(example).sum().backward()
    else:
        with torch.no_grad():
            compiled(example)
    return seen


def test_forward_graph_declares_the_activations_autograd_saves() -> None:
    model, example = model_and_input("mlp")
    count, reusable = _declarations(model, example, train=True)["forward"]
    # one user output first, then the values saved for the backward
    assert reusable == tuple(range(1, count))


def test_forward_graph_keeps_a_mutated_buffer_and_the_user_output_out() -> None:
    model, example = model_and_input("cnn")  # batch norm: running statistics are mutated
    count, reusable = _declarations(model.train(), example, train=True)["forward"]
    assert reusable
    assert 0 not in reusable  # the first outputs are the mutated buffers and the user output
    assert reusable == tuple(range(count - len(reusable), count))


def test_backward_graph_declares_every_gradient() -> None:
    model, example = model_and_input("mlp")
    count, reusable = _declarations(model, example, train=True)["backward"]
    assert reusable == tuple(range(count))


def test_inference_graph_declares_nothing() -> None:
    model, example = model_and_input("mlp")
    _, reusable = _declarations(model.eval(), example, train=False)["inference"]
    assert reusable == ()


def test_forward_graph_outside_aot_autograd_declares_nothing() -> None:
    gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    assert _reusable_outputs(gm, "forward") == ()


def _train_steps(compiled: Any, model: torch.nn.Module, example: torch.Tensor) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(5):
        compiled(example).float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad()


@pytest.mark.gpu
@pytest.mark.parametrize("front_end", ["torch.compile", "sapwood"])
def test_reduce_overhead_training_hands_activations_and_gradients_out_again(
    front_end: str,
) -> None:
    import sapwood_cudagraph_trees

    reference, example = model_and_input("gpt")
    reference, example = reference.cuda(), example.cuda()
    trained = copy.deepcopy(reference)
    if front_end == "sapwood":
        compiled = sapwood_backend.compile(trained, mode="reduce-overhead")
    else:
        backend = sapwood_backend.resolve_backend("inductor", mode="reduce-overhead")
        compiled = torch.compile(trained, backend=backend)
    _train_steps(compiled, trained, example)
    _train_steps(reference, reference, example)
    for p_ref, p_new in zip(reference.parameters(), trained.parameters()):
        torch.testing.assert_close(p_new, p_ref, rtol=1e-3, atol=1e-3)
    info = sapwood_cudagraph_trees.tree_info(0)
    reused = {mode: 0 for mode in ("forward", "backward")}
    for node in info.nodes.values():
        if node.replays and node.mode in reused:
            reused[node.mode] += node.reused_outputs
    assert reused["forward"] > 0 and reused["backward"] > 0, sapwood_cudagraph_trees.render(0)
    for fn in info.functions:
        assert fn.recordings <= 2, sapwood_cudagraph_trees.render(0)
