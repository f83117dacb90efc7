"""transformers ``generate()`` with a static cache under reduce-overhead: the trees replay.

The documented fast-generation recipe, ``model.forward = sapwood.compile(model.forward,
mode="reduce-overhead", fullgraph=True)`` and ``generate(..., cache_implementation="static")``:
the decode graph writes the cache in place, so it must be a static input of the tree (it ran
eagerly at every step before), and the prefill graph moves the cache's host position counter to
the GPU, a copy taken out of the capture (it was never recorded before). Runs on the GPU machine; skipped elsewhere with its reason.
"""

from __future__ import annotations

import copy
import gc
import warnings

import pytest
import torch

import sapwood

pytestmark = pytest.mark.gpu

transformers = pytest.importorskip("transformers")


def _model() -> torch.nn.Module:
    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=512,
        max_position_embeddings=256,
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16).eval()


def _generate(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.generate(
            ids,
            max_new_tokens=24,
            min_new_tokens=24,
            do_sample=False,
            cache_implementation="static",
            disable_compile=True,
        )


def test_generate_with_a_static_cache_replays_every_decode_step() -> None:
    import sapwood_cudagraph_trees

    sapwood.reset()
    base = _model()
    default, graphed = copy.deepcopy(base), copy.deepcopy(base)
    default.forward = sapwood.compile(default.forward, fullgraph=True)
    graphed.forward = sapwood.compile(graphed.forward, mode="reduce-overhead", fullgraph=True)
    ids = torch.randint(0, 512, (1, 12), device="cuda")
    expected = _generate(default, ids)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outputs = [_generate(graphed, ids) for _ in range(3)]
    for out in outputs:
        assert torch.equal(out, expected)
    info = sapwood_cudagraph_trees.tree_info(0)
    # the prefill graph (which moves the cache's host position counter to the GPU) and the
    # decode graph are both recorded, and neither ever runs eagerly
    assert len(info.functions) >= 2, info.functions
    for f in info.functions:
        assert f.replays > 0, (f.name, f.recordings, dict(f.fallbacks), f.eager_reason)
        assert not f.fallbacks, (f.name, dict(f.fallbacks), f.eager_reason)
        assert f.eager_reason is None
    # later generate() calls replay their decode steps: 23 steps per call after the first
    assert max(f.replays for f in info.functions) >= 2 * 23 - 2
    mutated = [w for w in caught if "is mutated and is not a static input" in str(w.message)]
    assert not mutated, [str(w.message) for w in mutated]


def test_an_input_written_in_place_is_graphed_and_a_moving_one_stays_correct() -> None:
    import sapwood_cudagraph_trees

    def step(cache: torch.Tensor, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, pos, x)
        return cache.sum(0) * 2

    sapwood.reset()
    gc.collect()  # functions of earlier tests still in the tree are dropped once collected
    earlier = len(sapwood_cudagraph_trees.tree_info(0).functions)
    compiled = sapwood.compile(step, mode="reduce-overhead", fullgraph=True)
    cache, expected_cache = (torch.zeros(8, 4, device="cuda") for _ in range(2))
    for i in range(8):  # one cache tensor, written at each step: recorded once, replayed
        x, pos = torch.randn(1, 4, device="cuda"), torch.tensor([i], device="cuda")
        torch.testing.assert_close(compiled(cache, x, pos), step(expected_cache, x, pos))
        torch.testing.assert_close(cache, expected_cache)
    info = sapwood_cudagraph_trees.tree_info(0)
    (fn,) = info.functions[earlier:]  # the runtime lists functions in the order they came
    assert fn.replays >= 5 and not fn.fallbacks, (fn.replays, dict(fn.fallbacks))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(8):  # a new tensor at each call: recorded again, then eager; never wrong
            fresh, reference = torch.zeros(8, 4, device="cuda"), torch.zeros(8, 4, device="cuda")
            x, pos = torch.randn(1, 4, device="cuda"), torch.tensor([i], device="cuda")
            torch.testing.assert_close(compiled(fresh, x, pos), step(reference, x, pos))
            torch.testing.assert_close(fresh, reference)
