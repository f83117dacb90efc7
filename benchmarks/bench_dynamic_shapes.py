"""Dynamic shapes: a first call and 9 more sizes, sapwood vs torch.compile(dynamic=None).

The zoo's GPT is called with 10 (batch, length) pairs, both sizes changing on every call;
the figure is the total wall time of the 10 calls (traces, recompiles and backend compiles
included), best of 3 with the eager backend (front-end cost) and one run with Inductor (the
whole stack). Both compilers use their default policy: static first, then symbolic sizes on
the recompile. The graphs each compiled are counted through the backend. Inductor's on-disk
caches are off so neither compiler reuses the other's (or an earlier run's) kernels.

Run: ``PYTHONPATH=packages/graph/src:packages/tracer/src:packages/cudagraph-trees/src:packages/backend/src:src python benchmarks/bench_dynamic_shapes.py``
"""

from __future__ import annotations

import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

sys.path.insert(0, str(pathlib.Path(__file__).parent))
sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "integration-tests"))

from _timing import print_table, ratio, write_json

GPU = False
NAME = "dynamic_shapes"
SIZES = list(zip(range(2, 12), range(3, 23, 2)))  # the first call, then 9 more sizes


class _Counting:
    def __init__(self, inner: Callable[..., Any]) -> None:
        self.inner = inner
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.graphs += 1
        return self.inner(gm, example_inputs)


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _inductor(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)


def _model() -> torch.nn.Module:
    from zoo import build

    model, _ = build("gpt")
    return model.eval()


def _total(compile_fn: Callable[[torch.nn.Module, Any], Any], inner: Any) -> tuple[float, int]:
    model = _model()
    backend = _Counting(inner)
    inputs = [torch.randint(0, 64, size) for size in SIZES]
    with torch.no_grad():
        model(inputs[0])  # the model's own eager warm-up is not the compilers' cost
        start = time.perf_counter()
        compiled = compile_fn(model, backend)
        for tokens in inputs:
            compiled(tokens)
        return time.perf_counter() - start, backend.graphs


def _sapwood(model: torch.nn.Module, backend: Any) -> Any:
    import sapwood

    sapwood.reset()
    return sapwood.compile(model, backend=backend)


def _dynamo(model: torch.nn.Module, backend: Any) -> Any:
    torch._dynamo.reset()
    return torch.compile(model, backend=backend, dynamic=None)


def main(out: pathlib.Path) -> dict[str, Any]:
    import torch._inductor.config as inductor_config

    rows: list[list[str]] = []
    result: dict[str, Any] = {}
    with inductor_config.patch(fx_graph_cache=False, autotune_local_cache=False):
        # warm both compilers and both backends up on another model (one-time imports and
        # Inductor's C++ toolchain set-up count for neither)
        warm = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        for compile_fn in (_sapwood, _dynamo):
            for inner in (_eager, _inductor):
                compile_fn(warm, inner)(torch.randn(2, 4))
        for label, inner, repeats in (("eager", _eager, 3), ("inductor", _inductor, 1)):
            # the best of a few repeats for each (the machine may be shared), alternating
            runs = [(_total(_sapwood, inner), _total(_dynamo, inner)) for _ in range(repeats)]
            ours, our_graphs = min(r[0] for r in runs)
            theirs, their_graphs = min(r[1] for r in runs)
            result[label] = {
                "sapwood_s": ours,
                "dynamo_s": theirs,
                "ratio": ours / theirs,
                "sapwood_graphs": our_graphs,
                "dynamo_graphs": their_graphs,
            }
            rows.append(
                [
                    f"gpt, {label}",
                    f"{ours:.2f} s",
                    f"{theirs:.2f} s",
                    ratio(ours, theirs),
                    str(our_graphs),
                    str(their_graphs),
                ]
            )
    print_table(
        f"first call + {len(SIZES) - 1} more sizes, total time",
        ["case", "sapwood", "torch.compile", "ratio", "graphs (sapwood)", "graphs (torch)"],
        rows,
    )
    report = {
        **result,
        "sizes": SIZES,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "ratios": [
            {"label": f"10 sizes, {label}, sapwood / torch.compile", "value": v["ratio"]}
            for label, v in result.items()
        ],
    }
    return write_json(out, NAME, report)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench-results"))
