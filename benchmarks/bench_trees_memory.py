"""Pool memory of two branches A->B and A->B': one tree costs the larger branch, not the sum.

B and B' each need a large temporary. Recording B' after replaying A restores the allocator's
checkpoint of A's path, so B' reuses B's memory. Printed side by side: the pool of the tree with
both branches, each branch alone (its max) and their sum; and torch's own tree runtime on the
same callables (growth of ``torch.cuda.memory_reserved``).
"""

from __future__ import annotations

import json
import pathlib
import sys
import traceback

GPU = True
NAME = "trees_memory"
N = 1 << 22  # 16 MiB of float32 per tensor


def _a(xs: list) -> list:
    return [xs[0] + 1]


def _b(xs: list) -> list:
    t = (xs[0] * 2).exp()
    return [(t * t).sum(0, keepdim=True)]


def _b2(xs: list) -> list:
    t = (xs[0] * 3).sin()
    return [(t + t).sum(0, keepdim=True)]


def _ours(torch, branches: list) -> tuple[int, bool]:
    import sapwood_cudagraph_trees as trees

    trees.reset()
    torch.cuda.empty_cache()
    x = torch.randn(N, device="cuda")
    a = trees.cudagraphify(_a, [x], device_index=0, mode="inference")
    wrapped = {
        "B": trees.cudagraphify(_b, [x], device_index=0, mode="inference"),
        "B'": trees.cudagraphify(_b2, [x], device_index=0, mode="inference"),
    }
    ok = True
    for name in branches:
        for _ in range(3):
            trees.new_generation()
            got = wrapped[name](a([x]))[0]
            want = (_b if name == "B" else _b2)([x + 1])[0]
            ok = ok and bool(torch.allclose(got, want, rtol=1e-3, atol=1e-3))
    reserved = trees.tree_info(0).pool_reserved_bytes
    trees.reset()
    return reserved, ok


def _boxed(fn):
    """torch's tree runtime takes ownership of the argument list: the callee must empty it."""

    def boxed(xs: list) -> list:
        args = list(xs)
        xs.clear()
        return fn(args)

    return boxed


def _torch_tree(torch, branches: list) -> int | None:
    from torch._inductor import cudagraph_trees as ref

    ref.reset_cudagraph_trees()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    x = torch.randn(N, device="cuda")
    before = torch.cuda.memory_reserved()

    def make(fn, inputs):
        made = ref.cudagraphify(
            _boxed(fn),
            inputs,
            (),
            device_index=0,
            is_backward=False,
            is_inference=True,
            stack_traces=[None],
        )
        return made[0] if isinstance(made, tuple) else made

    fns: dict = {}
    for name in branches:
        for _ in range(3):
            ref.mark_step_begin()
            if "A" not in fns:
                fns["A"] = make(_a, [x])
            y = fns["A"]([x])
            if isinstance(y, tuple):
                y = list(y)
            fn = _b if name == "B" else _b2
            if name not in fns:
                fns[name] = make(fn, list(y))
            fns[name](list(y))
    grown = torch.cuda.memory_reserved() - before
    ref.reset_cudagraph_trees()
    return grown


def main(out: pathlib.Path) -> dict:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    both, ok_both = _ours(torch, ["B", "B'"])
    only_b, ok_b = _ours(torch, ["B"])
    only_b2, ok_b2 = _ours(torch, ["B'"])
    result: dict = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "sapwood_pool_both_branches": both,
        "sapwood_pool_A_B": only_b,
        "sapwood_pool_A_B2": only_b2,
        "max_of_branches": max(only_b, only_b2),
        "sum_of_branches": only_b + only_b2,
        "outputs_match_eager": ok_both and ok_b and ok_b2,
    }
    result["both_over_max"] = both / result["max_of_branches"]
    try:
        result["torch_tree_reserved_growth_both"] = _torch_tree(torch, ["B", "B'"])
        result["torch_tree_error"] = None
    except Exception as exc:
        result["torch_tree_reserved_growth_both"] = None
        result["torch_tree_error"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    result["ratios"] = [
        {
            "label": "pool of both branches / larger branch",
            "value": result["both_over_max"],
            "target": 1.0,
        },
    ]
    mib = 1 << 20
    print(f"pool memory of branches A->B and A->B' ({result['device']}, torch {torch.__version__})")
    print(f"{'what':<44}{'MiB':>10}")
    print(f"{'sapwood tree, A->B only':<44}{only_b / mib:>10.1f}")
    print(f"{'sapwood tree, A->B-prime only':<44}{only_b2 / mib:>10.1f}")
    print(f"{'max of the two branches':<44}{result['max_of_branches'] / mib:>10.1f}")
    print(f"{'sum of the two branches':<44}{result['sum_of_branches'] / mib:>10.1f}")
    print(f"{'sapwood tree, both branches':<44}{both / mib:>10.1f}")
    ref = result["torch_tree_reserved_growth_both"]
    ref_text = (
        f"{ref / mib:>10.1f}" if ref is not None else f"{'n/a':>10}  {result['torch_tree_error']}"
    )
    print(f"{'torch tree, both branches (reserved growth)':<44}{ref_text}")
    print(
        f"both/max = {result['both_over_max']:.2f} (target <= 1.0); outputs match eager: {result['outputs_match_eager']}"
    )
    (out / f"{NAME}.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path("bench-results"))
