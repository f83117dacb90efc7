"""Per-call overhead of a compiled two-tensor function, sapwood vs torch.compile.

Both compile ``(x + y).relu() * 2`` with an eager backend; the table shows the per-call time
of eager PyTorch, of sapwood and of ``torch.compile(backend="eager")`` (dynamo), measured in
this process, and the ratio sapwood / dynamo (target: <= 1.0).

Run: ``PYTHONPATH=packages/graph/src:packages/tracer/src python benchmarks/bench_tracer_overhead.py``
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys
import timeit

import torch

import sapwood_tracer

GPU = False
NAME = "tracer_overhead"


def _fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x + y).relu() * 2


def _per_call(fn, *args, number: int = 2000, repeat: int = 7) -> float:
    fn(*args)
    return min(timeit.repeat(lambda: fn(*args), number=number, repeat=repeat)) / number


def main(out: pathlib.Path) -> dict:
    x, y = torch.randn(16), torch.randn(16)
    sapwood_tracer.reset()
    torch._dynamo.reset()
    ours = sapwood_tracer.compile(_fn, backend=lambda gm, example_inputs: gm.forward)
    dynamo = torch.compile(_fn, backend="eager")
    # interleave the measurements so machine noise hits both alike
    eager_t, ours_t, dynamo_t = [], [], []
    for _ in range(5):
        eager_t.append(_per_call(_fn, x, y))
        ours_t.append(_per_call(ours, x, y))
        dynamo_t.append(_per_call(dynamo, x, y))
    result = {
        "eager_us": statistics.median(eager_t) * 1e6,
        "sapwood_us": statistics.median(ours_t) * 1e6,
        "dynamo_us": statistics.median(dynamo_t) * 1e6,
    }
    result["ratio_sapwood_over_dynamo"] = result["sapwood_us"] / result["dynamo_us"]
    print(f"{'per call':<22}{'eager':>10}{'sapwood':>10}{'dynamo':>10}{'ratio':>8}")
    print(
        f"{'(x + y).relu() * 2':<22}{result['eager_us']:>8.2f}us{result['sapwood_us']:>8.2f}us"
        f"{result['dynamo_us']:>8.2f}us{result['ratio_sapwood_over_dynamo']:>8.2f}"
    )
    result["python"] = sys.version.split()[0]
    result["torch"] = torch.__version__
    result["ratios"] = [
        {
            "label": "per call, (x + y).relu() * 2 / dynamo",
            "value": result["ratio_sapwood_over_dynamo"],
            "target": 1.0,
        }
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench-results"))
