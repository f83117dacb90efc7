"""Tensor parallelism on two GPUs: eager, torch.compile and sapwood.compile, one step each.

Two processes (NCCL, one GPU each; ``--device cpu`` runs the same on gloo, to check the
script). The model is a stack of Llama-style MLP blocks (RMSNorm, SwiGLU: gate and up
projections colwise, down projection rowwise, through ``parallelize_module``), d=1024,
hidden 2816, 8 blocks, bf16 on the GPU, batch 8 x 256 tokens. A step is forward, a squared
loss and backward. The three columns (each its own copy of the same weights) are timed in
interleaved rounds; figures are rank 0's medians, the ratio sapwood / torch.compile is the
median of the rounds' ratios. Outputs and gradients of the compiled columns are compared
with eager's first.

``python benchmarks/bench_tp_gpu.py --out DIR [--device cpu] [--rounds N]`` (or through
``benchmarks/run.py --gpu``) prints one line per column and ``tp ratio sapwood/torch=...``,
and writes ``DIR/tp_gpu.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

GPU = True
NAME = "tp_gpu"


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Block(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


class Net(nn.Module):
    def __init__(self, dim: int, hidden: int, depth: int) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[Block(dim, hidden) for _ in range(depth)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def _parallelize(model: Net, mesh: Any) -> Net:
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    for block in model.blocks:
        parallelize_module(
            block,
            mesh,
            {"gate": ColwiseParallel(), "up": ColwiseParallel(), "down": RowwiseParallel()},
        )
    return model


def _worker(rank: int, world: int, port: int, args: argparse.Namespace) -> None:
    import sapwood

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.type, (world,))
    dim, hidden, depth, tokens = (1024, 2816, 8, 8 * 256) if cuda else (64, 128, 2, 32)
    dtype = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)
    base = Net(dim, hidden, depth).to(device, dtype)
    columns: dict[str, Any] = {}
    for name in ("eager", "torch", "sapwood"):
        model = _parallelize(copy.deepcopy(base), mesh)
        if name == "torch":
            columns[name] = (model, torch.compile(model))
        elif name == "sapwood":
            columns[name] = (model, sapwood.compile(model))
        else:
            columns[name] = (model, model)
    x = torch.randn(tokens, dim, device=device, dtype=dtype, generator=None)

    def step(fn: Any) -> torch.Tensor:
        out = fn(x)
        out.float().square().mean().backward()
        return out

    outs = {}
    for name, (model, fn) in columns.items():
        model.zero_grad()
        outs[name] = step(fn).detach().float()
    tol = 2e-2 if cuda else 1e-5
    for name in ("torch", "sapwood"):
        torch.testing.assert_close(outs[name], outs["eager"], rtol=tol, atol=tol)

    def timed(fn: Any) -> float:
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.iters):
            step(fn)
        if cuda:
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / args.iters

    for _, fn in columns.values():  # (warm: compiles, autotuning, NCCL communicators)
        timed(fn)
    rounds: dict[str, list[float]] = {k: [] for k in columns}
    names = list(columns)
    for r in range(args.rounds):
        order = names[r % 3 :] + names[: r % 3]
        for name in order:
            dist.barrier()
            rounds[name].append(timed(columns[name][1]))
    if rank == 0:
        for name, seconds in rounds.items():
            print(f"tp {name:8} {statistics.median(seconds) * 1e3:8.3f} ms/step", flush=True)
        ratio = statistics.median(s / t for s, t in zip(rounds["sapwood"], rounds["torch"]))
        print(f"tp ratio sapwood/torch={ratio:.3f} ({args.device}, world {world})", flush=True)
        result = {
            "device": args.device,
            "ms_per_step": {k: statistics.median(v) * 1e3 for k, v in rounds.items()},
            "ratio_sapwood_torch": ratio,
        }
        (Path(args.out) / f"{NAME}.json").write_text(json.dumps(result, indent=1))
    dist.destroy_process_group()


def main(out: Path, device: str = "cuda", rounds: int = 7, iters: int = 10) -> dict[str, Any]:
    import socket

    if device == "cuda" and torch.cuda.device_count() < 2:
        raise RuntimeError("bench_tp_gpu needs two GPUs")
    out.mkdir(parents=True, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = argparse.Namespace(device=device, rounds=rounds, iters=iters, out=str(out))
    mp.spawn(_worker, args=(2, port, args), nprocs=2)
    return json.loads((out / f"{NAME}.json").read_text())  # type: ignore[no-any-return]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("benchmark-results"))
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=10)
    given = parser.parse_args()
    try:
        main(given.out, given.device, given.rounds, given.iters)
    except RuntimeError as exc:
        sys.exit(str(exc))
