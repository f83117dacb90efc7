"""Worker processes of the distributed GPU tests (``gpu/test_distributed_gpu.py``).

Same shape as ``distributed_workers.py``, whose :func:`~distributed_workers.spawn` starts
them: each worker joins a process group, trains a compiled wrapper of a tiny Llama and an
eager twin of it for a few optimizer steps on the same tokens, checks in-process that the
losses and parameters stay equal, and rank 0 writes what it saw as JSON for the test.

The process-group backend, the device and the sapwood backend and mode are arguments (a
:class:`Setup`), so the same code runs with NCCL or gloo on a GPU and, to check its logic on
a machine without one, with gloo on the CPU. Every rank uses CUDA device 0: the GPU tests
run one process (NCCL) or two processes sharing one GPU (gloo, which all-reduces CUDA
tensors through the host; NCCL refuses two ranks on one device).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from distributed_workers import STEPS, _assert_same_params, _init
from torch import nn
from zoo import TinyLlama

#: the tiny Llama of the tests: about 460 KB of fp32 parameters in 2 blocks
LLAMA = {"vocab": 128, "dim": 64, "heads": 4, "layers": 2, "hidden": 172}
BATCH, TOKENS = 4, 16


@dataclasses.dataclass(frozen=True)
class Setup:
    """How a worker runs: process group, device, and what ``sapwood.compile`` is given."""

    process_group: str = "nccl"
    device: str = "cuda"
    backend: str = "inductor"
    mode: str | None = None
    ddp_split: bool = True
    #: about 100 KB: 4 or more gradient buckets for :data:`LLAMA`
    bucket_cap_mb: float = 0.1
    #: hold the next batch while a step runs, as a prefetching data loader does, so every
    #: step's batch is a tensor at a new address
    prefetch: bool = False

    def torch_device(self) -> torch.device:
        if self.device == "cuda":
            torch.cuda.set_device(0)
            return torch.device("cuda", 0)
        return torch.device(self.device)

    def tolerances(self) -> dict[str, float]:
        """Inductor on a GPU reorders reductions and picks other kernels than eager's."""
        if self.device == "cuda" and self.backend == "inductor":
            return {"rtol": 1e-3, "atol": 1e-4}
        return {"rtol": 1e-5, "atol": 1e-6}


def _tokens(rank: int, step: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * rank + step)
    ids = torch.randint(0, LLAMA["vocab"], (BATCH, TOKENS + 1), generator=g)
    return ids[:, :-1].to(device), ids[:, 1:].to(device)


def _train(
    model: Callable[[torch.Tensor], torch.Tensor],
    opt: torch.optim.Optimizer,
    rank: int,
    device: torch.device,
    prefetch: bool = False,
) -> list[float]:
    """``STEPS`` optimizer steps of next-token cross entropy; the losses."""
    losses = []
    batch = _tokens(rank, 0, device)
    for step in range(STEPS):
        tokens, targets = batch
        if prefetch and step + 1 < STEPS:
            batch = _tokens(rank, step + 1, device)
        logits = model(tokens)
        loss = nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        )
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        del tokens, targets, logits, loss
        if not prefetch and step + 1 < STEPS:
            batch = _tokens(rank, step + 1, device)
    return losses


@contextlib.contextmanager
def counting_graphs() -> Iterator[list[int]]:
    """While open, ``sapwood.compile`` hands its graphs to the backend it resolved (the named
    backend under its mode, unchanged) through a counter; ``count[0]`` is how many graphs it
    was handed so far, also after the block closes. Only the resolution is wrapped, so the
    model compiles as the user's call would (generations, trees and all)."""
    import sapwood_backend.entry as entry

    count = [0]
    resolve = entry.resolve_backend

    def counting_resolve(*args: Any, **kwargs: Any) -> Any:
        inner = resolve(*args, **kwargs)

        def counted(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
            count[0] += 1
            return inner(gm, example_inputs)

        counted.__name__ = getattr(inner, "__name__", type(inner).__name__)
        return counted

    entry.resolve_backend = counting_resolve
    try:
        yield count
    finally:
        entry.resolve_backend = resolve


def _tree_report(device: torch.device) -> dict[str, Any]:
    """What sapwood's CUDA graph trees hold on ``device`` after training, and the private
    memory pools the caching allocator knows of (sapwood's trees keep one per device)."""
    if device.type != "cuda":
        return {}
    import sapwood_cudagraph_trees

    info = sapwood_cudagraph_trees.tree_info(device.index)
    private = {}
    for segment in torch.cuda.memory_snapshot():
        pool = tuple(segment["segment_pool_id"])
        if pool != (0, 0):
            private[str(pool)] = private.get(str(pool), 0) + segment["total_size"]
    return {
        "functions": [
            {
                "mode": f.mode,
                "recordings": f.recordings,
                "replays": f.replays,
                "eager_reason": f.eager_reason,
                "fallbacks": f.fallbacks,
            }
            for f in info.functions
        ],
        "nodes": len(info.nodes),
        "pool_reserved_bytes": info.pool_reserved_bytes,
        "private_pools": private,
    }


def _gather(value: Any) -> list[Any]:
    """``value`` of every rank, in rank order."""
    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, value)
    return everyone


def ddp_llama_worker(rank: int, world: int, port: int, out: str, setup: Setup) -> None:
    """``DDP(model)`` eager vs ``sapwood.compile(DDP(model), backend=..., mode=...)``."""
    import sapwood

    _init(rank, world, port, setup.process_group)
    try:
        device = setup.torch_device()
        torch.manual_seed(0)
        reference = TinyLlama(**LLAMA).to(device)
        twin = copy.deepcopy(reference)
        ids = [device.index] if device.type == "cuda" else None
        cap = setup.bucket_cap_mb
        eager = nn.parallel.DistributedDataParallel(reference, device_ids=ids, bucket_cap_mb=cap)
        wrapped = nn.parallel.DistributedDataParallel(twin, device_ids=ids, bucket_cap_mb=cap)
        with counting_graphs() as graphs:
            compiled = sapwood.compile(
                wrapped, backend=setup.backend, mode=setup.mode, ddp_split=setup.ddp_split
            )
        opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
        opt_new = torch.optim.SGD(twin.parameters(), lr=0.1)
        losses_ref = _train(eager, opt_ref, rank, device, setup.prefetch)
        losses_new = _train(compiled, opt_new, rank, device, setup.prefetch)
        if device.type == "cuda":
            torch.cuda.synchronize()
        tolerances = setup.tolerances()
        torch.testing.assert_close(losses_new, losses_ref, **tolerances)
        _assert_same_params(reference, twin, **tolerances)
        trees = _gather(_tree_report(device))
        with torch.no_grad():
            report = sapwood.explain(wrapped, ddp_split=setup.ddp_split)(
                _tokens(rank, 0, device)[0]
            )
        plan = report.graphs[0].buckets if report.graphs else None
        if rank == 0:
            result = {
                "losses": losses_new,
                "losses_eager": losses_ref,
                "graphs": graphs[0],
                "explain_graphs": report.graph_count,
                "split": bool(plan is not None and plan.split),
                "bucket_params": [list(b.params) for b in plan.buckets] if plan else [],
                "explain": str(report),
                "trees": trees,
            }
            Path(out).write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def fsdp_llama_worker(rank: int, world: int, port: int, out: str, setup: Setup) -> None:
    """FSDP2 eager vs each block compiled (``sapwood.compile(block)``), then ``fully_shard``."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    import sapwood

    _init(rank, world, port, setup.process_group)
    try:
        device = setup.torch_device()
        mesh = init_device_mesh(device.type, (world,))
        torch.manual_seed(0)
        reference = TinyLlama(**LLAMA).to(device)
        twin = copy.deepcopy(reference)
        for block in reference.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(reference, mesh=mesh)
        with counting_graphs() as graphs:
            for i, block in enumerate(twin.blocks):
                compiled_block = sapwood.compile(block, backend=setup.backend, mode=setup.mode)
                fully_shard(compiled_block, mesh=mesh)
                twin.blocks[i] = compiled_block
        fully_shard(twin, mesh=mesh)
        opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
        opt_new = torch.optim.SGD(twin.parameters(), lr=0.1)
        losses_ref = _train(reference, opt_ref, rank, device)
        losses_new = _train(twin, opt_new, rank, device)
        tolerances = setup.tolerances()
        torch.testing.assert_close(losses_new, losses_ref, **tolerances)
        _assert_same_params(reference, twin, **tolerances)
        if rank == 0:
            result = {"losses": losses_new, "losses_eager": losses_ref, "graphs": graphs[0]}
            Path(out).write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()
