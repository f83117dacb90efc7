"""Per-call time of a compiled tiny Llama with 32 layers: sapwood vs torch.compile.

Both use an eager backend, so the difference is guard evaluation, input gathering and the
graph itself: dynamo's graph has 2,005 operations, sapwood's 1,806, because the 199
conversions that convert nothing (``x.to(torch.float32)`` on a float32 tensor,
``contiguous()`` on a contiguous one) are the tensor itself in sapwood's trace, with no node.
The ratio is the median of 15 interleaved rounds' ratios. Needs ``transformers`` (prints a note and writes an empty result
otherwise). Ratio sapwood / dynamo is the figure of merit (target: <= 1.0).

Run: ``PYTHONPATH=packages/graph/src:packages/tracer/src python benchmarks/bench_tracer_llama_per_call.py``
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys
import timeit

import torch

import sapwood_tracer

GPU = False
NAME = "tracer_llama_per_call"


def main(out: pathlib.Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    try:
        import transformers
    except ImportError:
        print("tiny llama per call: skipped (transformers not installed)")
        (out / f"{NAME}.json").write_text("{}")
        return {}
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        vocab_size=99,
        max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 99, (1, 8))
    sapwood_tracer.reset()
    torch._dynamo.reset()
    with torch.no_grad():
        model(input_ids=ids, use_cache=False)
        ours = sapwood_tracer.compile(model, backend=lambda gm, example_inputs: gm.forward)
        dynamo = torch.compile(model, backend="eager")
        ours(input_ids=ids, use_cache=False)
        dynamo(input_ids=ids, use_cache=False)
        times: dict[str, list[float]] = {"eager": [], "sapwood": [], "dynamo": []}
        ratios: list[float] = []
        order = [("eager", model), ("sapwood", ours), ("dynamo", dynamo)]
        for round_ in range(15):
            # interleaved rounds, the order of the two compiled ones alternating, so neither
            # always runs right after eager; each round gives one sapwood/dynamo ratio
            if round_ % 2:
                order = [order[0], order[2], order[1]]
            for name, fn in order:
                t = min(
                    timeit.repeat(
                        lambda fn=fn: fn(input_ids=ids, use_cache=False), number=10, repeat=5
                    )
                )
                times[name].append(t / 10)
            ratios.append(times["sapwood"][-1] / times["dynamo"][-1])
    result: dict[str, object] = {f"{k}_ms": statistics.median(v) * 1e3 for k, v in times.items()}
    # the median of the per-round ratios: machine noise hits both sides of a round alike
    result["ratio_sapwood_over_dynamo"] = statistics.median(ratios)
    result["round_ratios"] = ratios
    print(f"{'tiny llama 32 layers':<22}{'eager':>10}{'sapwood':>10}{'dynamo':>10}{'ratio':>8}")
    print(
        f"{'per call':<22}{result['eager_ms']:>8.2f}ms{result['sapwood_ms']:>8.2f}ms"
        f"{result['dynamo_ms']:>8.2f}ms{result['ratio_sapwood_over_dynamo']:>8.2f}"
    )
    result["python"] = sys.version.split()[0]
    result["torch"] = torch.__version__
    result["ratios"] = [
        {
            "label": "per call, tiny Llama 32 layers / dynamo",
            "value": result["ratio_sapwood_over_dynamo"],
            "target": 1.0,
        }
    ]
    (out / f"{NAME}.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench-results"))
