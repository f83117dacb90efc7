"""The integration tests' model zoo exported by sapwood.export and by torch.export (strict and
non-strict), in one process: whether each exports, whether the program equals eager, and
how long the export took.

Models: ``zoo.NAMES`` (an MLP, a CNN, a Llama-shaped GPT) and the transformers models of
``zoo.HF_NAMES`` and ``zoo.HF_MORE_NAMES`` (tiny configurations, no download; encoder-decoder
models with their decoder inputs), in eval mode, with ``use_cache=False`` where the model
takes it (a ``DynamicCache`` output is no pytree type torch.export knows), each called once
eagerly first, as a user's check would (wav2vec2 installs hooks at its first call, which
neither strict exporter takes). Each exporter
exports each model once to warm up, then once timed; "equal" compares the program's
``module()`` output with eager's (``assert_close``, fp32). An exporter's failure is its
cell's text, and the others go on.

Figures: models exported and equal to eager, sapwood against torch.export strict (target:
at least as many); the median over the models both export of sapwood's export time over
torch strict's (target: < 1). ``python benchmarks/bench_export.py [OUT]``.
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "integration-tests"))

from _timing import print_table, write_json

GPU = False
NAME = "export"
EXPORTERS = ("sapwood", "torch strict", "torch non-strict")


def _models() -> list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]]:
    import inspect

    import torch
    import zoo

    out: list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]] = []
    for name in zoo.NAMES:
        model, x = zoo.build(name)
        out.append((name, model.eval(), (x,), {}))
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("export: transformers not installed; its models are left out")
        return out
    for name in (*zoo.HF_NAMES, *zoo.HF_MORE_NAMES):
        model, inputs = zoo.build_hf(name)
        kwargs = dict(inputs)
        if "use_cache" in inspect.signature(model.forward).parameters:
            kwargs["use_cache"] = False
        out.append((f"hf {name}", model.eval(), (), kwargs))
    with torch.no_grad():  # one eager call first, as a user's check would (some models set
        for _, model, args, kwargs in out:  # themselves up at their first call)
            model(*args, **kwargs)
    return out


def _export(exporter: str, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    import torch

    import sapwood

    if exporter == "sapwood":
        return sapwood.export(model, args, kwargs)
    return torch.export.export(model, args, kwargs, strict=exporter == "torch strict")


def _equal(program: Any, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    import torch
    import zoo

    with torch.no_grad():
        want = zoo.output_tensors(model(*args, **kwargs))
        got = zoo.output_tensors(program.module()(*args, **kwargs))
    if len(want) != len(got):
        return False
    try:
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=2e-3, atol=2e-3)
    except AssertionError:
        return False
    return True


def main(out: Path) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    results: dict[str, dict[str, Any]] = {}
    rows = []
    for label, model, args, kwargs in _models():
        results[label] = {}
        cells = [label]
        for exporter in EXPORTERS:
            try:
                _export(exporter, model, args, kwargs)  # warm-up (imports, caches)
                started = time.perf_counter()
                program = _export(exporter, model, args, kwargs)
                seconds = time.perf_counter() - started
                equal = _equal(program, model, args, kwargs)
                results[label][exporter] = {"seconds": seconds, "equal": equal}
                cells.append(f"{seconds:.3f} s" + ("" if equal else " (differs)"))
            except Exception as exc:
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:90] if str(exc) else ''}"
                results[label][exporter] = {"error": why, "trace": traceback.format_exc(limit=3)}
                cells.append(f"fails ({type(exc).__name__})")
        rows.append(cells)
    print_table("export of the model zoo (CPU, fp32, eval)", ["model", *EXPORTERS], rows)

    def good(exporter: str) -> list[str]:
        return [m for m, r in results.items() if r[exporter].get("equal")]

    counts = {e: len(good(e)) for e in EXPORTERS}
    both = [m for m in good("sapwood") if m in good("torch strict")]
    time_ratios = [
        results[m]["sapwood"]["seconds"] / results[m]["torch strict"]["seconds"] for m in both
    ]
    print(
        f"\nexported and equal to eager, of {len(results)}: "
        + ", ".join(f"{e} {n}" for e, n in counts.items())
    )
    ratios = [
        {
            "label": "models exported and equal to eager, sapwood / torch.export strict",
            "value": counts["sapwood"] / max(1, counts["torch strict"]),
            "target": 1.0,
            "better": "higher",
        }
    ]
    if time_ratios:
        median = statistics.median(time_ratios)
        print(f"export time, sapwood / torch strict, median of {len(both)} models: {median:.2f}")
        ratios.append(
            {
                "label": "export time, sapwood / torch.export strict (median over models)",
                "value": median,
                "target": 1.0,
            }
        )
    return write_json(
        out,
        NAME,
        {
            "models": results,
            "counts": counts,
            "ratios": ratios,
            "python": sys.version.split()[0],
            "torch": torch.__version__,
        },
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench-results"))
