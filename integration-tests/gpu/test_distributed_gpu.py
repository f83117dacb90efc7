"""sapwood under torch.distributed on one GPU: NCCL with one process, gloo with two.

No machine with two GPUs is at hand, so these tests take what one GPU allows: NCCL process
groups of one rank (DDP and FSDP2 run their whole machinery, reducer, buckets, hooks and
collectives, on a group of one), and two ranks sharing the GPU through gloo, which
all-reduces CUDA tensors through the host (NCCL refuses two ranks on one device). Each test
trains a compiled tiny Llama and its eager twin for five optimizer steps in processes of its
own (see ``distributed_gpu_workers.py``, which checks losses and parameters in every
process) and asserts here on what rank 0 saw.

Runs on the GPU machine through ``nox -s gpu``; skipped elsewhere with its reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch.distributed")

import torch.distributed as dist
from distributed_gpu_workers import Setup, ddp_llama_worker, fsdp_llama_worker
from distributed_workers import STEPS, spawn

pytestmark = pytest.mark.gpu

if not dist.is_available():
    pytest.skip("this torch build has no torch.distributed", allow_module_level=True)

needs_nccl = pytest.mark.skipif(
    not dist.is_nccl_available(), reason="this torch build has no NCCL backend"
)
needs_gloo = pytest.mark.skipif(
    not dist.is_gloo_available(), reason="this torch build has no gloo backend"
)

#: Inductor's first compiles of every bucket piece, forward and backward, in a fresh process
TIMEOUT = 900


def _assert_on_one_pool_per_device(ranks: list[dict[str, Any]], graphs: int) -> None:
    """Each rank's forward and backward graphs of every piece are on its device's one tree,
    replayed there, none runs eagerly, and every CUDA graph of that process lives in one
    private pool."""
    for rank, trees in enumerate(ranks):
        functions = trees["functions"]
        assert [f for f in functions if f["eager_reason"]] == [], f"rank {rank}"
        assert sum(f["mode"] == "forward" for f in functions) == graphs, f"rank {rank}"
        assert sum(f["mode"] == "backward" for f in functions) == graphs, f"rank {rank}"
        assert all(f["replays"] > 0 for f in functions), f"rank {rank}: {functions}"
        pools = trees["private_pools"]
        assert len(pools) == 1, f"rank {rank}: private pools {pools}"
        assert list(pools.values()) == [trees["pool_reserved_bytes"]], f"rank {rank}"
        assert trees["pool_reserved_bytes"] > 0


@needs_nccl
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_compile_ddp_nccl_trains_like_eager_with_graph_cut_at_buckets(
    tmp_path: Path, mode: str | None
) -> None:
    setup = Setup(process_group="nccl", mode=mode)
    seen = spawn(ddp_llama_worker, tmp_path / "ddp.json", setup, world=1, timeout=TIMEOUT)
    assert len(seen["losses"]) == STEPS
    # one traced graph, cut into one piece per gradient bucket, each piece compiled once
    assert seen["explain_graphs"] == 1
    assert seen["split"], seen["explain"]
    pieces = len(seen["bucket_params"])
    assert pieces >= 2
    assert seen["graphs"] == pieces
    assert any("head" in name for name in seen["bucket_params"][-1])
    assert any("embed" in name for name in seen["bucket_params"][0])
    if mode == "reduce-overhead":
        _assert_on_one_pool_per_device(seen["trees"], pieces)


@needs_nccl
def test_compile_ddp_nccl_reduce_overhead_without_split_is_one_graph(tmp_path: Path) -> None:
    setup = Setup(process_group="nccl", mode="reduce-overhead", ddp_split=False)
    seen = spawn(ddp_llama_worker, tmp_path / "ddp.json", setup, world=1, timeout=TIMEOUT)
    assert len(seen["losses"]) == STEPS
    assert seen["graphs"] == 1
    assert not seen["split"]
    _assert_on_one_pool_per_device(seen["trees"], 1)


@needs_nccl
def test_compile_ddp_reduce_overhead_records_each_graph_once(tmp_path: Path) -> None:
    """Steady state under reduce-overhead: after the warm-up step and the recording step,
    every later step replays the forward and the backward graph, also when each step's batch
    is a new tensor (a prefetching loader holds the next batch, so the addresses differ)."""
    setup = Setup(process_group="nccl", mode="reduce-overhead", ddp_split=False, prefetch=True)
    seen = spawn(ddp_llama_worker, tmp_path / "ddp.json", setup, world=1, timeout=TIMEOUT)
    functions = seen["trees"][0]["functions"]
    assert sorted(f["mode"] for f in functions) == ["backward", "forward"]
    for f in functions:
        assert (f["recordings"], f["replays"]) == (1, STEPS - 2), f


@needs_gloo
def test_two_ranks_on_one_gpu_reduce_overhead_gradients_survive_replays(tmp_path: Path) -> None:
    """Gradients that DDP's reducer reads (and gloo copies to the host, asynchronously) come
    from CUDA graph replays: a later replay must not overwrite them while DDP still reads
    them, or the two ranks' averaged gradients, and so the parameters, would drift from
    eager DDP's."""
    setup = Setup(process_group="gloo", mode="reduce-overhead")
    seen = spawn(ddp_llama_worker, tmp_path / "ddp.json", setup, world=2, timeout=TIMEOUT)
    assert len(seen["losses"]) == STEPS
    assert seen["split"], seen["explain"]
    pieces = len(seen["bucket_params"])
    assert seen["graphs"] == pieces
    assert len(seen["trees"]) == 2
    _assert_on_one_pool_per_device(seen["trees"], pieces)


@needs_nccl
def test_fsdp2_nccl_blocks_compiled_one_by_one(tmp_path: Path) -> None:
    setup = Setup(process_group="nccl")
    seen = spawn(fsdp_llama_worker, tmp_path / "fsdp.json", setup, world=1, timeout=TIMEOUT)
    assert len(seen["losses"]) == STEPS
    assert 1 <= seen["graphs"] <= 2  # the two identical blocks share their trace
