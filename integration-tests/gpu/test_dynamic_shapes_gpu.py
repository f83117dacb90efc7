"""Dynamic shapes on the GPU: Inductor and reduce-overhead with varying sizes.

Runs on the GPU machine through ``nox -s gpu``; skipped elsewhere with its reason.

The tree runtime records one CUDA graph per concrete size (the sizes are int inputs of the
symbolic graph, so they are part of its key) and keeps at most ``max_recordings`` (8) graphs
per function, evicting the least recently used; the pool is shared, so cycling through more
sizes than that must not grow its memory.
"""

from __future__ import annotations

import pytest
import torch
from zoo import build

import sapwood

pytestmark = pytest.mark.gpu

LENGTHS = [4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26]  # more sizes than max_recordings
MAX_RECORDINGS = 8


@pytest.fixture(autouse=True)
def _fresh() -> None:
    sapwood.reset()


def _run_lengths(compiled: object, model: torch.nn.Module) -> None:
    with torch.no_grad():
        for length in LENGTHS:
            tokens = torch.randint(0, 64, (2, length), device="cuda")
            for _ in range(3):  # warm-up, record, replay
                got = compiled(tokens)  # type: ignore[operator]
                torch.testing.assert_close(got, model(tokens), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_varying_lengths_match_eager(mode: str | None) -> None:
    model, _ = build("gpt", "cuda")
    model.eval()
    compiled = sapwood.compile(model, mode=mode)
    _run_lengths(compiled, model)


def test_reduce_overhead_keeps_graphs_and_memory_bounded_while_sizes_vary() -> None:
    import sapwood_cudagraph_trees

    model, _ = build("gpt", "cuda")
    model.eval()
    compiled = sapwood.compile(model, mode="reduce-overhead")
    _run_lengths(compiled, model)
    first = sapwood_cudagraph_trees.tree_info(0)
    _run_lengths(compiled, model)  # every size again: evicted graphs are recorded again
    second = sapwood_cudagraph_trees.tree_info(0)
    assert first.functions and all(f.live_recordings <= MAX_RECORDINGS for f in second.functions), (
        second.functions
    )
    assert sum(f.replays for f in second.functions) > 0
    # the pool is reused across sizes: a second round of the same sizes does not grow it
    assert second.pool_reserved_bytes <= first.pool_reserved_bytes * 1.25 + (4 << 20)
