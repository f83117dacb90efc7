"""transformers ``generate()`` with a static cache: the documented fast-generation recipe.

``model.forward = compile(model.forward, mode=M, fullgraph=True)`` then
``model.generate(ids, max_new_tokens=128, do_sample=False, cache_implementation="static",
disable_compile=True)`` (transformers' own automatic compile off, so each engine compiles once).
A random-weight ``LlamaForCausalLM`` built from a config (no download), bf16, batch 1, greedy;
two sizes. Columns: eager, torch.compile and sapwood.compile in ``default`` and
``reduce-overhead``; each on its own copy of one model (same weights).

Figures: ms per new token (the whole ``generate`` call over the new tokens, prefill included;
median of interleaved rounds), whether each column's tokens equal sapwood default's, and for
sapwood reduce-overhead the tree's functions: recordings, replays and eager runs with reasons.
A column that fails is reported with its error.

``python benchmarks/bench_generate_gpu.py [OUT] [--torch-ro]``: ``--torch-ro`` runs the
torch.compile reduce-overhead column alone (see ``_columns``); ``SAPWOOD_BENCH_QUICK=1`` the
first size only, two rounds.
"""

from __future__ import annotations

import copy
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _timing import print_table, tree_functions, write_json

GPU = True
NAME = "generate_gpu"

SIZES = [(1024, 8), (2048, 16)]
PROMPT = 32
NEW_TOKENS = 128
ROUNDS = 3
if os.environ.get("SAPWOOD_BENCH_QUICK"):  # one size, fewer rounds: a short device lease
    SIZES, ROUNDS = SIZES[:1], 2


def _model(dim: int, layers: int) -> Any:
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(
        hidden_size=dim,
        intermediate_size=int(dim * 8 / 3) // 256 * 256,
        num_hidden_layers=layers,
        num_attention_heads=dim // 64,
        num_key_value_heads=dim // 128,
        vocab_size=32000,
        max_position_embeddings=1024,
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16).eval()


def _generate(model: Any, ids: Any) -> tuple[list[int], float]:
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            ids,
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            cache_implementation="static",
            disable_compile=True,
        )
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return out[0, ids.shape[1] :].tolist(), seconds / NEW_TOKENS


def _columns(torch: Any, sapwood: Any) -> list[tuple[str, Any]]:
    """The columns of this run: torch.compile reduce-overhead alone with ``--torch-ro`` (on this
    recipe it ended the process with a segfault on an H100 and raised on an H200, so it runs in
    a process of its own, after the others), every other column without it."""
    every = [
        ("eager", None),
        ("torch.compile default", lambda f: torch.compile(f, fullgraph=True)),
        (
            "torch.compile reduce-overhead",
            lambda f: torch.compile(f, mode="reduce-overhead", fullgraph=True),
        ),
        ("sapwood default", lambda f: sapwood.compile(f, fullgraph=True)),
        (
            "sapwood reduce-overhead",
            lambda f: sapwood.compile(f, mode="reduce-overhead", fullgraph=True),
        ),
    ]
    alone = "--torch-ro" in sys.argv
    return [(n, m) for n, m in every if (n == "torch.compile reduce-overhead") == alone]


def main(out: Path) -> dict[str, Any]:
    import torch

    import sapwood
    import sapwood_cudagraph_trees

    results: dict[str, Any] = {"sizes": {}}
    ratios = []
    for dim, layers in SIZES:
        label = f"d={dim}, {layers} layers"
        torch._dynamo.reset()
        sapwood.reset()
        sapwood_cudagraph_trees.reset()
        base = _model(dim, layers)
        ids = torch.randint(0, 32000, (1, PROMPT), device="cuda")
        columns: dict[str, Any] = {}
        for name, make in _columns(torch, sapwood):
            model = copy.deepcopy(base)
            if make is not None:
                model.forward = make(model.forward)
            columns[name] = model
        tokens: dict[str, list[int]] = {}
        first: dict[str, float] = {}
        errors: dict[str, str] = {}
        for name, model in columns.items():
            try:
                start = time.perf_counter()
                tokens[name], _ = _generate(model, ids)
                first[name] = time.perf_counter() - start
                _generate(model, ids)  # the second call records the trees' graphs
            except Exception:
                errors[name] = traceback.format_exc(limit=3)
                print(f"{label}: {name} failed:\n{errors[name]}")
        times: dict[str, list[float]] = {}
        live = [n for n in columns if n not in errors]
        for r in range(ROUNDS):
            for name in live if r % 2 == 0 else live[::-1]:
                try:
                    _, seconds = _generate(columns[name], ids)
                    times.setdefault(name, []).append(seconds)
                except Exception:
                    errors[name] = traceback.format_exc(limit=3)
                    print(f"{label}: {name} failed while timed:\n{errors[name]}")
                    live.remove(name)
                    break
        reference = tokens.get("sapwood default")
        rows = []
        per_token = {n: statistics.median(v) for n, v in times.items()}
        for name in columns:
            rows.append(
                [
                    name,
                    f"{per_token[name] * 1e3:.3f}" if name in per_token else "failed",
                    f"{first[name]:.1f} s" if name in first else "n/a",
                    str(tokens.get(name) == reference) if name in tokens else "n/a",
                ]
            )
        print_table(
            f"generate(), static cache, {label}: ms per new token ({NEW_TOKENS} new, bf16)",
            ["column", "ms/token", "first generate", "tokens = sapwood default"],
            rows,
        )
        tree = tree_functions()
        print("sapwood reduce-overhead tree: " + " | ".join(tree))
        entry: dict[str, Any] = {
            "ms_per_token": {n: v * 1e3 for n, v in per_token.items()},
            "first_generate_s": first,
            "tokens_equal_sapwood_default": {n: tokens[n] == reference for n in tokens},
            "errors": errors,
            "tree": tree,
        }
        ro, default = per_token.get("sapwood reduce-overhead"), per_token.get("sapwood default")
        torch_best = min(
            (per_token[n] for n in per_token if n.startswith("torch.compile")), default=None
        )
        if ro and default:
            entry["speedup_over_sapwood_default"] = default / ro
            ratios.append(
                {
                    "label": f"generate {label}: sapwood default / sapwood reduce-overhead",
                    "value": default / ro,
                    "target": 1.3,
                    "better": "higher",
                }
            )
        if ro and torch_best:
            ratios.append(
                {
                    "label": f"generate {label}: sapwood RO / torch.compile's best mode",
                    "value": ro / torch_best,
                    "target": 0.8,
                }
            )
        results["sizes"][label] = entry
        del columns, base
        torch.cuda.empty_cache()
    results["ratios"] = ratios
    results["device"] = torch.cuda.get_device_name()
    results["python"] = sys.version.split()[0]
    results["torch"] = torch.__version__
    write_json(out, NAME + ("_torch_ro" if "--torch-ro" in sys.argv else ""), results)
    return results


if __name__ == "__main__":
    main(
        Path(sys.argv[1])
        if len(sys.argv) > 1 and sys.argv[1] != "--torch-ro"
        else Path("bench-results")
    )
