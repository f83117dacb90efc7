"""Per-call time of functions with graph breaks, sapwood vs torch.compile (eager backends).

Three functions, each compiled by sapwood and by ``torch.compile(backend="eager")`` with the
equivalent construct: an explicit break in the middle (``sapwood.graph_break()`` /
``torch._dynamo.graph_break()``), a data-dependent branch, and a break inside a loop body. The
table shows eager PyTorch, sapwood and dynamo per call, measured interleaved in this process,
and the ratio sapwood / dynamo (lower is better; 1.0 is parity).

Run: ``PYTHONPATH=packages/graph/src:packages/tracer/src python benchmarks/bench_tracer_graph_breaks.py``
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys
import timeit
from collections.abc import Callable
from typing import Any

import torch

import sapwood_tracer

GPU = False
NAME = "tracer_graph_breaks"


def _explicit(split: Callable[[], None]) -> Callable[..., Any]:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = (x + 1).relu()
        split()
        return y * 2 - x

    return fn


def _branch(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    if y.sum() > 0:
        y = y * 2
    return y.cos()


def _loop(split: Callable[[], None]) -> Callable[..., Any]:
    def fn(x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            x = x * 1.5
            split()
        return x + 1

    return fn


def _per_call(fn: Callable[..., Any], *args: Any, number: int = 500, repeat: int = 5) -> float:
    fn(*args)
    return min(timeit.repeat(lambda: fn(*args), number=number, repeat=repeat)) / number


def main(out: pathlib.Path) -> dict:
    x = torch.randn(64)
    cases = [
        (
            "one explicit break",
            _explicit(sapwood_tracer.graph_break),
            _explicit(torch._dynamo.graph_break),
        ),
        ("data-dependent if", _branch, _branch),
        (
            "break in a 3-step loop",
            _loop(sapwood_tracer.graph_break),
            _loop(torch._dynamo.graph_break),
        ),
    ]
    rows = []
    print(f"{'per call':<26}{'eager':>10}{'sapwood':>10}{'dynamo':>10}{'ratio':>8}")
    for label, ours_fn, theirs_fn in cases:
        sapwood_tracer.reset()
        torch._dynamo.reset()
        ours = sapwood_tracer.compile(ours_fn, backend=lambda gm, example_inputs: gm.forward)
        dynamo = torch.compile(theirs_fn, backend="eager")
        eager_t, ours_t, dynamo_t = [], [], []
        for _ in range(3):
            eager_t.append(_per_call(theirs_fn, x))
            ours_t.append(_per_call(ours, x))
            dynamo_t.append(_per_call(dynamo, x))
        torch.testing.assert_close(ours(x), theirs_fn(x))
        row = {
            "label": label,
            "eager_us": statistics.median(eager_t) * 1e6,
            "sapwood_us": statistics.median(ours_t) * 1e6,
            "dynamo_us": statistics.median(dynamo_t) * 1e6,
        }
        row["ratio"] = row["sapwood_us"] / row["dynamo_us"]
        rows.append(row)
        print(
            f"{label:<26}{row['eager_us']:>8.2f}us{row['sapwood_us']:>8.2f}us"
            f"{row['dynamo_us']:>8.2f}us{row['ratio']:>8.2f}"
        )
    result: dict[str, Any] = {
        "rows": rows,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        # (in the loop case dynamo runs the whole function eagerly: it gives up on frames that
        # break inside a loop, so that row is informative, not like for like)
        "ratios": [
            {
                "label": f"per call with graph breaks, {r['label']} / dynamo",
                "value": r["ratio"],
                "target": None if "loop" in r["label"] else 1.0,
            }
            for r in rows
        ],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench-results"))
