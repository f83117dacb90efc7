"""sapwood under torch.distributed on the CPU: gloo, two processes spawned by each test.

Each test trains a compiled wrapper and its eager twin for five optimizer steps in two
processes (see ``distributed_workers.py``, which also checks losses and parameters in every
process) and asserts here on what rank 0 saw: losses, graph counts, the cut at DDP's
gradient buckets, and that a bucket's all-reduce starts before the backward is over.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch.distributed")

import torch.distributed as dist
from distributed_workers import STEPS, ddp_worker, fsdp_worker, spawn, tp_worker

if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("this torch build has no gloo backend", allow_module_level=True)


def test_compile_ddp_trains_like_eager_with_graph_cut_at_buckets(tmp_path: Path) -> None:
    seen = spawn(ddp_worker, tmp_path / "ddp.json", True)
    assert len(seen["losses"]) == STEPS
    # one traced graph, cut into one piece per gradient bucket, each piece compiled once
    assert seen["explain_graphs"] == 1
    assert seen["split"]
    pieces = len(seen["bucket_params"])
    assert pieces >= 3
    assert seen["graphs"] == pieces
    # the pieces' parameters, in graph order: the head's in the last piece, the embedding's first
    assert any("head" in name for name in seen["bucket_params"][-1])
    assert any("embed" in name for name in seen["bucket_params"][0])
    assert "split at gradient buckets" in seen["explain"]
    # DDP's own forward is reported as eager, with the reason
    assert any("DistributedDataParallel" in fn for fn in seen["eager"])
    assert seen["state_dict_keys"] == ["module.embed.weight"]
    # overlap: in a step after DDP rebuilt its buckets, some all-reduce starts before the
    # backward reaches the model's input
    events = seen["last_step_events"]
    assert "input grad" in events
    assert events.index("input grad") > 0
    assert events[0].startswith("allreduce")


def test_compile_ddp_without_split_is_one_graph(tmp_path: Path) -> None:
    seen = spawn(ddp_worker, tmp_path / "ddp.json", False)
    assert len(seen["losses"]) == STEPS
    assert seen["graphs"] == 1
    assert seen["explain_graphs"] == 1
    assert not seen["split"]
    assert "split at gradient buckets" not in seen["explain"]


@pytest.mark.parametrize("recipe", ["per_block", "shard_then_compile"])
def test_fsdp2_blocks_compiled_one_by_one(tmp_path: Path, recipe: str) -> None:
    seen = spawn(fsdp_worker, tmp_path / "fsdp.json", recipe)
    assert len(seen["losses"]) == STEPS
    assert 1 <= seen["graphs"] <= 4  # one trace per block at most


def test_fsdp2_whole_model_compile_compiles_its_blocks(tmp_path: Path) -> None:
    seen = spawn(fsdp_worker, tmp_path / "fsdp.json", "whole_model")
    assert len(seen["losses"]) == STEPS
    assert "Block.forward" in seen["functions"]
    assert "Net.forward" in seen["functions"] or any(
        f.startswith("Net.forward") for f in seen["functions"]
    )
    assert any("sharded by FSDP2" in reason for reason in seen["break_reasons"])
    assert seen["graphs"] >= 2  # the root's own code and the blocks


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_tensor_parallel_mlp_on_two_ranks_is_one_graph_like_eager(
    tmp_path: Path, backend: str
) -> None:
    # (the worker compares outputs, input gradients and each rank's weight shards' gradients
    # with the eager twin at every step)
    seen = spawn(tp_worker, tmp_path / "tp.json", backend)
    assert seen["graphs"] == 1
    assert seen["explain_graphs"] == 1
    assert seen["break_reasons"] == []
