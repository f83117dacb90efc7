"""First-call time (trace + backend compile) of sapwood vs torch.compile, eager backend.

Models: an 8-layer MLP and, when ``transformers`` is installed, tiny GPT-2 and tiny Llama
configs (no weights). Each model is built fresh for each compiler, and both compilers are
warmed up on an unrelated function first, so one-time imports count for neither. The ratio
sapwood / dynamo is the figure of merit (target: <= 0.5).

Run: ``PYTHONPATH=packages/graph/src:packages/tracer/src python benchmarks/bench_tracer_first_call.py``
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

import torch
from torch import nn

import sapwood_tracer

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "integration-tests"))

GPU = False
NAME = "tracer_first_call"


def _eager(gm, example_inputs):
    return gm.forward


def _mlp():
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [nn.Linear(64, 64), nn.GELU()]
    return nn.Sequential(*layers).eval(), (torch.randn(8, 64),), {}


def _hf(kind):
    """The integration tests' tiny Hugging Face model, for inference (no labels)."""
    try:
        import transformers
    except ImportError:
        return None
    from zoo import build_hf

    transformers.logging.set_verbosity_error()
    model, inputs = build_hf(kind)
    return model.eval(), (), {k: v for k, v in inputs.items() if k != "labels"}


def _first_call(compile_fn, build) -> float:
    model, args, kwargs = build()
    with torch.no_grad():
        model(*args, **kwargs)  # eager warm-up of the model itself (lazy HF setup)
        start = time.perf_counter()
        compiled = compile_fn(model)
        compiled(*args, **kwargs)
        return time.perf_counter() - start


def _ours(model):
    sapwood_tracer.reset()
    return sapwood_tracer.compile(model, backend=_eager)


def _dynamo(model):
    torch._dynamo.reset()
    return torch.compile(model, backend="eager")


def main(out: pathlib.Path) -> dict:
    warm = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    _first_call(_ours, lambda: (warm, (torch.randn(2, 4),), {}))
    _first_call(_dynamo, lambda: (warm, (torch.randn(2, 4),), {}))
    cases = {
        "mlp_8_layers": _mlp,
        "tiny_gpt2": lambda: _hf("gpt2"),
        "tiny_llama": lambda: _hf("llama"),
    }
    result: dict[str, dict[str, float]] = {}
    print(f"{'first call':<16}{'sapwood':>10}{'dynamo':>10}{'ratio':>8}")
    for name, build in cases.items():
        if build() is None:
            print(f"{name:<16}  skipped (transformers not installed)")
            continue
        ours = min(_first_call(_ours, build) for _ in range(2))
        dynamo = min(_first_call(_dynamo, build) for _ in range(2))
        result[name] = {"sapwood_s": ours, "dynamo_s": dynamo, "ratio": ours / dynamo}
        print(f"{name:<16}{ours:>9.3f}s{dynamo:>9.3f}s{ours / dynamo:>8.2f}")
    report = {
        **result,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "ratios": [
            {"label": f"first call {name} / dynamo", "value": v["ratio"], "target": 0.5}
            for name, v in result.items()
        ],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench-results"))
