"""A CPU input that a graph only copies to another device is copied before the graph.

A CUDA graph cannot capture a copy from pageable host memory; transformers' static cache moves
its position counter to the GPU on its first (compiled) call, so the prefill graph was never
captured. Without a GPU these tests use the ``meta`` device as the other device: what they
check is the rewrite (which inputs go, what the graph takes instead, what the prologue makes),
and the GPU tests check the values and the recording.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import sapwood
import sapwood_cudagraph_trees
from sapwood_backend import cudagraphs
from sapwood_backend.host_copies import hoist_host_copies


def _graph_of(fn: Any, *inputs: Any) -> tuple[torch.fx.GraphModule, list[Any]]:
    caught: list[tuple[torch.fx.GraphModule, list[Any]]] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        caught.append((gm, list(example_inputs)))
        return gm.forward

    sapwood.reset()
    sapwood.compile(fn, backend=keep, fullgraph=True)(*inputs)
    sapwood.reset()
    assert len(caught) == 1
    return caught[0]


def _placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [node for node in gm.graph.nodes if node.op == "placeholder"]


def test_a_counter_moved_off_the_host_and_updated_becomes_a_copied_input() -> None:
    def step(x: torch.Tensor, counter: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        moved = counter.to("meta")
        moved.add_(x.shape[0])
        return x * 2, moved

    x, counter = torch.ones(3, device="meta"), torch.tensor(5)
    gm, inputs = _graph_of(step, x, counter)
    where = next(i for i, value in enumerate(inputs) if value is counter)
    hoisted = hoist_host_copies(gm, inputs)
    assert hoisted is not None
    assert hoisted.removed == frozenset({where})
    assert all(value.device.type == "meta" for value in hoisted.example_inputs)
    assert len(_placeholders(hoisted.gm)) == len(hoisted.example_inputs) == 2
    # the graph writes its own clone of the copy, never the input it was handed
    targets = [node.target for node in hoisted.gm.graph.nodes if node.op == "call_method"]
    assert "clone" in targets and "to" not in targets
    made = hoisted.inputs_for(inputs)
    assert made[0] is x and made[1].device.type == "meta" and made[1].dtype == counter.dtype
    out, moved = hoisted.wrap(hoisted.gm.forward)(*inputs)
    assert out.device.type == moved.device.type == "meta" and moved.shape == ()
    assert counter.item() == 5


def test_each_copy_of_one_input_is_its_own_input_with_its_own_arguments() -> None:
    def f(x: torch.Tensor, host: torch.Tensor) -> torch.Tensor:
        return x + host.to("meta") + host.to(device="meta", dtype=torch.float64).sum()

    x, host = torch.ones(4, device="meta"), torch.arange(4)
    gm, inputs = _graph_of(f, x, host)
    hoisted = hoist_host_copies(gm, inputs)
    assert hoisted is not None
    made = hoisted.inputs_for(inputs)
    assert [value.dtype for value in made] == [torch.float32, torch.int64, torch.float64]
    assert all(value.device.type == "meta" for value in made)
    names = [node.target for node in _placeholders(hoisted.gm)]
    assert len(set(names)) == len(names) == 3


@pytest.mark.parametrize(
    "use",
    [
        pytest.param(lambda x, host: x + (host + 1).to("meta"), id="read-on-the-host"),
        pytest.param(lambda x, host: x + host.add_(1).to("meta"), id="written-on-the-host"),
        pytest.param(lambda x, host: x + host[1:].to("meta").sum(), id="viewed-on-the-host"),
        pytest.param(lambda x, host: x + host.to(x), id="like-a-graph-tensor"),
    ],
)
def test_a_host_input_used_otherwise_stays_in_the_graph(use: Any) -> None:
    x, host = torch.ones(3, device="meta"), torch.arange(3)
    gm, inputs = _graph_of(use, x, host)
    before = str(gm.graph)
    assert hoist_host_copies(gm, inputs) is None
    assert str(gm.graph) == before


def test_a_host_tensor_that_needs_grad_stays_in_the_graph() -> None:
    x, host = torch.ones(3, device="meta"), torch.ones(3, requires_grad=True)
    gm, inputs = _graph_of(lambda x, host: x + host.to("meta"), x, host)
    assert hoist_host_copies(gm, inputs) is None


class Counter(nn.Module):
    def forward(self, x: torch.Tensor, counter: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        moved = counter.to(x.device.type)
        moved.add_(1)
        return x.sin(), moved


def test_the_tree_is_never_handed_the_host_tensor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through ``sapwood.compile(mode=...)`` with the ``cudagraphs`` backend: what reaches the
    tree runtime is the copy, and the caller still gets a new tensor and its own counter."""
    handed: list[list[Any]] = []

    def record(model: Any, example_inputs: Any, static_input_idxs: Any = (), **kwargs: Any):
        handed.append(list(example_inputs))
        return model

    monkeypatch.setattr(cudagraphs, "_cuda_device_index", lambda inputs: 0)
    monkeypatch.setattr(sapwood_cudagraph_trees, "cudagraphify", record)
    sapwood.reset()
    try:
        compiled = sapwood.compile(Counter(), backend="cudagraphs", fullgraph=True)
        x, counter = torch.ones(2, device="meta"), torch.tensor(7)
        out, moved = compiled(x, counter)
    finally:
        sapwood.reset()
    assert handed and all(
        value.device.type != "cpu"
        for inputs in handed
        for value in inputs
        if isinstance(value, torch.Tensor)
    )
    assert out.device.type == moved.device.type == "meta"
    assert counter.item() == 7
