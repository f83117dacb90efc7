"""Replay CPU overhead per call of a tiny graph: sapwood's tree runtime against raw CUDA graph
replay (plus the input copy) and against torch's own tree runtime on the same callable.

The graph is three pointwise ops on a 1x1024 tensor, so the GPU work is negligible and the time
per call is the runtime's CPU overhead. The three runtimes are built side by side and timed in
interleaved rounds (the order rotating each round), since the host's speed drifts over a
run; each figure is a median over the rounds, each ratio the median of the rounds' ratios.
Targets from the issue: ours <= 1.5x raw, ours <= 0.6x torch's tree.
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys
import time
import traceback
from collections.abc import Callable

GPU = True
NAME = "trees_replay"
CALLS = 2000
REPEATS = 15


def _model(xs: list) -> list:
    (x,) = xs
    return [((x * 2.0) + 1.0).relu()]


def _per_call_us(step: Callable[[], object], torch) -> float:
    """One sample: the mean time of ``CALLS`` back-to-back calls."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(CALLS):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / CALLS * 1e6


def _raw(torch, x) -> Callable[[], object]:
    static_x = x.clone()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            _model([static_x])
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        static_out = _model([static_x])
    del static_out

    def step() -> None:
        static_x.copy_(x)
        graph.replay()

    return step


def _ours(torch, x) -> Callable[[], object]:
    import sapwood_cudagraph_trees as trees

    f = trees.cudagraphify(_model, [x], device_index=0, mode="inference", name="tiny")

    def step() -> None:
        f([x])

    return step


def _boxed(fn):
    """torch's tree runtime takes ownership of the argument list: the callee must empty it."""

    def boxed(xs: list) -> list:
        args = list(xs)
        xs.clear()
        return fn(args)

    return boxed


def _torch_tree(torch, x) -> Callable[[], object] | None:
    try:
        from torch._inductor import cudagraph_trees as ref
    except ImportError:
        return None
    made = ref.cudagraphify(
        _boxed(_model),
        [x],
        (),
        device_index=0,
        is_backward=False,
        is_inference=True,
        stack_traces=[None],
    )
    fn = made[0] if isinstance(made, tuple) else made
    mark = ref.mark_step_begin

    def step() -> None:
        # without dynamo there is no generation counter: a step mark per call is how torch's
        # runtime is told that the previous outputs are done with
        mark()
        fn([x])

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    if (time.perf_counter() - start) / 20 > 1e-3:
        raise RuntimeError("torch's tree runtime takes over 1 ms per call here (re-recording?)")
    return step


def main(out: pathlib.Path) -> dict:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    import sapwood_cudagraph_trees as trees

    x = torch.randn(1, 1024, device="cuda")
    steps = {"raw": _raw(torch, x), "ours": _ours(torch, x)}
    ref_error = None
    try:
        ref_step = _torch_tree(torch, x)
        if ref_step is not None:
            steps["torch"] = ref_step
    except Exception as exc:  # report, do not hide, a failure of the reference
        ref_error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    for step in steps.values():
        for _ in range(50):
            step()
    samples: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for round_ in range(REPEATS):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(_per_call_us(steps[name], torch))
    info = next(i for i in trees.tree_info(0).functions if i.name == "tiny")
    assert info.recordings == 1, trees.render(0)
    trees.reset()
    if "torch" in steps:
        from torch._inductor import cudagraph_trees as torch_trees

        torch_trees.reset_cudagraph_trees()
    raw = statistics.median(samples["raw"])
    ours = statistics.median(samples["ours"])
    ref = statistics.median(samples["torch"]) if "torch" in samples else None
    over_raw = statistics.median(o / r for o, r in zip(samples["ours"], samples["raw"]))
    over_ref = (
        statistics.median(o / t for o, t in zip(samples["ours"], samples["torch"]))
        if "torch" in samples
        else None
    )
    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "calls_per_sample": CALLS,
        "samples": REPEATS,
        "raw_replay_plus_copy_us": raw,
        "sapwood_tree_us": ours,
        "torch_tree_us": ref,
        "torch_tree_error": ref_error,
        "ours_over_raw": over_raw,
        "ours_over_torch_tree": over_ref,
        "target_ours_over_raw": 1.5,
        "target_ours_over_torch_tree": 0.6,
    }
    result["ratios"] = [
        {"label": "tree replay / raw graph replay + copy", "value": over_raw, "target": 1.5},
        {
            "label": "tree replay / torch's tree runtime",
            "value": result["ours_over_torch_tree"],
            "target": 0.6,
        },
    ]
    print(
        f"replay overhead per call, 3 pointwise ops on 1x1024 ({result['device']}, torch {torch.__version__})"
    )
    print(f"{'runtime':<34}{'median us/call':>16}{'ratio to ours':>16}")
    print(f"{'raw CUDAGraph.replay() + copy':<34}{raw:>16.2f}{raw / ours:>16.2f}")
    print(f"{'sapwood-cudagraph-trees':<34}{ours:>16.2f}{1.0:>16.2f}")
    if ref:
        print(f"{'torch._inductor.cudagraph_trees':<34}{ref:>16.2f}{ref / ours:>16.2f}")
    else:
        print(f"{'torch._inductor.cudagraph_trees':<34}{'n/a':>16}  {ref_error}")
    print(f"ours/raw = {result['ours_over_raw']:.2f} (target <= 1.5)", end="")
    if ref:
        print(f", ours/torch tree = {result['ours_over_torch_tree']:.2f} (target <= 0.6)")
    else:
        print()
    (out / f"{NAME}.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path("bench-results"))
