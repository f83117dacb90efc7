"""Inputs a graph writes in place are static inputs of the tree runtime.

transformers' static key/value cache is created inside the compiled prefill (its
``mark_static_address`` is skipped while compiling) and then written in place by every decode
step. The tree runtime copies a non-static input into a buffer of its own, where a write would
be lost, so it runs such a graph eagerly: ``generate()`` under reduce-overhead never replayed.
The glue now declares every input the compiled graph writes static (read and written at the
caller's address, checked at each replay).

These CPU tests read the declaration without a GPU: the device lookup answers device 0 and
``cudagraphify`` records its arguments and returns the compiled function unchanged.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import sapwood
import sapwood_cudagraph_trees
from sapwood_backend import cudagraphs


@pytest.fixture
def declared(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def record(model: Any, example_inputs: Any, static_input_idxs: Any = (), **kwargs: Any):
        calls.append(
            {
                "inputs": list(example_inputs),
                "static": set(static_input_idxs),
                "mutated": set(kwargs.get("mutated_input_idxs", ())),
                "mode": kwargs["mode"],
            }
        )
        return model

    monkeypatch.setattr(cudagraphs, "_cuda_device_index", lambda inputs: 0)
    monkeypatch.setattr(sapwood_cudagraph_trees, "cudagraphify", record)
    sapwood.reset()
    torch._dynamo.reset()
    yield calls
    sapwood.reset()


class Cache(nn.Module):
    """A module whose forward writes a tensor it was given (not a buffer) in place."""

    def forward(self, x: torch.Tensor, store: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        store.index_copy_(0, pos, x)
        return store.sum(0) * 2


def test_an_input_written_in_place_is_declared_static(declared) -> None:
    model = Cache()
    compiled = sapwood.compile(model, mode="reduce-overhead", fullgraph=True)
    store, expected_store = torch.zeros(4, 3), torch.zeros(4, 3)
    for i in range(3):
        x, pos = torch.randn(1, 3), torch.tensor([i])
        got, expected = compiled(x, store, pos), model(x, expected_store, pos)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(store, expected_store)
    inference = [c for c in declared if c["mode"] == "inference"]
    assert len(inference) == 1
    call = inference[0]
    assert call["mutated"], "the write into `store` was not reported"
    assert call["mutated"] <= call["static"]
    (index,) = call["mutated"]
    assert tuple(call["inputs"][index].shape) == (4, 3)


def test_a_static_cache_of_generate_is_declared_static(declared) -> None:
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        vocab_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 64, (1, 5))
    options = {"max_new_tokens": 4, "do_sample": False, "cache_implementation": "static"}
    options["disable_compile"] = True
    expected = model.generate(ids, **options)
    model.forward = sapwood.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    got = model.generate(ids, **options)
    assert torch.equal(got, expected)
    writing = [c for c in declared if c["mode"] == "inference" and c["mutated"]]
    for call in writing:  # prefill (the lengths) and decode (the lengths, keys and values)
        assert call["mutated"] <= call["static"]
    # the decode graph writes the keys and values of both layers in place
    caches = [[i for i in call["mutated"] if call["inputs"][i].dim() == 4] for call in writing]
    assert any(len(found) == 4 for found in caches), caches
