"""Warm start: process start to first compiled output, sapwood against torch.compile.

Each line is one fresh Python process that imports torch and the compiler, builds the model,
compiles it (Inductor, mode ``default``, inference under ``no_grad``) and runs it once:

* ``cold``: empty Inductor and Triton cache folders (the engine's own);
* ``warm``: a second process on the same folders (what a restart of the same job gets);
* ``shipped``: empty folders again, but the first thing the process does is load the
  artifacts the cold process saved (sapwood: ``sapwood.save_artifacts``/``load_artifacts``;
  torch: ``torch.compiler.save_cache_artifacts``/``load_cache_artifacts``): what a
  deployment that ships its cache gets.

Reported per process: seconds from the parent launching it to the first output (the figure
a user waits), of which ``import`` (torch and the compiler) and ``first call`` (compile plus
the first run, synchronised). The cold compile of each engine is its own: the engines never
share a cache folder.

Run (GPU machine): ``python benchmarks/bench_warm_start_gpu.py OUT [--models resnet50,vit_b_16,llama]``;
``--device cpu --models mlp`` checks the harness anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

GPU = True
NAME = "warm_start_gpu"
ENGINES = ("torch", "sapwood")


def _build(model_name: str, device: str):  # (child side)
    import torch

    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    if model_name == "resnet50":
        import torchvision

        model, x = torchvision.models.resnet50(), torch.randn(32, 3, 224, 224)
    elif model_name == "vit_b_16":
        import torchvision

        model, x = torchvision.models.vit_b_16(), torch.randn(8, 3, 224, 224)
    elif model_name == "llama":
        import transformers

        transformers.logging.set_verbosity_error()
        config = transformers.LlamaConfig(
            vocab_size=32000,
            hidden_size=512,
            intermediate_size=1376,
            num_hidden_layers=4,
            num_attention_heads=8,
            num_key_value_heads=8,
        )
        model = transformers.LlamaForCausalLM(config)
        x = torch.randint(0, 32000, (4, 128))
        model = model.to(device=device, dtype=dtype).eval()
        return model, x.to(device)
    else:  # "mlp": checks the harness on any machine
        model = torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 8)
        )
        x = torch.randn(16, 64)
    return model.to(device=device, dtype=dtype).eval(), x.to(device=device, dtype=dtype)


def child(engine: str, model_name: str, device: str, phase: str, artifacts: str) -> None:
    launched = float(os.environ["WARM_START_LAUNCHED"])
    start = time.perf_counter()
    import torch

    if engine == "sapwood":
        import sapwood

        compile_fn = sapwood.compile
        if phase == "shipped" and not sapwood.load_artifacts(artifacts):
            raise SystemExit("the artifacts were refused")
    else:
        compile_fn = torch.compile
        if phase == "shipped":
            torch.compiler.load_cache_artifacts(Path(artifacts).read_bytes())
    imported = time.perf_counter()
    model, x = _build(model_name, device)
    built = time.perf_counter()
    with torch.no_grad():
        out = compile_fn(model)(x)
    if device == "cuda":
        torch.cuda.synchronize()
    done = time.perf_counter()
    since_launch = time.time() - launched
    logits = out.logits if hasattr(out, "logits") else out
    checksum = float(logits.float().abs().mean())
    if phase == "cold":
        if engine == "sapwood":
            sapwood.save_artifacts(artifacts)
        else:
            saved = torch.compiler.save_cache_artifacts()
            if saved is not None:
                Path(artifacts).write_bytes(saved[0])
    stages = sapwood.compile_times() if engine == "sapwood" else {}
    print(
        json.dumps(
            {
                "to_first_output_s": since_launch,
                "import_s": imported - start,
                "build_s": built - imported,
                "first_call_s": done - built,
                "checksum": checksum,
                "stages": {k: round(v, 3) for k, v in stages.items()},
            }
        )
    )


def _run(engine: str, model_name: str, device: str, phase: str, root: Path) -> dict:
    cache = root / engine / ("shipped" if phase == "shipped" else "cache")
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "WARM_START_LAUNCHED": repr(time.time()),
    }
    artifacts = root / engine / "artifacts.bin"
    command = [
        sys.executable,
        __file__,
        "--child",
        engine,
        model_name,
        device,
        phase,
        str(artifacts),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:] or ["?"]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--models", default="resnet50,vit_b_16,llama")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--engines", default=",".join(ENGINES))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for model_name in args.models.split(","):
        root = out / f"caches-{model_name}"
        for engine in args.engines.split(","):
            for phase in ("cold", "warm", "shipped"):
                result = _run(engine, model_name, args.device, phase, root)
                rows.append({"model": model_name, "engine": engine, "phase": phase, **result})
                print(json.dumps(rows[-1]), flush=True)
    print(f"\nprocess start to first output, seconds ({args.device})")
    print(
        f"{'model':<10} {'engine':<8} {'cold':>8} {'warm':>8} {'shipped':>8}   first call cold/warm/shipped"
    )
    for model_name in args.models.split(","):
        for engine in args.engines.split(","):
            got = {
                r["phase"]: r for r in rows if r["model"] == model_name and r["engine"] == engine
            }
            total = [got[p].get("to_first_output_s") for p in ("cold", "warm", "shipped")]
            first = [got[p].get("first_call_s") for p in ("cold", "warm", "shipped")]
            cells = " ".join(f"{t:8.2f}" if t is not None else f"{'error':>8}" for t in total)
            firsts = "/".join(f"{t:.2f}" if t is not None else "error" for t in first)
            print(f"{model_name:<10} {engine:<8} {cells}   {firsts}")
            for phase in ("cold", "warm"):
                if got.get(phase, {}).get("stages"):
                    print(f"    {phase} stages: {got[phase]['stages']}")
        cold_torch = next(
            (
                r.get("first_call_s")
                for r in rows
                if r["model"] == model_name and r["engine"] == "torch" and r["phase"] == "cold"
            ),
            None,
        )
        for phase in ("warm", "shipped"):
            ours = next(
                (
                    r.get("first_call_s")
                    for r in rows
                    if r["model"] == model_name and r["engine"] == "sapwood" and r["phase"] == phase
                ),
                None,
            )
            if ours is not None and cold_torch:
                print(
                    f"  {model_name}: sapwood {phase} first call / torch cold first call = {ours / cold_torch:.3f}"
                )
    (out / "warm_start.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:7])
    else:
        main()
