"""The per-block recipe on a real model: each decoder layer of a tiny Llama compiled on its own.

Layers of one class and one structure share one trace (sapwood counts captures through its
event listener); each layer still computes with its own weights, equal to eager, and a deep
copy of a compiled layer reuses the trace.
"""

from __future__ import annotations

import copy

import pytest
import torch
from zoo import tiny_llama_layers

import sapwood
from sapwood_tracer.api import events

pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def _fresh() -> None:
    sapwood.reset()


@pytest.fixture
def captures():
    seen: list[str] = []
    stop = events.listen(
        lambda kind, data: seen.append(data["code"].co_qualname) if kind == "capture" else None
    )
    yield seen
    stop()


def _tensor(out):
    return out[0] if isinstance(out, tuple) else out


def test_eight_llama_layers_compiled_separately_trace_at_most_twice(captures):
    layers, hidden, kwargs = tiny_llama_layers(8)
    compiled = [sapwood.compile(layer, backend="eager") for layer in layers]
    with torch.no_grad():
        x = y = hidden
        for layer, c in zip(layers, compiled):
            x = _tensor(c(x, **kwargs))
            y = _tensor(layer(y, **kwargs))
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)
    assert 1 <= len(captures) <= 2


def test_a_deep_copied_llama_layer_does_not_recompile(captures):
    (layer,), hidden, kwargs = tiny_llama_layers(1)
    compiled = sapwood.compile(layer, backend="eager")
    with torch.no_grad():
        compiled(hidden, **kwargs)
        first = len(captures)
        twin = copy.deepcopy(layer)
        twin.mlp.down_proj.weight.mul_(2)
        compiled_twin = sapwood.compile(twin, backend="eager")
        for _ in range(3):
            torch.testing.assert_close(
                _tensor(compiled_twin(hidden, **kwargs)), _tensor(twin(hidden, **kwargs))
            )
    assert len(captures) == first
