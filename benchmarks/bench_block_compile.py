"""Per-block compile time, each decoder layer compiled on its own: sapwood vs torch.compile.

The per-block recipe (what FSDP2 users write): a 16-layer tiny Llama (``LlamaConfig``:
hidden 64, 2 heads, intermediate 128; no weights) whose decoder layers are compiled one by
one, ``[compile(layer) for layer in layers]``, then run in order on one input. The figure
is the first call of all 16 compiled layers (tracing, backend compilation, guard checks and
the run itself) divided by 16: a compiler that traces each instance of the layer class once
pays 16 traces; one that shares a trace between layers of one structure pays one or two.

Columns: the eager backend (the compilers' own cost) and Inductor (the backend's cost
added), each sapwood vs torch.compile in the same process, alternating, best of a few
repeats; a fresh cache for each (``sapwood.reset()``, ``torch._dynamo.reset()``, Inductor's
caches emptied on disk and in memory), and both compilers warmed up on another model first. The traces column
counts the graphs each backend was handed. Target: ratio <= 0.5.

Run: ``PYTHONPATH=packages/graph/src:packages/tracer/src:packages/backend/src:src python benchmarks/bench_block_compile.py``
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
from zoo import tiny_llama_layers

GPU = False
NAME = "block_compile"

LAYERS = 16


class _Counting:
    """A backend that counts the graphs it is handed and forwards them to ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.graphs = 0
        self.__name__ = getattr(inner, "__name__", "counting")

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.graphs += 1
        return self.inner(gm, example_inputs)


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _inductor(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)


def _llama() -> tuple[list[torch.nn.Module], torch.Tensor, dict[str, Any]]:
    import transformers

    transformers.logging.set_verbosity_error()
    return tiny_llama_layers(LAYERS, tokens=32)  # type: ignore[return-value]


def _run(layers: list[Any], hidden: torch.Tensor, kwargs: dict[str, Any]) -> torch.Tensor:
    for layer in layers:
        out = layer(hidden, **kwargs)
        hidden = out[0] if isinstance(out, tuple) else out
    return hidden


def _first_calls(
    compile_fn: Callable[[torch.nn.Module, Any], Any], inner: Any
) -> tuple[float, int]:
    """Seconds for the first call of every layer compiled on its own, and the graph count
    (Inductor starts from empty caches, on disk and in memory, so neither compiler reuses the
    kernels the other built)."""
    if inner is not _inductor:
        return _first_calls_now(compile_fn, inner)
    from torch._inductor.utils import fresh_cache

    with fresh_cache():
        return _first_calls_now(compile_fn, inner)


def _first_calls_now(
    compile_fn: Callable[[torch.nn.Module, Any], Any], inner: Any
) -> tuple[float, int]:
    layers, hidden, kwargs = _llama()
    backend = _Counting(inner)
    with torch.no_grad():
        expected = _run(layers, hidden, kwargs)  # the layers' own eager warm-up is not counted
        start = time.perf_counter()
        compiled = [compile_fn(layer, backend) for layer in layers]
        got = _run(compiled, hidden, kwargs)
        elapsed = time.perf_counter() - start
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    return elapsed, backend.graphs


def _sapwood(model: torch.nn.Module, backend: Any) -> Any:
    import sapwood

    return sapwood.compile(model, backend=backend)


def _dynamo(model: torch.nn.Module, backend: Any) -> Any:
    return torch.compile(model, backend=backend)


def _fresh() -> None:
    import sapwood

    sapwood.reset()
    torch._dynamo.reset()


def main(out: pathlib.Path) -> dict[str, Any]:
    import torch._inductor.config as inductor_config

    try:
        import transformers  # noqa: F401
    except ImportError:
        print("skipped: transformers is not installed")
        return write_json(out, NAME, {"skipped": "transformers not installed"})
    rows: list[list[str]] = []
    result: dict[str, Any] = {}
    with inductor_config.patch(fx_graph_cache=False, autotune_local_cache=False):
        warm = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        for compile_fn in (_sapwood, _dynamo):
            for inner in (_eager, _inductor):
                _fresh()
                compile_fn(warm, inner)(torch.randn(2, 4))
        for label, inner, repeats in (("eager", _eager, 3), ("inductor", _inductor, 2)):
            runs = []
            for repeat in range(repeats):  # alternating, best of the repeats (a shared machine)
                _fresh()
                if repeat % 2:  # (who goes first swaps: the first compile of a process pays more)
                    theirs = _first_calls(_dynamo, inner)
                    _fresh()
                    ours = _first_calls(_sapwood, inner)
                else:
                    ours = _first_calls(_sapwood, inner)
                    _fresh()
                    theirs = _first_calls(_dynamo, inner)
                runs.append((ours, theirs))
            ours_s, our_graphs = min(r[0] for r in runs)
            theirs_s, their_graphs = min(r[1] for r in runs)
            per_ours, per_theirs = ours_s / LAYERS, theirs_s / LAYERS
            result[label] = {
                "sapwood_per_block_s": per_ours,
                "dynamo_per_block_s": per_theirs,
                "ratio": per_ours / per_theirs,
                "sapwood_graphs": our_graphs,
                "dynamo_graphs": their_graphs,
            }
            rows.append(
                [
                    f"backend {label}",
                    f"{per_ours * 1e3:.1f} ms",
                    f"{per_theirs * 1e3:.1f} ms",
                    ratio(per_ours, per_theirs),
                    str(our_graphs),
                    str(their_graphs),
                ]
            )
    print_table(
        f"tiny Llama, {LAYERS} decoder layers compiled one by one: first call per layer",
        ["case", "sapwood", "torch.compile", "ratio", "traces (sapwood)", "traces (torch)"],
        rows,
    )
    report = {
        **result,
        "layers": LAYERS,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "ratios": [
            {
                "label": f"per-block first call, {LAYERS} Llama layers, {label}, sapwood / torch.compile",
                "value": v["ratio"],
                "target": 0.5,
            }
            for label, v in result.items()
        ],
    }
    return write_json(out, NAME, report)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench-results"))
