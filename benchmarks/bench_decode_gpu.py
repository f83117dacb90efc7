"""Token-by-token decoding under reduce-overhead: sapwood against torch.compile (the gpt-fast
pattern, the workload reduce-overhead exists for).

A Llama-style decoder (RMSNorm, rotary embeddings, SwiGLU, static key/value caches written in
place with ``index_copy_``; ``zoo.Decoder``), batch 1, bf16, greedy. The prompt's prefill runs
eagerly; then ``decode_one_token(model, token, input_pos)`` is compiled with
``mode="reduce-overhead", fullgraph=True`` and called once per new token. Two sizes: d=1024
with 8 layers, d=2048 with 16 layers (about 1B parameters with the embeddings).

Two loops per engine, as users write them:

* ``sync``: the position is made on the host for each token and the token is read back
  (``.item()``) after each step, as a generate loop that checks for an end token does: host
  time and GPU time add up;
* ``async``: the position is advanced on the device (``input_pos += 1``) and nothing is read
  back until the end (gpt-fast's loop): the host runs ahead of the GPU when it can.

A column ``sapwood RO inputs`` is sapwood with the model declared frozen
(``options={"guards": "inputs"}``, the opt-in for serving; never the default): it is
printed beside the others, and the ratio against torch is the default's.

Both loops clone each new token, as gpt-fast does (torch's trees overwrite a step's outputs at
the next step, so a loop that keeps them must).

Figures: ms per new token (median of interleaved rounds; the ratio is the median of the
rounds' ratios sapwood / torch), the first compiled call (compile, warm-up), and whether
sapwood's tokens equal torch's (both compile with Inductor; eager's bf16 arithmetic differs).
Afterwards the tree of sapwood's runtime is summarised: functions, recordings, replays.

``python benchmarks/bench_decode_gpu.py [OUT] [--profile]``: ``--profile`` also profiles
sapwood's and torch's ``sync`` loop at the larger size (cProfile, the functions with the most
own time), to show where the host time of a step goes.
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

from _timing import print_table, tree_functions, write_json
from zoo import Decoder, decode_one_token

GPU = True
NAME = "decode_gpu"

SIZES = [(1024, 8), (2048, 16)]
PROMPT = 16
NEW_TOKENS = 96
ROUNDS = 7
TARGET = 0.90  # sapwood RO / torch RO per token (issue 33)


def _model(dim: int, layers: int) -> Any:
    import torch

    torch.manual_seed(0)
    model = Decoder(vocab=32000, dim=dim, heads=dim // 64, layers=layers)
    model = model.to(device="cuda", dtype=torch.bfloat16).eval()
    model.setup_caches(PROMPT + NEW_TOKENS + 8)
    return model


def _generate(step: Any, model: Any, prompt: Any, sync: bool) -> tuple[list[int], float]:
    """Prefill eagerly, then ``NEW_TOKENS`` steps; the tokens and the seconds per step."""
    import torch

    with torch.no_grad():
        logits = model(prompt, torch.arange(PROMPT, device="cuda"))
        token = logits[:, -1].argmax(dim=-1, keepdim=True)
        tokens = [int(token.item())]
        position = torch.tensor([PROMPT], device="cuda")
        torch.cuda.synchronize()
        start = time.perf_counter()
        if sync:
            for i in range(NEW_TOKENS):
                position = torch.tensor([PROMPT + i], device="cuda")
                token = step(model, token, position).clone()
                tokens.append(int(token.item()))
        else:
            produced = []
            for _ in range(NEW_TOKENS):
                token = step(model, token, position).clone()
                produced.append(token)
                position += 1
            torch.cuda.synchronize()
            tokens += [int(t.item()) for t in produced]
        seconds = (time.perf_counter() - start) / NEW_TOKENS
    return tokens, seconds


def _engines() -> dict[str, Any]:
    import torch

    import sapwood

    return {
        "eager": decode_one_token,
        "torch.compile RO": torch.compile(decode_one_token, mode="reduce-overhead", fullgraph=True),
        "sapwood RO": sapwood.compile(decode_one_token, mode="reduce-overhead", fullgraph=True),
        # the opt-in for serving (the model declared frozen: its identity checked, not its
        # tree); never the default, so it is a column of its own, not the ratio's
        "sapwood RO inputs": sapwood.compile(
            decode_one_token,
            mode="reduce-overhead",
            fullgraph=True,
            options={"guards": "inputs"},
        ),
    }


def _tree_summary() -> str:
    import sapwood_cudagraph_trees

    info = sapwood_cudagraph_trees.tree_info(0)
    nodes = "; ".join(
        f"node {n.id} (parent {n.parent}, {n.function}): {n.replays} replays"
        for n in info.nodes.values()
    )
    return f"roots {list(info.roots)}; {'; '.join(tree_functions())}; {nodes}"


def _profile(step: Any, model: Any, prompt: Any, label: str) -> None:
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    _generate(step, model, prompt, sync=True)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(24)
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(30)
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_callees("eval_frame.py")
    print(f"--- profile: {label}, {NEW_TOKENS} sync steps (cProfile adds its own cost) ---")
    print(text.getvalue())


def main(out: Path) -> dict[str, Any]:
    import torch

    import sapwood
    import sapwood_cudagraph_trees

    out.mkdir(parents=True, exist_ok=True)
    profile = "--profile" in sys.argv
    results: dict[str, Any] = {"sizes": {}}
    ratios = []
    for dim, layers in SIZES:
        label = f"d={dim}, {layers} layers"
        torch._dynamo.reset()
        sapwood.reset()
        sapwood_cudagraph_trees.reset()
        model = _model(dim, layers)
        prompt = torch.randint(0, 32000, (1, PROMPT), device="cuda")
        engines = _engines()
        first: dict[str, float] = {}
        tokens: dict[str, list[int]] = {}
        errors: dict[str, str] = {}
        for name, step in engines.items():  # first call, then warm both loops
            try:
                with torch.no_grad():
                    logits = model(prompt, torch.arange(PROMPT, device="cuda"))
                    token = logits[:, -1].argmax(dim=-1, keepdim=True)
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                    step(model, token, torch.tensor([PROMPT], device="cuda"))
                    torch.cuda.synchronize()
                    first[name] = time.perf_counter() - start
                for sync in (True, False):
                    tokens[name], _ = _generate(step, model, prompt, sync)
            except Exception:  # a failing column is reported, the others go on
                errors[name] = traceback.format_exc(limit=4)
                print(f"{label}: {name} failed:\n{errors[name]}")
        times: dict[tuple[str, bool], list[float]] = {}
        round_ratios: dict[bool, list[float]] = {True: [], False: []}
        frozen_ratios: dict[bool, list[float]] = {True: [], False: []}
        live = [name for name in engines if name not in errors]
        for r in range(ROUNDS):
            order = live if r % 2 == 0 else live[::-1]
            for sync in (True, False):
                per_round = {}
                for name in order:
                    _, seconds = _generate(engines[name], model, prompt, sync)
                    times.setdefault((name, sync), []).append(seconds)
                    per_round[name] = seconds
                if "sapwood RO" in per_round and "torch.compile RO" in per_round:
                    round_ratios[sync].append(
                        per_round["sapwood RO"] / per_round["torch.compile RO"]
                    )
                if "sapwood RO inputs" in per_round and "torch.compile RO" in per_round:
                    frozen_ratios[sync].append(
                        per_round["sapwood RO inputs"] / per_round["torch.compile RO"]
                    )
        same = tokens.get("sapwood RO") == tokens.get("torch.compile RO")
        rows = []
        for name in engines:
            cells = [name]
            for sync in (True, False):
                samples = times.get((name, sync))
                cells.append(f"{statistics.median(samples) * 1e3:.3f}" if samples else "n/a")
            cells.append(f"{first[name]:.2f} s" if name in first else "n/a")
            rows.append(cells)
        print_table(
            f"decode {label}, ms per token (bf16, batch 1, {NEW_TOKENS} new tokens)",
            ["engine", "sync loop", "async loop", "first call"],
            rows,
        )
        entry: dict[str, Any] = {"first_call_s": first, "errors": errors}
        for sync in (True, False):
            loop = "sync" if sync else "async"
            entry[f"ms_per_token_{loop}"] = {
                name: statistics.median(times[(name, sync)]) * 1e3
                for name in engines
                if (name, sync) in times
            }
            if round_ratios[sync]:
                value = statistics.median(round_ratios[sync])
                entry[f"ratio_{loop}"] = value
                print(
                    f"sapwood RO / torch RO, {loop} loop, median of {ROUNDS} rounds: {value:.3f}"
                    f"  (rounds: {', '.join(f'{x:.3f}' for x in round_ratios[sync])})"
                )
                ratios.append(
                    {
                        "label": f"decode {label}, {loop} loop: sapwood RO / torch RO per token",
                        "value": value,
                        "target": TARGET,
                    }
                )
            if frozen_ratios[sync]:
                value = statistics.median(frozen_ratios[sync])
                entry[f"ratio_inputs_{loop}"] = value
                print(f"sapwood RO guards='inputs' / torch RO, {loop} loop: {value:.3f}")
        entry["tokens_equal_torch"] = same
        print(f"sapwood's tokens equal torch's: {same} ({len(tokens.get('sapwood RO', []))})")
        summary = _tree_summary()
        entry["tree"] = summary
        print(f"sapwood tree: {summary}")
        if profile and (dim, layers) == SIZES[-1]:
            for name in ("sapwood RO", "torch.compile RO"):
                if name in live:
                    _profile(engines[name], model, prompt, f"{name}, {label}")
        results["sizes"][label] = entry
        del engines, model
        torch.cuda.empty_cache()
    results["ratios"] = ratios
    results["device"] = torch.cuda.get_device_name()
    results["python"] = sys.version.split()[0]
    results["torch"] = torch.__version__
    write_json(out, NAME, results)
    return results


if __name__ == "__main__":
    main(
        Path(sys.argv[1])
        if len(sys.argv) > 1 and not sys.argv[1].startswith("-")
        else Path("bench-results")
    )
