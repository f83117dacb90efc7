"""Worker processes of the distributed tests (``cpu/test_distributed.py``), and the process
machinery (:func:`spawn`) that ``distributed_gpu_workers.py`` shares.

They live here, not in the test module, because the tests spawn processes that import the
worker by module name, and pytest's ``importlib`` import mode gives test modules names no
other process can import. Each worker joins a gloo process group of ``world`` processes,
trains a compiled wrapper and an eager twin of it for a few optimizer steps on the same data,
checks in-process that losses and parameters stay equal, and rank 0 writes what it saw
(losses, graph counts, bucket plans, event orders) as JSON for the test to assert on.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

STEPS = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(
    worker: Callable[..., None], out: Path, *args: Any, world: int = 2, timeout: float = 120
) -> dict[str, Any]:
    """Run ``worker(rank, world, port, out, *args)`` in ``world`` processes; the JSON that
    rank 0 wrote to ``out``. A worker's exception is raised here; a hang ends at ``timeout``.

    The processes come from a fork server that imported torch and sapwood once (a spawned
    process imports torch again, seconds on CI's two cores), and that never ran autograd:
    forking the test process itself is refused once its autograd threads started (the CUDA
    builds of torch start them)."""
    port = free_port()
    mp.set_forkserver_preload(["torch", "sapwood", "distributed_workers"])
    context = mp.start_processes(
        worker,
        args=(world, port, str(out), *args),
        nprocs=world,
        join=False,
        start_method="forkserver",
    )
    deadline = time.monotonic() + timeout
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                if process.is_alive():
                    process.terminate()
            raise TimeoutError(f"{worker.__name__} did not finish in {timeout} s")
    return json.loads(Path(out).read_text())


def _init(rank: int, world: int, port: int, backend: str = "gloo") -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group(backend, rank=rank, world_size=world)


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.fc(self.norm(x)))


class Net(nn.Module):
    """Stacked blocks and a head: big enough for several gradient buckets at a small cap."""

    def __init__(self, width: int = 32, depth: int = 4) -> None:
        super().__init__()
        self.embed = nn.Linear(8, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h).sum(-1)


def _batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(6, 8, generator=g), torch.randn(6, generator=g)


def _train(
    model: Callable[[torch.Tensor], torch.Tensor],
    opt: torch.optim.Optimizer,
    rank: int,
    on_step: Callable[[], None] | None = None,
) -> list[float]:
    losses = []
    for step in range(STEPS):
        x, y = _batch(rank, step)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if on_step is not None:
            on_step()
    return losses


def _assert_same_params(a: nn.Module, b: nn.Module, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        p_full = p.full_tensor() if hasattr(p, "full_tensor") else p
        q_full = q.full_tensor() if hasattr(q, "full_tensor") else q
        torch.testing.assert_close(p_full, q_full, rtol=rtol, atol=atol, msg=name)


class _Counting:
    """A sapwood backend by name that counts the graphs it compiles."""

    def __init__(self, name: str) -> None:
        import sapwood_backend

        self.inner = sapwood_backend.lookup_backend(name)
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.graphs += 1
        return self.inner(gm, example_inputs)


def ddp_worker(rank: int, world: int, port: int, out: str, ddp_split: bool) -> None:
    """DDP(model) eager vs sapwood.compile(DDP(model)) (aot_eager), small buckets."""
    import sapwood

    _init(rank, world, port)
    try:
        torch.manual_seed(0)
        reference = Net()
        twin = copy.deepcopy(reference)
        cap_mb = 6000 / 2**20  # about two blocks' parameters per bucket
        eager = nn.parallel.DistributedDataParallel(reference, bucket_cap_mb=cap_mb)
        wrapped = nn.parallel.DistributedDataParallel(twin, bucket_cap_mb=cap_mb)
        counting = _Counting("aot_eager")
        compiled = sapwood.compile(wrapped, backend=counting, ddp_split=ddp_split)

        # which of the compiled run's all-reduces start before the backward reaches the input
        events: list[str] = []

        def recording_hook(state, bucket):  # type: ignore[no-untyped-def]  # (DDP checks annotations)
            events.append(f"allreduce {bucket.index()}")
            work = dist.all_reduce(bucket.buffer() / world, async_op=True)
            return work.get_future().then(lambda fut: fut.value()[0])

        wrapped.register_comm_hook(None, recording_hook)

        def traced_input(x: torch.Tensor) -> torch.Tensor:
            x = x.detach().requires_grad_()
            x.register_hook(lambda g: events.append("input grad"))
            return compiled(x)

        opt_ref = torch.optim.SGD(reference.parameters(), lr=0.05)
        opt_new = torch.optim.SGD(twin.parameters(), lr=0.05)
        losses_ref = _train(eager, opt_ref, rank)
        marks: list[int] = []
        losses_new = _train(traced_input, opt_new, rank, on_step=lambda: marks.append(len(events)))
        torch.testing.assert_close(losses_new, losses_ref, rtol=1e-5, atol=1e-6)
        _assert_same_params(reference, twin)
        last_step = events[marks[-2] : marks[-1]]  # after DDP rebuilt its buckets
        with torch.no_grad():
            report = sapwood.explain(wrapped, ddp_split=ddp_split)(_batch(rank, 0)[0])
        plan = report.graphs[0].buckets
        if rank == 0:
            result = {
                "losses": losses_new,
                "graphs": counting.graphs,
                "explain_graphs": report.graph_count,
                "split": bool(plan is not None and plan.split),
                "bucket_params": [list(b.params) for b in plan.buckets] if plan else [],
                "eager": [fn for fn, _ in report.eager_functions],
                "explain": str(report),
                "last_step_events": last_step,
                "state_dict_keys": list(compiled.state_dict())[:1],
            }
            Path(out).write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def fsdp_worker(rank: int, world: int, port: int, out: str, recipe: str) -> None:
    """FSDP2 eager vs compiled: ``per_block`` (compile each block, then fully_shard it),
    ``shard_then_compile`` (fully_shard each block, then compile it) or ``whole_model``
    (fully_shard the blocks and the root, then compile the root)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    import sapwood

    _init(rank, world, port)
    try:
        mesh = init_device_mesh("cpu", (world,))
        torch.manual_seed(0)
        reference = Net()
        twin = copy.deepcopy(reference)
        for block in reference.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(reference, mesh=mesh)
        counting = _Counting("aot_eager")
        if recipe == "per_block":
            for i, block in enumerate(twin.blocks):
                compiled_block = sapwood.compile(block, backend=counting)
                fully_shard(compiled_block, mesh=mesh)
                twin.blocks[i] = compiled_block
            fully_shard(twin, mesh=mesh)
            model: Callable[[torch.Tensor], torch.Tensor] = twin
        elif recipe == "shard_then_compile":
            for i, block in enumerate(twin.blocks):
                fully_shard(block, mesh=mesh)
                twin.blocks[i] = sapwood.compile(block, backend=counting)
            fully_shard(twin, mesh=mesh)
            model = twin
        else:
            for block in twin.blocks:
                fully_shard(block, mesh=mesh)
            fully_shard(twin, mesh=mesh)
            model = sapwood.compile(twin, backend=counting)
        opt_ref = torch.optim.SGD(reference.parameters(), lr=0.05)
        opt_new = torch.optim.SGD(twin.parameters(), lr=0.05)
        losses_ref = _train(reference, opt_ref, rank)
        losses_new = _train(model, opt_new, rank)
        torch.testing.assert_close(losses_new, losses_ref, rtol=1e-5, atol=1e-6)
        _assert_same_params(reference, twin)
        result: dict[str, Any] = {"losses": losses_new, "graphs": counting.graphs}
        if recipe == "whole_model":
            with torch.no_grad():
                report = sapwood.explain(twin)(_batch(rank, 0)[0])
            result["explain_graphs"] = report.graph_count
            result["functions"] = sorted({g.function for g in report.graphs})
            result["break_reasons"] = [b.reason for b in report.breaks]
        if rank == 0:
            Path(out).write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


class _TPMlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


def tp_worker(rank: int, world: int, port: int, out: str, backend: str) -> None:
    """Tensor parallelism (``parallelize_module``: colwise then rowwise Linear) compiled
    against its eager twin: outputs, input gradients and sharded weight gradients per step."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    import sapwood

    _init(rank, world, port)
    try:
        mesh = init_device_mesh("cpu", (world,))
        torch.manual_seed(0)
        reference = _TPMlp()
        twin = copy.deepcopy(reference)
        plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
        parallelize_module(reference, mesh, plan)
        parallelize_module(twin, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
        counting = _Counting(backend)
        compiled = sapwood.compile(twin, backend=counting)
        for step in range(STEPS):
            x = _batch(0, step)[0]  # (the same on every rank: the plan replicates it)
            x_ref, x_new = x.clone().requires_grad_(), x.clone().requires_grad_()
            want, got = reference(x_ref), compiled(x_new)
            want.square().sum().backward()
            got.square().sum().backward()
            torch.testing.assert_close(got, want)
            torch.testing.assert_close(x_new.grad, x_ref.grad)
            for a, b in zip(twin.parameters(), reference.parameters()):
                torch.testing.assert_close(a.grad.to_local(), b.grad.to_local())
            twin.zero_grad()
            reference.zero_grad()
        report = sapwood.explain(twin)(torch.ones(4, 8))
        result = {
            "graphs": counting.graphs,
            "explain_graphs": report.graph_count,
            "break_reasons": [b.reason for b in report.breaks],
        }
        if rank == 0:
            Path(out).write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()
