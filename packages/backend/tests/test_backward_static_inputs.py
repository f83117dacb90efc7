"""Which inputs of a backward graph the glue declares static to the tree runtime.

A backward graph's saved parameters and activations stay at one address from step to step;
a user input that the forward saved (token ids, for an embedding's backward) is a new tensor
with each batch. Declared static, it would make the backward graph record again at every
step. The CPU tests read the declaration on AOT autograd's own graphs; the GPU test trains
with a new batch tensor per step and counts recordings.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch import nn
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

import sapwood_backend
from sapwood_backend.cudagraphs import _backward_static_inputs


class Embedder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.head = nn.Linear(8, 16)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.embed(tokens)))


@pytest.fixture(autouse=True)
def _fresh_state() -> None:
    torch._dynamo.reset()
    import sapwood_cudagraph_trees

    sapwood_cudagraph_trees.reset()


def _backward_graph(model: nn.Module, example: torch.Tensor) -> torch.fx.GraphModule:
    graphs: dict[str, torch.fx.GraphModule] = {}

    def compiler(mode: str) -> Any:
        def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
            graphs[mode] = gm
            return make_boxed_func(gm.forward)

        return compile_graph

    backend = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"))
    torch.compile(model, backend=backend)(example).sum().backward()
    return graphs["backward"]


def _placeholders(gm: torch.fx.GraphModule) -> list[str]:
    return [node.name for node in gm.graph.nodes if node.op == "placeholder"]


def test_saved_user_input_is_not_static_when_the_forward_input_was_not() -> None:
    gm = _backward_graph(Embedder(), torch.randint(0, 16, (2, 5)))
    names = _placeholders(gm)
    # the tokens, saved for the embedding's backward: the one integer placeholder
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    (tokens_at,) = [i for i, n in enumerate(placeholders) if n.meta["val"].dtype == torch.int64]
    assert names[tokens_at].startswith("primals_")
    forward_index = int(names[tokens_at][len("primals_") :]) - 1
    # the forward's five inputs (four parameters and the tokens): all static but the tokens
    static = _backward_static_inputs(gm, None, frozenset(set(range(5)) - {forward_index}))
    assert tokens_at not in static
    saved = [i for i, name in enumerate(names) if not name.startswith("tangents")]
    assert static == set(saved) - {tokens_at}
    assert all(not names[i].startswith("tangents") for i in static)


def test_saved_values_stay_static_without_the_forward_declaration() -> None:
    gm = _backward_graph(Embedder(), torch.randint(0, 16, (2, 5)))
    names = _placeholders(gm)
    static = _backward_static_inputs(gm, None, None)
    assert static == {i for i, name in enumerate(names) if not name.startswith("tangents")}


def test_only_the_compilers_candidates_are_declared() -> None:
    gm = _backward_graph(Embedder(), torch.randint(0, 16, (2, 5)))
    assert _backward_static_inputs(gm, [0], frozenset({0, 1, 2, 3, 4})) == {0}


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["reduce-overhead", "cudagraphs"])
def test_a_new_batch_each_step_replays_the_backward(how: str) -> None:
    import sapwood_cudagraph_trees

    torch.manual_seed(0)
    reference = Embedder().cuda()
    trained = copy.deepcopy(reference)
    if how == "reduce-overhead":
        compiled = sapwood_backend.compile(trained, mode="reduce-overhead")
    else:
        compiled = sapwood_backend.compile(trained, backend="cudagraphs")
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (reference, trained)]
    steps = 8
    for _ in range(steps):
        # a new tensor per step, as a data loader gives, while the previous one is still held
        tokens = torch.randint(0, 16, (4, 6), device="cuda")
        for model, opt in zip((reference, compiled), opts):
            loss = model(tokens).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    for p_ref, p_new in zip(reference.parameters(), trained.parameters()):
        torch.testing.assert_close(p_new, p_ref, rtol=1e-4, atol=1e-5)
    info = sapwood_cudagraph_trees.tree_info(0)
    backward = [fn for fn in info.functions if fn.mode == "backward"]
    assert backward, sapwood_cudagraph_trees.render(0)
    for fn in backward:
        # not one recording per step: at most the first path and one with the previous
        # step's loss alive, then replays
        assert fn.recordings <= 2, sapwood_cudagraph_trees.render(0)
        assert fn.replays >= steps - 3, sapwood_cudagraph_trees.render(0)
        assert not fn.fallbacks, sapwood_cudagraph_trees.render(0)
