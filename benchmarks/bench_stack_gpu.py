"""Full stack on the GPU: sapwood reduce-overhead against torch.compile reduce-overhead.

Three workloads, each measured in this one process:

* a tiny function (3 pointwise ops on a 1x1024 tensor): per-call time, where CPU overhead is
  everything; also a raw ``torch.cuda.CUDAGraph`` replay with its input copy, the floor;
* a GPT stack (4 layers, d=256, batch 1, 32 tokens): inference per call;
* the same GPT: one training step (forward, backward, SGD step).

Columns: eager, torch.compile(mode="reduce-overhead"), sapwood.compile(mode="reduce-overhead"),
and torch.compile(backend=sapwood_backend.torch_backend()) (torch's capture on sapwood's
trees). Ratios are against torch.compile reduce-overhead. The two columns a target compares
(torch's and sapwood's reduce-overhead) are built side by side and timed in 9 interleaved
rounds, alternating which goes first; their ratio is the median of the rounds' ratios, since
the host's speed drifts between rounds (a GPT step is bound by host time). The other columns
are timed on their own. A column that fails is reported with its error and does not stop
the others.

``python benchmarks/bench_stack_gpu.py [OUT] [--profile]``: with ``--profile``, each compiled
target column's tiny function and training step are also profiled after they are timed (the
functions with the most own time; for the step also the time spent inside sapwood's tree
runtime and per kind of output its nodes build), to show where the host time goes.
"""

from __future__ import annotations

import copy
import statistics
import sys
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "integration-tests"))

from _timing import fmt_time, once_seconds, per_call_seconds, print_table, ratio, write_json
from zoo import GPT

GPU = True
NAME = "stack_gpu"

#: interleaved timing rounds of the two columns a target compares
ROUNDS = 9


def _tiny(x: Any) -> Any:
    return ((x * 2.0).sin() + 1.0).relu()


def _compilers(torch: Any) -> dict[str, Any]:
    import sapwood
    import sapwood_backend

    return {
        "eager": lambda f: f,
        "torch reduce-overhead": lambda f: torch.compile(f, mode="reduce-overhead"),
        "sapwood reduce-overhead": lambda f: sapwood.compile(f, mode="reduce-overhead"),
        "torch.compile on sapwood trees": lambda f: torch.compile(
            f, backend=sapwood_backend.torch_backend()
        ),
    }


def _reset(torch: Any) -> None:
    import sapwood
    import sapwood_cudagraph_trees

    torch._dynamo.reset()
    sapwood.reset()
    sapwood_cudagraph_trees.reset()
    torch.cuda.synchronize()


def _raw_graph_tiny(torch: Any, x: Any) -> float:
    static_x = x.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            _tiny(static_x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = _tiny(static_x)

    def replay() -> Any:
        static_x.copy_(x)
        graph.replay()
        return static_out

    return per_call_seconds(replay, calls=2000, sync=torch.cuda.synchronize)


def _profile_training(column: str, step: Any, torch: Any) -> None:
    """Where a training step's host time goes: own time per function, and the tree runtime's."""
    import time

    from sapwood_cudagraph_trees import _api
    from sapwood_cudagraph_trees._runtime import TreeFunction

    inside = [0.0]
    original = TreeFunction.__call__

    def timed(self: Any, inputs: list[Any]) -> Any:
        start = time.perf_counter()
        try:
            return original(self, inputs)
        finally:
            inside[0] += time.perf_counter() - start

    TreeFunction.__call__ = timed  # type: ignore[method-assign]
    try:
        steps = 200
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        total = (time.perf_counter() - start) / steps
    finally:
        TreeFunction.__call__ = original  # type: ignore[method-assign]
    print(
        f"[{column}] profile: step {fmt_time(total)}, inside the tree runtime "
        f"{fmt_time(inside[0] / steps)} per step"
    )
    runtime = _api._runtimes.get(0)
    if runtime is not None and "sapwood" in column:  # torch's own trees are not ours to list
        for node in runtime.tree.nodes():
            if node.replays:
                kinds = [g for g, _ in node.plan]
                print(
                    f"[{column}]   node #{node.id} {node.mode}: {len(kinds)} outputs, "
                    f"{sum(1 for g in kinds if g in node.handed_groups)} reused, "
                    f"{sum(1 for g in kinds if g >= 0 and g not in node.handed_groups)} built "
                    f"anew, {kinds.count(-1)} input objects, {kinds.count(-3)} views of "
                    f"inputs; {len(node.address_checks)} address checks, {len(node.copies)} "
                    f"copies, {len(node.fit_checks)} liveness checks"
                )
    _print_cprofile(column, "training steps", step, calls=50, rows=22, torch=torch)


def _print_tree(column: str) -> None:
    """The functions on sapwood's tree after the training steps of ``column``."""
    import sapwood_cudagraph_trees

    info = sapwood_cudagraph_trees.tree_info(0)
    functions = [
        (f.name, f.mode, f.recordings, f.replays, f.eager_reason, f.fallbacks)
        for f in info.functions
    ]
    print(
        f"[{column}] tree after training:",
        functions,
        "checkpoint restores",
        info.checkpoint_restores,
    )


def _print_cprofile(column: str, what: str, fn: Any, calls: int, rows: int, torch: Any) -> None:
    """The functions with the most own time over ``calls`` calls of ``fn``."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(rows)
    print(f"[{column}] cProfile of {calls} {what}, by own time:\n{text.getvalue()}")


def main(out: Path, profile: bool = False) -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("bench_stack_gpu needs a CUDA device")
    sync = torch.cuda.synchronize
    results: dict[str, dict[str, Any]] = {"tiny": {}, "gpt_inference": {}, "gpt_train_step": {}}
    errors: dict[str, str] = {}
    x_tiny = torch.randn(1, 1024, device="cuda")
    torch.manual_seed(0)
    base_model = GPT(vocab=512, dim=256, heads=4, layers=4).cuda()
    tokens = torch.randint(0, 512, (1, 32), device="cuda")

    results["tiny"]["raw CUDA graph + copy"] = {"per_call": _raw_graph_tiny(torch, x_tiny)}

    def build(workload: str, make: Any) -> tuple[Any, float]:
        """The callable timed for ``workload`` under one compiler, and its first call."""
        if workload == "tiny":
            fn = make(_tiny)
            first = once_seconds(lambda: fn(x_tiny), sync)
            for _ in range(5):
                torch.testing.assert_close(fn(x_tiny), _tiny(x_tiny))
            return (lambda: fn(x_tiny)), first
        if workload == "gpt_inference":
            model = copy.deepcopy(base_model).eval()
            compiled = make(model)

            def infer() -> Any:
                with torch.no_grad():
                    return compiled(tokens)

            first = once_seconds(infer, sync)
            for _ in range(5):
                with torch.no_grad():
                    expected = model(tokens)
                torch.testing.assert_close(infer(), expected, rtol=2e-3, atol=2e-3)
            return infer, first
        model = copy.deepcopy(base_model).train()
        compiled = make(model)
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)

        def step() -> None:
            loss = compiled(tokens).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        first = once_seconds(step, sync)
        for _ in range(3):
            step()
        return step, first

    calls = {"tiny": 2000, "gpt_inference": 200, "gpt_train_step": 50}
    compilers = _compilers(torch)
    reference = "torch reduce-overhead"
    target = "sapwood reduce-overhead"
    round_ratios: dict[str, list[float]] = {}
    for workload in results:
        # The two columns the target compares are built side by side and timed in
        # interleaved rounds, alternating which goes first: a slow patch of the host then
        # hits both alike, and the figure is the median of the rounds' ratios.
        pair: dict[str, Any] = {}
        _reset(torch)
        for column in (reference, target):
            try:
                pair[column], first = build(workload, compilers[column])
                results[workload][column] = {"first_call": first}
            except Exception as error:
                errors[f"{column} ({workload})"] = f"{type(error).__name__}: {error}"
                traceback.print_exc()
        samples: dict[str, list[float]] = {column: [] for column in pair}
        order = list(pair)
        for round_ in range(ROUNDS):
            for column in order if round_ % 2 == 0 else order[::-1]:
                samples[column].append(
                    per_call_seconds(pair[column], calls=calls[workload], repeats=3, sync=sync)
                )
            if len(pair) == 2:
                round_ratios.setdefault(workload, []).append(
                    samples[target][-1] / samples[reference][-1]
                )
        for column, times in samples.items():
            results[workload][column]["per_call"] = statistics.median(times)
        if profile:
            for column, fn in pair.items():
                if workload == "tiny":
                    _print_cprofile(column, "tiny calls", fn, calls=2000, rows=16, torch=torch)
                elif workload == "gpt_train_step":
                    _profile_training(column, fn, torch)
        if workload == "gpt_train_step" and target in pair:
            _print_tree(target)
        pair.clear()
        # the other columns, each on its own
        for column, make in compilers.items():
            if column in (reference, target):
                continue
            try:
                _reset(torch)
                fn, first = build(workload, make)
                per_call = per_call_seconds(fn, calls=calls[workload], sync=sync)
                results[workload][column] = {"per_call": per_call, "first_call": first}
                if workload == "gpt_train_step" and "sapwood" in column:
                    _print_tree(column)
            except Exception as error:
                errors[f"{column} ({workload})"] = f"{type(error).__name__}: {error}"
                traceback.print_exc()
    for workload, by_column in results.items():
        ref = by_column.get(reference, {}).get("per_call")
        rows = [
            [
                column,
                fmt_time(v.get("per_call")),
                ratio(v.get("per_call"), ref),
                fmt_time(v.get("first_call")),
            ]
            for column, v in by_column.items()
        ]
        print_table(
            f"{workload} (ratio vs {reference})",
            ["column", "per call", "ratio", "first call"],
            rows,
        )
        if round_ratios.get(workload):
            rounds = ", ".join(f"{r:.2f}" for r in round_ratios[workload])
            print(
                f"{target} / {reference}, median of {ROUNDS} interleaved rounds: "
                f"{statistics.median(round_ratios[workload]):.2f}  (rounds: {rounds})"
            )
    for column, message in errors.items():
        print(f"FAILED {column}: {message}")
    targets = {"tiny": 0.5, "gpt_inference": 1.0, "gpt_train_step": 1.0}
    ratios = []
    for workload, by_column in results.items():
        ref = by_column.get(reference, {}).get("per_call")
        for column in (target, "torch.compile on sapwood trees"):
            ours = by_column.get(column, {}).get("per_call")
            value = ours / ref if ours and ref else None
            if column == target and round_ratios.get(workload):
                value = statistics.median(round_ratios[workload])
            ratios.append(
                {
                    "label": f"{workload}, {column} / {reference}",
                    "value": value,
                    "target": targets[workload] if column.startswith("sapwood") else None,
                    "better": "lower",
                }
            )
    return write_json(
        out,
        NAME,
        {
            "device": torch.cuda.get_device_name(),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "results": results,
            "errors": errors,
            "round_ratios": round_ratios,
            "ratios": ratios,
        },
    )


if __name__ == "__main__":
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(Path(paths[0]) if paths else Path("bench-results"), profile="--profile" in sys.argv)
