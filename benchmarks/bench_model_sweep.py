"""Real library models in one graph: sapwood.explain beside torch._dynamo.explain.

Every classification model torchvision lists (the largest few left out) and a set of timm
models of many families are built with random weights (nothing is downloaded), in eval mode
on the CPU, and called on one image of their input size. For each model and each frontend, in
a process of its own: the graph count of the first call (``explain``), then an eager-backend
compile called twice, its output compared with the eager model's (``allclose``, 1e-3). The
figures: models in one graph and equal to eager, per frontend; and the median over models of
the time sapwood took (explain, compile, two calls) over Dynamo's. Models whose graph count
is not 1, or whose output differs, are listed with the first break reasons.

Needs torchvision and timm (the GPU machine has both; it runs on its CPU cores, 14 worker
processes): ``python benchmarks/bench_model_sweep.py OUT`` or ``benchmarks/run.py --gpu -k
model_sweep``. Prints a note and writes an empty result without them.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import pathlib
import statistics
import sys
import time
import traceback
from typing import Any

GPU = True
NAME = "model_sweep"

#: torchvision names left out: the largest, each minutes of CPU time to trace and run
_TOO_BIG = (
    "vit_h",
    "vit_l",
    "vit_b_32",
    "regnet_y_128",
    "regnet_y_32",
    "regnet_y_16",
    "efficientnet_b7",
    "efficientnet_b6",
    "efficientnet_v2_l",
)

TIMM_MODELS = (
    "resnet50", "efficientnet_b0", "convnext_tiny", "vit_small_patch16_224",
    "deit_small_patch16_224", "swin_tiny_patch4_window7_224", "mobilenetv3_large_100",
    "regnety_008", "densenet121", "inception_v3", "beit_base_patch16_224", "levit_128",
    "mixer_b16_224", "poolformer_s12", "coat_tiny", "crossvit_tiny_240", "efficientformer_l1",
    "maxvit_tiny_tf_224", "mobilevit_s", "nfnet_l0", "rexnet_100", "cait_xxs24_224",
    "xcit_tiny_12_p16_224", "eva02_tiny_patch14_224", "fastvit_t8", "ghostnet_100",
    "hrnet_w18_small", "dla34", "res2net50_26w_4s", "tf_efficientnetv2_s", "repvgg_a0",
    "gernet_s", "tnt_s_patch16_224",
)  # fmt: skip


def _models() -> list[tuple[str, str]]:
    import torchvision

    found = [
        ("tv", name)
        for name in torchvision.models.list_models(module=torchvision.models)
        if not any(big in name for big in _TOO_BIG)
    ]
    return found + [("timm", name) for name in TIMM_MODELS]


def _build(kind: str, name: str) -> tuple[Any, Any]:
    import torch

    torch.manual_seed(0)
    if kind == "tv":
        import torchvision

        model = torchvision.models.get_model(name, weights=None)
        size = 299 if "inception" in name else 224
    else:
        import timm

        model = timm.create_model(name, pretrained=False)
        size = (getattr(model, "pretrained_cfg", None) or {}).get("input_size", (3, 224, 224))[-1]
    return model.eval(), torch.randn(1, 3, size, size)


def _first(out: Any) -> Any:
    if isinstance(out, (tuple, list)):
        return out[0]
    return getattr(out, "logits", out)


def _one(job: tuple[str, str, str]) -> dict[str, Any]:
    """One model through one frontend, in a fresh process."""
    kind, name, engine = job
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    result: dict[str, Any] = {"model": f"{kind}:{name}", "engine": engine}
    try:
        model, x = _build(kind, name)
    except Exception as error:  # (a name this timm does not have)
        result["error"] = f"build: {type(error).__name__}: {str(error)[:100]}"
        return result
    started = time.perf_counter()
    try:
        with torch.no_grad():
            expected = _first(model(x))
            if engine == "sapwood":
                import sapwood

                report = sapwood.explain(model)(x)
                result["graphs"] = report.graph_count
                result["breaks"] = [f"{b.reason[:160]} @ {b.location}" for b in report.breaks][:3]
                result["breaks"] += [why[:160] for _, why in report.eager_functions][:2]
                sapwood.reset()
                compiled = sapwood.compile(model, backend="eager")
            else:
                report = torch._dynamo.explain(model)(x)
                result["graphs"] = report.graph_count
                result["breaks"] = [str(b.reason)[:160] for b in report.break_reasons][:3]
                torch._dynamo.reset()
                compiled = torch.compile(model, backend="eager")
            compiled(x)
            got = _first(compiled(x))
            result["match"] = bool(torch.allclose(got, expected, rtol=1e-3, atol=1e-3))
    except Exception as error:
        result["error"] = f"{type(error).__name__}: {str(error)[:300]}"
        result["traceback"] = traceback.format_exc()[-1500:]
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


def main(out: pathlib.Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    try:
        import timm  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError:
        print("model sweep: skipped (needs torchvision and timm)")
        (out / f"{NAME}.json").write_text("{}")
        return {}
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    jobs = [(kind, name, engine) for kind, name in _models() for engine in ("sapwood", "dynamo")]
    workers = max(1, min(14, (os.cpu_count() or 2) - 2))
    with mp.get_context("spawn").Pool(workers, maxtasksperchild=1) as pool:
        results = list(pool.imap_unordered(_one, jobs))
    by_model: dict[str, dict[str, dict[str, Any]]] = {}
    for r in results:
        by_model.setdefault(r["model"], {})[r["engine"]] = r
    built = {
        m: d for m, d in by_model.items() if not d["sapwood"].get("error", "").startswith("build")
    }

    def good(r: dict[str, Any]) -> bool:
        return r.get("graphs") == 1 and bool(r.get("match")) and "error" not in r

    print(f"{'model':45s} {'sapwood':>16s} {'dynamo':>16s}")
    for model, d in sorted(built.items()):
        s, t = d["sapwood"], d["dynamo"]
        flag = (
            ""
            if good(s)
            else "   <-- " + "; ".join(s.get("breaks", [])[:1] or [s.get("error", "")])
        )
        print(
            f"{model:45s} {s.get('graphs')!s:>6} {s.get('match')!s:>9} {t.get('graphs')!s:>6} {t.get('match')!s:>9}{flag}"
        )
    times = [
        d["sapwood"]["seconds"] / d["dynamo"]["seconds"]
        for d in built.values()
        if d["dynamo"].get("seconds") and "error" not in d["sapwood"] and "error" not in d["dynamo"]
    ]
    summary = {
        "models": len(built),
        "sapwood_one_graph_equal": sum(good(d["sapwood"]) for d in built.values()),
        "dynamo_one_graph_equal": sum(good(d["dynamo"]) for d in built.values()),
        "median_time_ratio": round(statistics.median(times), 3) if times else None,
    }
    print(
        f"\n{summary['models']} models: one graph and equal to eager: sapwood "
        f"{summary['sapwood_one_graph_equal']}, dynamo {summary['dynamo_one_graph_equal']}; "
        f"time (explain, compile, 2 calls), median sapwood / dynamo: {summary['median_time_ratio']}"
    )
    payload = {"summary": summary, "results": results}
    (out / f"{NAME}.json").write_text(json.dumps(payload, indent=1))
    return payload


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench-results"))
