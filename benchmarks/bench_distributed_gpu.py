"""A DDP training step on one GPU: eager DDP, torch.compile(DDP(model)), sapwood.compile(DDP(model)).

One process, an NCCL process group of one rank (DDP's whole machinery runs: reducer, gradient
buckets, all-reduces, on a group of one), a tiny Llama (``zoo.TinyLlama``: 4 blocks, d=512,
8 heads, SwiGLU 1376, vocabulary 2048; batch 4 x 256 tokens; about 15 M fp32 parameters, 59 MB,
so DDP's default buckets, 1 MB first and 25 MB after, make several). A step is forward,
cross-entropy loss, backward and an AdamW step.

Per mode (``default``, ``reduce-overhead``) three columns are built side by side (eager DDP,
``torch.compile(DDP(model), mode=...)`` and ``sapwood.compile(DDP(model), mode=...)``, each on
its own copy of the same weights) and timed in interleaved rounds, the order rotating each
round; figures are medians, and the ratio sapwood / torch.compile is the median of the rounds'
ratios (the host's speed drifts between rounds). A column that fails prints its error and the
others go on.

Overlap: one step of each compiled column is profiled (``torch.profiler``, CPU and CUDA
activity) and the trace says whether an all-reduce starts before the backward's last kernel
ends. On the GPU that is an NCCL kernel's start against the end of the last kernel launched
during ``loss.backward()``; a one-rank all-reduce may launch no kernel at all (NCCL copies
nothing when the input is the output), and then the host's order is reported instead: when
the all-reduce was issued against when the backward's last kernel was launched.

``python benchmarks/bench_distributed_gpu.py --out DIR [--quick]`` writes ``DIR/distributed_gpu.json``,
``DIR/distributed_gpu.txt`` (what was printed) and one Chrome trace per profiled column;
``--quick`` (2 blocks, fewer rounds) is meant to finish in under two minutes, most of it
Inductor's compiles.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import io
import json
import statistics
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "integration-tests"))

from _timing import fmt_time, once_seconds, per_call_seconds, print_table, write_json
from zoo import TinyLlama

GPU = True
NAME = "distributed_gpu"

MODEL = {"vocab": 2048, "dim": 512, "heads": 8, "layers": 4, "hidden": 1376, "max_tokens": 256}
BATCH, TOKENS = 4, 256
MODES = ("default", "reduce-overhead")
EAGER, TORCH, SAPWOOD = "eager DDP", "torch.compile(DDP)", "sapwood.compile(DDP)"


class _Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy (the text summary)."""

    def __init__(self, terminal: Any) -> None:
        self.terminal, self.kept = terminal, io.StringIO()

    def write(self, text: str) -> int:
        self.terminal.write(text)
        self.kept.write(text)
        return len(text)

    def flush(self) -> None:
        self.terminal.flush()


class Trainer:
    """One column: a DDP-wrapped copy of the model, maybe compiled, and its optimizer."""

    def __init__(self, torch: Any, base: Any, column: str, mode: str, setup: argparse.Namespace):
        from torch.nn.parallel import DistributedDataParallel

        self.torch = torch
        self.model = copy.deepcopy(base)
        ids = [0] if setup.device == "cuda" else None
        self.ddp = DistributedDataParallel(self.model, device_ids=ids)
        kwargs: dict[str, Any] = {"backend": setup.backend}
        if setup.backend == "inductor":
            kwargs["mode"] = mode
        if column == TORCH:
            self.run: Callable[[Any], Any] = torch.compile(self.ddp, **kwargs)
        elif column == SAPWOOD:
            import sapwood

            self.run = sapwood.compile(self.ddp, **kwargs)
        else:
            self.run = self.ddp
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        g = torch.Generator().manual_seed(0)
        ids_ = torch.randint(0, setup.vocab, (BATCH, setup.tokens + 1), generator=g)
        self.tokens = ids_[:, :-1].to(setup.device)
        self.targets = ids_[:, 1:].reshape(-1).to(setup.device)

    def forward_loss(self) -> Any:
        logits = self.run(self.tokens)
        return self.torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), self.targets
        )

    def optimize(self) -> None:
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def step(self) -> float:
        loss = self.forward_loss()
        loss.backward()
        self.optimize()
        return float(loss.detach())


#: host ranges of DDP's own work (the reducer's copies into and out of its buckets, the
#: all-reduces): kernels launched inside them are DDP's, not the model's backward
_DDP_WORDS = ("reducer", "c10d", "all_reduce", "allreduce", "nccl", "gloo")


def _trace_overlap(trace: dict[str, Any], backward: str) -> dict[str, Any]:
    """From a Chrome trace of one step: does an all-reduce start before the model's backward
    ends? ``backward`` names the annotation around ``loss.backward()``; the model's backward
    is the kernels launched inside it, less those DDP launched (:data:`_DDP_WORDS`)."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    span = next((e for e in events if e.get("name") == backward), None)
    if span is None:
        return {"overlap": None, "why": f"no {backward!r} range in the trace"}
    start, end = span["ts"], span["ts"] + span["dur"]
    host = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation")]
    ddp_ranges = [
        (e.get("pid"), e.get("tid"), e["ts"], e["ts"] + e["dur"])
        for e in host
        if any(word in e.get("name", "").lower() for word in _DDP_WORDS)
    ]

    def launched_by_ddp(launch: dict[str, Any]) -> bool:
        where = (launch.get("pid"), launch.get("tid"))
        return any(
            (pid, tid) == where and low <= launch["ts"] <= high
            for pid, tid, low, high in ddp_ranges
        )

    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    nccl = [e for e in gpu if "nccl" in e.get("name", "").lower()]
    nccl_ids = {id(e) for e in nccl}
    launched_in_backward = []
    for e in gpu:
        launch = launches.get(e.get("args", {}).get("correlation"))
        if id(e) in nccl_ids or launch is None or not start <= launch["ts"] <= end:
            continue
        if not launched_by_ddp(launch):
            launched_in_backward.append((launch["ts"], e))
    # the host side of an all-reduce: torch's op (c10d::allreduce_) and the process group's
    # range (nccl:all_reduce, a user annotation)
    host_allreduces = sorted(
        e["ts"]
        for e in host
        if any(word in e.get("name", "").lower() for word in ("all_reduce", "allreduce"))
        and start <= e["ts"] <= end
    )
    found: dict[str, Any] = {
        "backward_kernels": len(launched_in_backward),
        "nccl_kernels": len(nccl),
        "host_allreduces_in_backward": len(host_allreduces),
    }
    if not launched_in_backward:
        return {**found, "overlap": None, "why": "no kernel launched during the backward"}
    backward_end = max(e["ts"] + e["dur"] for _, e in launched_in_backward)
    if nccl:
        first = min(e["ts"] for e in nccl)
        return {
            **found,
            "basis": "GPU: first NCCL kernel start vs end of the model backward's last kernel",
            "overlap": first < backward_end,
            "first_allreduce_us": first,
            "backward_last_kernel_end_us": backward_end,
            "allreduce_kernels_before_end": sum(e["ts"] < backward_end for e in nccl),
        }
    if host_allreduces:
        latest_launch = max(launched for launched, _ in launched_in_backward)
        return {
            **found,
            "basis": "host (no NCCL kernel in the trace): first all-reduce issued vs the "
            "model backward's last kernel launch",
            "overlap": host_allreduces[0] < latest_launch,
            "first_allreduce_us": host_allreduces[0],
            "backward_last_kernel_launch_us": latest_launch,
            "backward_last_kernel_end_us": backward_end,
        }
    return {**found, "overlap": None, "why": "no all-reduce in the trace"}


def _profile_step(trainer: Trainer, path: Path) -> dict[str, Any]:
    torch = trainer.torch
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        with record_function("step.forward"):
            loss = trainer.forward_loss()
        with record_function("step.backward"):
            loss.backward()
        with record_function("step.optimizer"):
            trainer.optimize()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    prof.export_chrome_trace(str(path))
    return _trace_overlap(json.loads(path.read_text()), "step.backward")


def _reset(torch: Any) -> None:
    import sapwood

    torch._dynamo.reset()
    sapwood.reset()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _measure_mode(
    torch: Any, base: Any, mode: str, setup: argparse.Namespace, out: Path
) -> dict[str, Any]:
    sync = torch.cuda.synchronize if setup.device == "cuda" else None
    columns: dict[str, Trainer] = {}
    found: dict[str, Any] = {"columns": {}, "errors": {}, "overlap": {}}
    for column in (EAGER, TORCH, SAPWOOD):
        try:
            trainer = Trainer(torch, base, column, mode, setup)
            first = once_seconds(trainer.step, sync)
            losses = [trainer.step() for _ in range(setup.warmup)]
            columns[column] = trainer
            found["columns"][column] = {"first_step": first, "losses": losses, "samples": []}
        except Exception as error:  # a column that fails is reported, the others go on
            found["errors"][column] = f"{type(error).__name__}: {error}"
            traceback.print_exc()
    ratios: list[float] = []
    for round_ in range(setup.rounds):
        order = list(columns)
        order = order[round_ % len(order) :] + order[: round_ % len(order)] if order else []
        for column in order:
            try:
                seconds = per_call_seconds(
                    columns[column].step, calls=setup.calls, repeats=3, sync=sync
                )
                found["columns"][column]["samples"].append(seconds)
            except Exception as error:
                found["errors"][column] = f"{type(error).__name__}: {error}"
                traceback.print_exc()
                columns.pop(column)
        samples = {c: found["columns"][c]["samples"] for c in (TORCH, SAPWOOD) if c in columns}
        if len(samples) == 2 and samples[TORCH] and samples[SAPWOOD]:
            ratios.append(samples[SAPWOOD][-1] / samples[TORCH][-1])
    for values in found["columns"].values():
        values["per_step"] = statistics.median(values["samples"]) if values["samples"] else None
    found["ratio"] = statistics.median(ratios) if ratios else None
    found["round_ratios"] = ratios
    for column in (TORCH, SAPWOOD):
        if column not in columns:
            continue
        name = "sapwood" if column == SAPWOOD else "torch"
        try:
            found["overlap"][column] = _profile_step(
                columns[column], out / f"trace_{name}_{mode}.json"
            )
        except Exception as error:
            found["overlap"][column] = {"overlap": None, "why": f"{type(error).__name__}: {error}"}
            traceback.print_exc()
    columns.clear()
    return found


def _print(results: dict[str, Any]) -> None:
    for mode, found in results.items():
        torch_step = found["columns"].get(TORCH, {}).get("per_step")
        rows = []
        for column, values in found["columns"].items():
            per_step = values.get("per_step")
            share = f"{per_step / torch_step:6.2f}x" if per_step and torch_step else "n/a"
            losses = ", ".join(f"{v:.4f}" for v in values["losses"][:2])
            rows.append([column, fmt_time(per_step), share, fmt_time(values["first_step"]), losses])
        print_table(
            f"mode {mode}: one training step (ratio vs {TORCH})",
            ["column", "per step", "ratio", "first step", "losses (warm-up steps)"],
            rows,
        )
        if found["ratio"] is not None:
            rounds = ", ".join(f"{r:.2f}" for r in found["round_ratios"])
            print(
                f"{SAPWOOD} / {TORCH} ({mode}), median of {len(found['round_ratios'])} "
                f"interleaved rounds: {found['ratio']:.2f}  (rounds: {rounds})"
            )
        for column, overlap in found["overlap"].items():
            if overlap.get("overlap") is None:
                print(f"overlap [{column}, {mode}]: unknown ({overlap.get('why')})")
                continue
            times = ", ".join(
                f"{key} {overlap[key]:.1f}"
                for key in (
                    "first_allreduce_us",
                    "backward_last_kernel_launch_us",
                    "backward_last_kernel_end_us",
                )
                if key in overlap
            )
            print(
                f"overlap [{column}, {mode}]: {'yes' if overlap['overlap'] else 'no'} "
                f"({overlap['basis']}; {times}; {overlap['backward_kernels']} backward kernels, "
                f"{overlap['nccl_kernels']} NCCL kernels)"
            )
        for column, message in found["errors"].items():
            print(f"FAILED {column} ({mode}): {message}")


def main(out: Path, quick: bool = False, device: str = "cuda") -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    setup = argparse.Namespace(
        device=device,
        backend="inductor" if device == "cuda" else "aot_eager",
        tokens=TOKENS if device == "cuda" else 16,
        rounds=3 if quick else 7,
        calls=5 if quick else 20,
        warmup=2 if quick else 3,
    )
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("bench_distributed_gpu needs a CUDA device")
    out.mkdir(parents=True, exist_ok=True)
    shape = dict(MODEL)
    if quick:
        shape["layers"] = 2
    if device != "cuda":  # a check of this program's logic on the CPU, not a measurement
        shape.update(vocab=128, dim=64, heads=4, hidden=172, layers=2)
    setup.vocab = shape["vocab"]
    tee = _Tee(sys.stdout)
    results: dict[str, Any] = {}
    with contextlib.redirect_stdout(tee):
        if device == "cuda":
            torch.cuda.set_device(0)
        group = "nccl" if device == "cuda" else "gloo"
        dist.init_process_group(group, store=dist.HashStore(), rank=0, world_size=1)
        try:
            torch.manual_seed(0)
            base = TinyLlama(**shape).to(device)
            params = sum(p.numel() for p in base.parameters())
            print(
                f"tiny Llama {shape}, {params / 1e6:.1f} M parameters, batch {BATCH} x "
                f"{setup.tokens} tokens, {group} world 1, backend {setup.backend}"
                + (", quick" if quick else "")
            )
            for mode in MODES:
                _reset(torch)
                results[mode] = _measure_mode(torch, base, mode, setup, out)
            _print(results)
        finally:
            dist.destroy_process_group()
    (out / f"{NAME}.txt").write_text(tee.kept.getvalue())
    return write_json(
        out,
        NAME,
        {
            "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "model": shape,
            "quick": quick,
            "results": results,
            "ratios": [
                {
                    "label": f"DDP training step, {mode}, {SAPWOOD} / {TORCH}",
                    "value": found["ratio"],
                    "target": None,
                    "better": "lower",
                }
                for mode, found in results.items()
            ],
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--quick", action="store_true", help="2 blocks, fewer rounds")
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: logic check
    arguments = parser.parse_args()
    main(arguments.out, quick=arguments.quick, device=arguments.device)
