"""Per-call guard overhead on models with many submodules: sapwood vs torch.compile.

Two module trees built from plain ``torch.nn``, shaped like the models where the generated
guard code dominates a host-bound call:

* **ResNet-50 shape**: a stem, then Bottleneck blocks ``[3, 4, 6, 3]`` (conv/bn/relu, a
  ``downsample`` Sequential on each stage's first block) and a head: 148 modules and 314
  parameters and buffers, 8 channels wide at the stem, on 16x16 images, so compute is
  negligible.
* **ViT-B shape**: a patch embedding, 12 pre-norm encoder blocks (qkv/proj attention,
  fc1/GELU/fc2 MLP, identities where timm has them) and a head, at width 32: 257 modules
  and 152 parameters.

Both compilers get a backend that runs the graph once and then returns those outputs on
every call, so a call costs the guards, gathering the inputs and returning the outputs, and
nothing else. Everything runs under ``torch.no_grad()``. The columns are timed in
interleaved rounds and the ratio is the median of the rounds' ratios. The last two columns
are the generated ``sapwood_entry`` alone: its wall time called directly (guards, the C++
tensor check and the replay), and its own time under cProfile (``tottime``: without the C
functions it calls, and inflated by the profiler, which slows Python code and not C++; do not
compare it with dynamo's guards, which are C++). ``dyn.checked`` is torch.compile again with
the three guard shortcuts its config marks unsafe turned off (``skip_nnmodule_hook_guards``,
``skip_no_tensor_aliasing_guards_on_parameters``, ``skip_tensor_guards_with_matching_dict_tags``:
by default it does not see a hook added after compiling, a parameter passed twice, or a
parameter changed in place through ``.data``), so that both check the same things; the ratio
beside it is sapwood's time over that. ``inputs only`` is sapwood with the model declared
frozen (``guards="inputs"``, the opt-in for serving: the module's identity checked instead of
its tree), and its ratio to torch.compile's default.

Run: ``PYTHONPATH=packages/graph/src:packages/tracer/src python benchmarks/bench_tracer_module_guards.py``
"""

from __future__ import annotations

import cProfile
import inspect
import json
import pathlib
import pstats
import statistics
import sys
import timeit
from typing import Any

import torch
from torch import nn

import sapwood_tracer

GPU = False
NAME = "tracer_module_guards"

ROUNDS = 9


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, channels_in: int, width: int, stride: int) -> None:
        super().__init__()
        out = width * self.expansion
        self.conv1 = nn.Conv2d(channels_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or channels_in != out:
            self.downsample = nn.Sequential(
                nn.Conv2d(channels_in, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet50Shape(nn.Module):
    def __init__(self, width: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width * 4, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        channels = width * 4
        stages = []
        for i, blocks in enumerate([3, 4, 6, 3]):
            layer = []
            for b in range(blocks):
                stride = 2 if b == 0 and i > 0 else 1
                layer.append(Bottleneck(channels, width * 2**i, stride))
                channels = width * 2**i * Bottleneck.expansion
            stages.append(nn.Sequential(*layer))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.q_norm = nn.Identity()
        self.k_norm = nn.Identity()
        self.attn_drop = nn.Dropout(0.0)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        x = nn.functional.scaled_dot_product_attention(q, k, v)
        x = self.attn_drop(x).transpose(1, 2).reshape(b, n, c)
        return self.proj_drop(self.proj(x))


class Mlp(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, dim * 4)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(0.0)
        self.norm = nn.Identity()
        self.fc2 = nn.Linear(dim * 4, dim)
        self.drop2 = nn.Dropout(0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop2(self.fc2(self.norm(self.drop1(self.act(self.fc1(x))))))


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ls1 = nn.Identity()
        self.drop_path1 = nn.Identity()
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim)
        self.ls2 = nn.Identity()
        self.drop_path2 = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x))))
        return x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))


class ViTShape(nn.Module):
    def __init__(self, dim: int = 32, depth: int = 12, heads: int = 4, patch: int = 4) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + (16 // patch) ** 2, dim))
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def _replaying_backend(gm: Any, example_inputs: list[Any]) -> Any:
    """A backend whose compiled function returns the graph's outputs of the first call."""
    outputs = gm.forward(*example_inputs)

    def replay(*args: Any) -> Any:
        return outputs

    return replay


def _entry_tottime(fn: Any, x: torch.Tensor, calls: int) -> float:
    """Seconds per call spent in the generated ``sapwood_entry`` itself."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        fn(x)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    own = sum(v[2] for (_, _, name), v in stats.items() if name == "sapwood_entry")
    return own / calls


def _entry_wall(model: nn.Module, x: torch.Tensor) -> float:
    """Seconds per call of the one cache entry's generated function, called directly."""
    from sapwood_tracer.api import cache as caches

    (cache,) = [c for c in caches._caches.values() if c.entries]
    entry = cache.entries[0].fn
    bound = inspect.signature(type(model).forward).bind(model, x)
    bound.apply_defaults()  # the entry takes every argument in binding order
    frame_args = tuple(bound.arguments.values())
    scope = type(model).forward.__globals__
    return min(timeit.repeat(lambda: entry(frame_args, (), scope), number=200, repeat=9)) / 200


def _measure(label: str, model: nn.Module, x: torch.Tensor) -> dict[str, Any]:
    model.eval()
    sapwood_tracer.reset()
    torch._dynamo.reset()
    with torch.no_grad():
        ours = sapwood_tracer.compile(model, backend=_replaying_backend)
        dynamo = torch.compile(model, backend=_replaying_backend)
        ours(x)
        dynamo(x)
        times: dict[str, list[float]] = {"sapwood": [], "dynamo": []}
        ratios = []
        order = [("sapwood", ours), ("dynamo", dynamo)]
        for round_ in range(ROUNDS):
            for name, fn in order if round_ % 2 else order[::-1]:
                t = min(timeit.repeat(lambda fn=fn: fn(x), number=200, repeat=5)) / 200
                times[name].append(t)
            ratios.append(times["sapwood"][-1] / times["dynamo"][-1])
        entry = statistics.median(_entry_tottime(ours, x, 500) for _ in range(3))
        entry_wall = _entry_wall(model, x)
        checked = _dynamo_with_its_checks(model, x)
        frozen = _frozen_per_call(model, x)
    modules = sum(1 for _ in model.modules())
    tensors = sum(1 for _ in model.parameters()) + sum(1 for _ in model.buffers())
    result = {
        "modules": modules,
        "parameters_and_buffers": tensors,
        "sapwood_us": statistics.median(times["sapwood"]) * 1e6,
        "dynamo_us": statistics.median(times["dynamo"]) * 1e6,
        "ratio_sapwood_over_dynamo": statistics.median(ratios),
        "entry_wall_us": entry_wall * 1e6,
        "entry_tottime_us": entry * 1e6,
        "dynamo_checked_us": checked * 1e6 if checked is not None else None,
        "ratio_sapwood_over_dynamo_checked": (
            statistics.median(times["sapwood"]) / checked if checked else None
        ),
        "sapwood_inputs_only_us": frozen * 1e6,
        "ratio_inputs_only_over_dynamo": frozen / statistics.median(times["dynamo"]),
    }
    print(
        f"{label:<16}{modules:>8}{tensors:>8}{result['sapwood_us']:>10.1f}us"
        f"{result['dynamo_us']:>10.1f}us{result['ratio_sapwood_over_dynamo']:>8.2f}"
        f"{result['entry_wall_us']:>10.1f}us{result['entry_tottime_us']:>10.1f}us"
        + (
            f"{checked * 1e6:>10.1f}us{result['ratio_sapwood_over_dynamo_checked']:>8.2f}"
            if checked
            else ""
        )
        + f"{frozen * 1e6:>10.1f}us{result['ratio_inputs_only_over_dynamo']:>8.2f}",
        flush=True,
    )
    return result


def _frozen_per_call(model: nn.Module, x: torch.Tensor) -> float:
    """Seconds per call of sapwood with the model declared frozen (``guards="inputs"``: the
    module's identity checked, not its tree; never the default)."""
    sapwood_tracer.reset()
    frozen = sapwood_tracer.compile(model, backend=_replaying_backend, guards="inputs")
    frozen(x)
    return statistics.median(
        min(timeit.repeat(lambda: frozen(x), number=200, repeat=5)) / 200 for _ in range(ROUNDS)
    )


#: torch's guard shortcuts that its own config calls unsafe (a hook added or removed after
#: compiling, a parameter passed twice, a parameter's metadata changed in place, go unseen)
_DYNAMO_SHORTCUTS = (
    "skip_nnmodule_hook_guards",
    "skip_no_tensor_aliasing_guards_on_parameters",
    "skip_tensor_guards_with_matching_dict_tags",
)


def _dynamo_with_its_checks(model: nn.Module, x: torch.Tensor) -> float | None:
    """Seconds per call of torch.compile with those shortcuts off, so that it checks what
    sapwood checks (None where this torch lacks the flags)."""
    import torch._dynamo.config as config

    if not all(hasattr(config, name) for name in _DYNAMO_SHORTCUTS):
        return None
    saved = {name: getattr(config, name) for name in _DYNAMO_SHORTCUTS}
    try:
        for name in _DYNAMO_SHORTCUTS:
            setattr(config, name, False)
        torch._dynamo.reset()
        checked = torch.compile(model, backend=_replaying_backend)
        checked(x)
        return min(timeit.repeat(lambda: checked(x), number=200, repeat=5)) / 200
    finally:
        for name, value in saved.items():
            setattr(config, name, value)
        torch._dynamo.reset()


def main(out: pathlib.Path) -> dict:
    torch.manual_seed(0)
    print(
        f"{'per call':<16}{'modules':>8}{'tensors':>8}{'sapwood':>12}{'dynamo':>12}"
        f"{'ratio':>8}{'entry':>12}{'cProfile':>12}{'dyn.checked':>12}{'ratio':>8}"
        f"{'inputs only':>12}{'ratio':>8}"
    )
    result: dict[str, Any] = {
        "resnet50_shape": _measure("resnet50 shape", ResNet50Shape(), torch.randn(2, 3, 16, 16)),
        "vit_b_shape": _measure("vit-b shape", ViTShape(), torch.randn(2, 3, 16, 16)),
    }
    result["python"] = sys.version.split()[0]
    result["torch"] = torch.__version__
    result["ratios"] = [
        {
            "label": f"per call, {name.replace('_', ' ')} (guards only) / dynamo",
            "value": result[name]["ratio_sapwood_over_dynamo"],
            "target": 1.0,
        }
        for name in ("resnet50_shape", "vit_b_shape")
    ] + [
        {
            "label": f"per call, {name.replace('_', ' ')}, guards='inputs' (opt-in) / dynamo",
            "value": result[name]["ratio_inputs_only_over_dynamo"],
            "target": None,
        }
        for name in ("resnet50_shape", "vit_b_shape")
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench-results"))
