"""sapwood's demo: compile a small model, check it against eager, show speed and what was compiled.

Run it with ``nox -s demo`` (which installs sapwood the way a user would) or directly with
``python examples/demo.py [--backend NAME]``. Exits non-zero if a compiled result differs
from eager PyTorch.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

import sapwood
import sapwood_backend


class Block(nn.Module):
    """A pre-norm transformer block with causal self-attention."""

    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(dim, dim=2)
        q, k, v = (t.view(batch, tokens, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(dim // self.heads)
        causal = torch.ones(tokens, tokens, dtype=torch.bool).tril()
        weights = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        x = x + self.proj((weights @ v).transpose(1, 2).reshape(batch, tokens, dim))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 128, dim: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim) for _ in range(layers)])
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def per_call(fn: Callable[[], Any], calls: int = 50, repeats: int = 5) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="inductor", help="a backend name (default: inductor)")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    model = TinyGPT().eval()
    tokens = torch.randint(0, 128, (4, 32))

    captured: list[torch.fx.GraphModule] = []
    chosen = sapwood_backend.lookup_backend(args.backend)

    def recording_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        captured.append(gm)
        return chosen(gm, example_inputs)

    compiled = sapwood.compile(model, backend=recording_backend)

    print(f"sapwood {sapwood.__version__}, torch {torch.__version__}, backend {args.backend!r}")
    start = time.perf_counter()
    with torch.no_grad():
        first = compiled(tokens)
    first_call = time.perf_counter() - start

    ok = True
    with torch.no_grad():
        for trial in range(3):
            batch = tokens if trial == 0 else torch.randint(0, 128, tokens.shape)
            got, expected = compiled(batch), model(batch)
            error = (got - expected).abs().max().item()
            same = torch.allclose(got, expected, rtol=1e-4, atol=1e-4)
            ok &= same
            print(
                f"check {trial}: max |compiled - eager| = {error:.2e}  {'ok' if same else 'FAIL'}"
            )
        assert first.shape == (4, 32, 128)

        eager_time = per_call(lambda: model(tokens))
        compiled_time = per_call(lambda: compiled(tokens))

    print(f"\ncompiled: {len(captured)} graph(s)")
    for index, gm in enumerate(captured):
        ops = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
        inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        print(f"  graph {index}: {len(ops)} ops, {len(inputs)} inputs")
    print(f"\nfirst call (trace + compile): {first_call:.2f} s")
    print(f"eager per call:    {eager_time * 1e3:7.3f} ms")
    print(
        f"compiled per call: {compiled_time * 1e3:7.3f} ms  ({eager_time / compiled_time:.2f}x eager)"
    )
    if not ok:
        print("demo: compiled results differ from eager", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
