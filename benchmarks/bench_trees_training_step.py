"""Host cost of the tree runtime in a GPT training step, on the CPU (no GPU needed).

The GPT of ``bench_stack_gpu`` (4 layers, d=256, batch 1, 32 tokens) is captured by
``torch.compile`` and split by AOT autograd with Inductor's partitioner; its forward and
backward graphs are wrapped by sapwood's tree runtime exactly as ``sapwood_backend``'s glue
wraps Inductor's (parameters static, saved values static in the backward, layout-guarded),
on a simulated device whose graph replays do nothing. What a step costs is then the host
work around the graphs: the runtime's replays, AOT autograd's wrappers, the autograd engine.

Two columns, measured alternately in this one process on two simulated devices:

* ``fresh outputs``: every replay builds a new tensor object per graph-owned output;
* ``reused outputs``: the outputs only autograd sees (saved activations, gradients) are
  declared reusable, as the glue declares them, so replays hand out the same objects.

Printed per step: the whole step, and the time spent inside the runtime's forward and
backward calls. Figures are minima over many short repeats (this measures host work on a
shared machine; the minimum is the least disturbed). A CPU build of torch lacks the one C++
call that compares the addresses of static inputs, so the runtime's figures here include a
Python loop over ~50 (forward) and ~100 (backward) inputs that a GPU host does not pay.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "integration-tests"))

from _timing import fmt_time, print_table, ratio, write_json
from zoo import GPT

GPU = False
NAME = "trees_training_step"
STEPS = 20  # steps per repeat
REPEATS = 40  # per column, alternating


def _column(torch: Any, device_index: int, reuse: bool) -> tuple[Any, dict[str, float]]:
    """A compiled GPT training step on simulated device ``device_index``, and its timers."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    import sapwood_cudagraph_trees as trees
    from sapwood_backend.cudagraphs import _reusable_outputs
    from sapwood_cudagraph_trees import _api
    from sapwood_cudagraph_trees._simulated import SimulatedDeviceLayer

    class HostOnlyLayer(SimulatedDeviceLayer):
        """Replays cost nothing: what is left is the runtime's host work."""

        def replayer(self, graph: Any) -> Any:
            return lambda: None

    layer = HostOnlyLayer(arena_bytes=1 << 27)
    _api._install_layer(device_index, lambda: layer)
    timers = {"forward": 0.0, "backward": 0.0}

    def compiler(mode: str) -> Any:
        def compile_graph(gm: Any, example_inputs: list[Any]) -> Any:
            if mode == "backward":
                names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
                static = range(sum(1 for n in names if not n.startswith("tangents")))
            else:  # the parameters, lifted in front of the one user input (the tokens)
                static = range(len(example_inputs) - 1)
            run = trees.cudagraphify(
                make_boxed_func(gm.forward),
                example_inputs,
                tuple(static),
                device_index=device_index,
                mode=mode,
                name=mode,
                layout_guarded=True,
                reusable_output_idxs=_reusable_outputs(gm, mode) if reuse else (),
            )

            def timed(args: list[Any]) -> Any:
                start = time.perf_counter()
                try:
                    return run(args)
                finally:
                    timers[mode] += time.perf_counter() - start

            timed._boxed_call = True  # type: ignore[attr-defined]
            return timed

        return compile_graph

    backend = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        partition_fn=min_cut_rematerialization_partition,
    )
    torch.manual_seed(0)
    model = GPT(vocab=512, dim=256, heads=4, layers=4)
    tokens = torch.randint(0, 512, (1, 32))
    compiled = torch.compile(model, backend=backend)
    params = list(model.parameters())

    def step() -> None:
        loss = compiled(tokens).float().pow(2).mean()
        loss.backward()
        for p in params:  # the optimizer's step is not the runtime's business: only drop grads
            p.grad = None

    for _ in range(5):  # warm up, record, replay
        step()
    info = trees.tree_info(device_index)
    replays = {f.mode: f.replays for f in info.functions}
    if replays.get("forward", 0) < 2 or replays.get("backward", 0) < 2:
        raise RuntimeError(f"the graphs do not replay: {trees.render(device_index)}")
    return step, timers


def main(out: Path) -> dict[str, Any]:
    import torch

    from sapwood_cudagraph_trees import _api

    columns = {"fresh outputs": (8, False), "reused outputs": (9, True)}
    made = {name: _column(torch, index, reuse) for name, (index, reuse) in columns.items()}
    best: dict[str, dict[str, float]] = {
        name: {"step": float("inf"), "forward": float("inf"), "backward": float("inf")}
        for name in columns
    }
    try:
        for _ in range(REPEATS):
            for name, (step, timers) in made.items():
                timers["forward"] = timers["backward"] = 0.0
                start = time.perf_counter()
                for _ in range(STEPS):
                    step()
                elapsed = (time.perf_counter() - start) / STEPS
                figures = best[name]
                figures["step"] = min(figures["step"], elapsed)
                figures["forward"] = min(figures["forward"], timers["forward"] / STEPS)
                figures["backward"] = min(figures["backward"], timers["backward"] / STEPS)
    finally:
        for index, _ in columns.values():
            _api._uninstall_layer(index)

    reference = best["fresh outputs"]
    rows = []
    for name, figures in best.items():
        runtime = figures["forward"] + figures["backward"]
        rows.append(
            [
                name,
                fmt_time(figures["step"]),
                fmt_time(figures["forward"]),
                fmt_time(figures["backward"]),
                fmt_time(runtime),
                ratio(runtime, reference["forward"] + reference["backward"]),
            ]
        )
    print_table(
        "GPT training step on a simulated device (host work only; min over repeats)",
        ["column", "step", "trees forward", "trees backward", "trees total", "ratio"],
        rows,
    )
    ours, ref = best["reused outputs"], best["fresh outputs"]
    return write_json(
        out,
        NAME,
        {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "results": best,
            "ratios": [
                {
                    "label": "trees time per training step, reused / fresh outputs",
                    "value": (ours["forward"] + ours["backward"])
                    / (ref["forward"] + ref["backward"]),
                    "target": None,
                    "better": "lower",
                },
                {
                    "label": "whole training step (host), reused / fresh outputs",
                    "value": ours["step"] / ref["step"],
                    "target": None,
                    "better": "lower",
                },
            ],
        },
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("bench-results"))
