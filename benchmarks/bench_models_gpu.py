"""Whole models on the GPU: sapwood.compile against torch.compile, in the same mode.

Every workload is compiled with ``torch.compile(model, mode=M)`` and with
``sapwood.compile(model, mode=M)`` in this one process, on copies of one model with the same
weights and inputs; every figure is printed next to torch's, as a ratio sapwood / torch.

Workloads (``--only`` takes a workload name, or ``workload/mode``; a substring also matches):

``gpt_train`` (modes ``default``, ``reduce-overhead``)
    A GPT training step. ``integration-tests/zoo.py``'s ``GPT(vocab=512, dim=256, heads=4,
    layers=4)``, fp32, inside a module whose ``forward(tokens, targets)`` also computes
    ``F.cross_entropy(logits.view(-1, V), targets.view(-1))``, so the loss is compiled too;
    batch 1x32 tokens. The step is written the way users write it, ``loss`` living on into
    the next step: ``loss = model(tok, tgt); loss.backward(); opt.step();
    opt.zero_grad(set_to_none=True)`` in the loop itself (the previous step's loss is still
    alive while the next forward runs, which is what a CUDA graph tree must cope with).
    AdamW, eager (not compiled). Per-call target: ≤ 0.95 in reduce-overhead, ≤ 1.0 in default.
``resnet50_train`` (``reduce-overhead``)
    torchvision's ``resnet50(weights=None)``, bf16 weights and inputs, channels_last (what
    convolutions on tensor cores and Inductor's layout choice prefer), batch 32 of 224x224,
    BatchNorm in train mode (its running statistics are buffers the graph mutates). The
    cross entropy on random labels is computed inside the compiled module, as for the GPT;
    SGD with momentum 0.9, eager; the same user loop. Per-call target: ≤ 1.0.
``resnet50_infer`` (``default``, ``reduce-overhead``)
    The same network in eval mode under ``torch.no_grad()``, batch 32, bf16, channels_last;
    the logits are the output. Per-call target: ≤ 1.0.
``vit_infer`` (``default``, ``reduce-overhead``)
    timm's ``vit_base_patch16_224`` (``pretrained=False``; torchvision's ``vit_b_16`` when
    timm does not import), bf16, eval, ``no_grad``, batch 8 of 224x224. Target: ≤ 1.0.
``llama_infer`` (``default``, ``reduce-overhead``)
    ``transformers.LlamaForCausalLM`` built from a ``LlamaConfig`` alone (no download):
    hidden 512, 4 layers, 8 heads (8 key/value heads), intermediate 1376, vocab 32000,
    attention ``sdpa``; bf16, eval, ``no_grad``, batch 4 x 256 tokens,
    ``model(input_ids=ids, use_cache=False).logits``. The whole ``LlamaForCausalLM`` is
    compiled, as users compile it. Target: ≤ 1.0.

For every (workload, mode, compiler) column:

* **first call** (``once_seconds``): compiling and running the first call — for training,
  the first compiled forward and backward (the optimizer step follows, untimed);
* **first-call peak memory**: both stacks are reset at the start of the pair
  (``torch._dynamo.reset()``, ``sapwood.reset()``, ``sapwood_cudagraph_trees.reset()``); before
  each column's first call ``gc.collect()``, cuBLAS's workspaces cleared,
  ``torch.cuda.empty_cache()`` and ``torch.cuda.reset_peak_memory_stats()``; the figure is
  ``torch.cuda.max_memory_allocated()`` during the first call minus
  ``torch.cuda.memory_allocated()`` just before it. (cuBLAS keeps a 32 MiB workspace per
  stream it ran on, which both tree runtimes clear around warm-ups and recordings: left in
  the baseline, it made figures smaller by its size, even negative.) The two columns of a
  pair stay alive together (they are timed interleaved afterwards), so the second column is
  measured with the first one's graphs and outputs allocated; they are in its baseline and
  subtracted. For training, one eager step creates the optimizer's state before the
  baseline, so the figure is what compiling and running the model costs;
* **steady peak memory**: after the first call, a check, ``WARM_CALLS`` more calls (in
  reduce-overhead, enough for the trees to record and replay) and a second check, the same
  clean-up, then the peak allocated during the timed number of calls, minus the same
  baseline. Memory inside a CUDA graph pool is not "allocated" while graphs replay (their
  outputs are made from the pool's addresses), so in reduce-overhead the pools show only in
  the reserved counterparts, ``1st rsv`` and ``steady rsv`` (``max_memory_reserved()`` minus
  ``memory_reserved()`` before the first call), printed and in the JSON without a target;
* **per call**: the pair is timed in ``ROUNDS`` interleaved rounds, alternating which column
  goes first; each round runs the user loop a fixed number of calls (3 repeats, median),
  and the ratio is the median of the rounds' ratios (the host's speed drifts between rounds).
  Which column is built (and timed) first alternates from pair to pair (``*`` in the table).

Targets: per call as above; first-call peak memory sapwood / torch ≤ 1.1; steady peak
memory sapwood / torch ≤ 1.05 (memory ratios take each figure as at least 1 MiB, so two
near-zero figures compare as equal). Before timing, each column's output is checked against
the eager model with ``assert_close`` (bf16: rtol 5e-2, atol 5e-2 times the largest
magnitude of the expected output; fp32: 2e-3) after the first call and again after the warm
calls (in reduce-overhead, a replay); for training, the first call's loss and gradients
(bf16 gradients of a deep network differ element by element between any two orders of
rounding, so there all gradients together, against an fp32 copy of the model on the same
weights and inputs: the relative L2 error of the compiled gradients must be ≤ 0.1, or at
most 1.5 times that of eager bf16's own, both shown -- with BatchNorm in training the bf16
gradients of a network at initialisation are far from fp32's for eager too) and a later
step's loss. A mismatch is printed in the ``check`` column, and the column is still
timed. A column that fails is reported with its error without stopping the others. For the
sapwood reduce-overhead columns the tree's functions are printed (warm-ups, recordings,
replays, fallbacks, why one runs eagerly), to show whether graphs replayed.

Compile caches: Inductor's FX graph cache and AOT autograd's cache are turned off, so no
first call is a cache hit of a graph compiled earlier in the run (dynamo's and sapwood's
graphs differ in detail, so a hit would favour one side by chance). Triton's compiled
kernels stay cached on disk; the first workload of a kind that compiles pays for them. To
keep that off the measured columns, each workload is first compiled once with
``torch.compile`` and once with ``sapwood.compile`` (default mode) and run once, unmeasured
(the kernel warm-up; off with ``--no-warmup``): every measured first call then finds its
kernels and their autotuning results (benchmarks that allocate an L2-sized buffer during a
kernel's first run) ready, as a second run of the same script would.

``python benchmarks/bench_models_gpu.py [OUT] [--only NAME ...] [--quick] [--no-warmup]``
(OUT first; default ``bench-results``). ``--quick`` runs fewer rounds and calls, for a first
look. The full run takes about 6 minutes on an H100, two thirds of it compiling (the
kernel warm-ups about 1.5 minutes); ``--quick`` about 5.

``--cpu-smoke`` runs every code path on the CPU with tiny sizes (GPT dim 32; ResNet-18 at
32x32, or a small stand-in ResNet defined here when torchvision is missing; a ViT of patch 16
at 32x32, or a stand-in when neither timm nor torchvision is there; Llama hidden 64), fp32,
both stacks with ``backend="eager"`` (the mode names are then only labels) and no CUDA call.
It checks that the program runs; its figures mean nothing, and its JSON
(``models_gpu_cpu_smoke.json``) keeps them out of ``ratios`` so the report ignores it.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "integration-tests"))

from _timing import fmt_time, once_seconds, per_call_seconds, print_table, write_json

GPU = True
NAME = "models_gpu"

#: interleaved timing rounds of the two columns of a pair (``--quick``: QUICK_ROUNDS)
ROUNDS = 7
QUICK_ROUNDS = 3
#: calls after the first one and its check, before the steady-state figures
WARM_CALLS = 3
#: per-call timing repeats inside a round (the median is the round's sample)
REPEATS = 3
COMPILERS = ("torch", "sapwood")
REFERENCE, TARGET = COMPILERS
FIRST_PEAK_TARGET = 1.1
STEADY_PEAK_TARGET = 1.05
MIB = 1 << 20


# ------------------------------------------------------------------------------ models
class LanguageModelLoss(nn.Module):
    """A language model whose forward also computes the loss, so the loss is compiled too."""

    def __init__(self, model: nn.Module, vocab: int) -> None:
        super().__init__()
        self.model = model
        self.vocab = vocab

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.model(tokens)
        return F.cross_entropy(logits.view(-1, self.vocab), targets.view(-1))


class ClassifierLoss(nn.Module):
    """An image classifier whose forward also computes the cross entropy of its logits."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.model(images).float(), labels)


class StandInResidualBlock(nn.Module):
    def __init__(self, channels_in: int, channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or channels_in != channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(channels_in, channels, 1, stride, bias=False), nn.BatchNorm2d(channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class StandInResNet(nn.Module):
    """``--cpu-smoke`` only, when torchvision is missing: a stem, two residual blocks with
    batch norm, average pooling and a linear head — the kinds of layer of a ResNet."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU()
        )
        self.blocks = nn.Sequential(StandInResidualBlock(8, 8, 1), StandInResidualBlock(8, 16, 2))
        self.fc = nn.Linear(16, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(images))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class StandInViTBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        qkv = self.qkv(self.norm1(x)).view(batch, tokens, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        attended = F.scaled_dot_product_attention(q, k, v).transpose(1, 2)
        x = x + self.proj(attended.reshape(batch, tokens, dim))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class StandInViT(nn.Module):
    """``--cpu-smoke`` only, when neither timm nor torchvision is there: patch embedding by
    a strided convolution, a class token, position embeddings, pre-norm blocks, a head."""

    def __init__(
        self, image: int = 32, patch: int = 16, dim: int = 64, depth: int = 2, classes: int = 10
    ) -> None:
        super().__init__()
        self.patches = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(StandInViTBlock(dim, heads=4) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patches(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))


# --------------------------------------------------------------------------- workloads
@dataclass(frozen=True)
class Setting:
    """Where and how big: the GPU run, or the CPU smoke run with tiny sizes in fp32."""

    smoke: bool

    @property
    def device(self) -> str:
        return "cpu" if self.smoke else "cuda"

    @property
    def low_precision(self) -> torch.dtype:
        """The dtype of the workloads the brief runs in bf16 (fp32 in the smoke run)."""
        return torch.float32 if self.smoke else torch.bfloat16


@dataclass
class BuiltModel:
    """A workload's eager model, on its device, and how to call and check it."""

    module: nn.Module
    inputs: tuple[Any, ...]
    label: str
    dtype: torch.dtype
    #: ``call(module, inputs)`` -> the output checked against eager (inference)
    call: Callable[[Any, tuple[Any, ...]], Any] | None = None
    #: ``optimizer(parameters)`` (training)
    optimizer: Callable[[Any], torch.optim.Optimizer] | None = None

    @property
    def tolerance(self) -> float:
        return 5e-2 if self.dtype == torch.bfloat16 else 2e-3

    @property
    def grad_tolerance(self) -> float:
        """bf16 only: the relative L2 error of all gradients together."""
        return 1e-1


def _call_positional(module: Any, inputs: tuple[Any, ...]) -> Any:
    return module(*inputs)


def _llama_logits(module: Any, inputs: tuple[Any, ...]) -> Any:
    return module(input_ids=inputs[0], use_cache=False).logits


def _build_gpt_train(setting: Setting) -> BuiltModel:
    from zoo import GPT

    vocab, dim, layers, tokens = (64, 32, 2, 8) if setting.smoke else (512, 256, 4, 32)
    torch.manual_seed(0)
    model = LanguageModelLoss(GPT(vocab=vocab, dim=dim, heads=4, layers=layers), vocab)
    device = setting.device
    return BuiltModel(
        module=model.to(device).train(),
        inputs=(
            torch.randint(0, vocab, (1, tokens), device=device),
            torch.randint(0, vocab, (1, tokens), device=device),
        ),
        label=f"zoo GPT(vocab={vocab}, dim={dim}, heads=4, layers={layers}) + cross entropy, "
        f"1x{tokens} tokens, fp32, AdamW",
        dtype=torch.float32,
        optimizer=lambda params: torch.optim.AdamW(params, lr=1e-4),
    )


def _resnet(setting: Setting) -> tuple[nn.Module, str]:
    try:
        import torchvision
    except ImportError:
        if not setting.smoke:
            raise
        torch.manual_seed(0)
        return StandInResNet(), "STAND-IN ResNet of this file (torchvision not installed)"
    torch.manual_seed(0)
    if setting.smoke:
        return torchvision.models.resnet18(weights=None, num_classes=10), "torchvision resnet18"
    return torchvision.models.resnet50(weights=None), "torchvision resnet50"


def _images(setting: Setting, batch: int, size: int) -> torch.Tensor:
    torch.manual_seed(1)
    images = torch.randn(batch, 3, size, size, device=setting.device)
    return images.to(dtype=setting.low_precision, memory_format=torch.channels_last)


def _build_resnet(setting: Setting, training: bool) -> BuiltModel:
    net, name = _resnet(setting)
    batch, size = (4, 32) if setting.smoke else (32, 224)
    dtype = setting.low_precision
    images = _images(setting, batch, size)
    described = f"{name}, batch {batch}x3x{size}x{size}, {str(dtype).removeprefix('torch.')}"
    described += ", channels_last"
    if not training:
        return BuiltModel(
            module=net.to(device=setting.device, dtype=dtype, memory_format=torch.channels_last)
            .eval()
            .requires_grad_(False),
            inputs=(images,),
            label=described + ", eval, no_grad",
            dtype=dtype,
            call=_call_positional,
        )
    classes = net.fc.out_features
    model = ClassifierLoss(net).to(
        device=setting.device, dtype=dtype, memory_format=torch.channels_last
    )
    labels = torch.randint(0, classes, (batch,), device=setting.device)
    return BuiltModel(
        module=model.train(),
        inputs=(images, labels),
        label=described + ", BatchNorm in train mode, cross entropy inside, SGD momentum 0.9",
        dtype=dtype,
        optimizer=lambda params: torch.optim.SGD(params, lr=1e-2, momentum=0.9),
    )


def _vit(setting: Setting) -> tuple[nn.Module, str]:
    torch.manual_seed(0)
    small = {"img_size": 32, "embed_dim": 64, "depth": 2, "num_heads": 4, "num_classes": 10}
    try:
        import timm

        if setting.smoke:
            return (
                timm.create_model("vit_base_patch16_224", pretrained=False, **small),
                "timm vit_base_patch16_224 shrunk to 32x32, dim 64, depth 2",
            )
        return timm.create_model("vit_base_patch16_224", pretrained=False), (
            "timm vit_base_patch16_224"
        )
    except ImportError:
        pass
    try:
        import torchvision
    except ImportError:
        if not setting.smoke:
            raise
        return StandInViT(), "STAND-IN ViT of this file (neither timm nor torchvision installed)"
    if setting.smoke:
        vit = torchvision.models.VisionTransformer(
            image_size=32, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128
        )
        return vit, "torchvision VisionTransformer at 32x32, dim 64, 2 layers (timm missing)"
    return torchvision.models.vit_b_16(weights=None), "torchvision vit_b_16 (timm missing)"


def _build_vit(setting: Setting) -> BuiltModel:
    net, name = _vit(setting)
    batch, size = (2, 32) if setting.smoke else (8, 224)
    dtype = setting.low_precision
    torch.manual_seed(1)
    images = torch.randn(batch, 3, size, size, device=setting.device, dtype=dtype)
    return BuiltModel(
        module=net.to(device=setting.device, dtype=dtype).eval().requires_grad_(False),
        inputs=(images,),
        label=f"{name}, batch {batch}x3x{size}x{size}, {str(dtype).removeprefix('torch.')}, "
        "eval, no_grad",
        dtype=dtype,
        call=_call_positional,
    )


def _build_llama(setting: Setting) -> BuiltModel:
    import transformers

    transformers.logging.set_verbosity_error()
    if setting.smoke:
        hidden, layers, heads, intermediate, vocab, batch, seq = 64, 2, 4, 128, 256, 2, 16
    else:
        hidden, layers, heads, intermediate, vocab, batch, seq = 512, 4, 8, 1376, 32000, 4, 256
    config = transformers.LlamaConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=intermediate,
        vocab_size=vocab,
        attn_implementation="sdpa",
    )
    dtype = setting.low_precision
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(device=setting.device, dtype=dtype)
    ids = torch.randint(0, vocab, (batch, seq), device=setting.device)
    return BuiltModel(
        module=model.eval().requires_grad_(False),
        inputs=(ids,),
        label=f"transformers {transformers.__version__} LlamaForCausalLM(hidden {hidden}, "
        f"{layers} layers, {heads} heads, intermediate {intermediate}, vocab {vocab}), "
        f"sdpa, batch {batch}x{seq}, {str(dtype).removeprefix('torch.')}, eval, no_grad, "
        "use_cache=False",
        dtype=dtype,
        call=_llama_logits,
    )


@dataclass(frozen=True)
class Workload:
    name: str
    #: per-call target of sapwood / torch, by mode (the modes measured, in order)
    per_call_targets: dict[str, float]
    training: bool
    #: calls per column and round, also the steady-state calls (full run, ``--quick``)
    calls: int
    quick_calls: int
    build: Callable[[Setting], BuiltModel]


WORKLOADS = (
    Workload(
        "gpt_train", {"default": 1.0, "reduce-overhead": 0.95}, True, 50, 20, _build_gpt_train
    ),
    Workload(
        "resnet50_train",
        {"reduce-overhead": 1.0},
        True,
        10,
        4,
        lambda setting: _build_resnet(setting, training=True),
    ),
    Workload(
        "resnet50_infer",
        {"default": 1.0, "reduce-overhead": 1.0},
        False,
        20,
        8,
        lambda setting: _build_resnet(setting, training=False),
    ),
    Workload("vit_infer", {"default": 1.0, "reduce-overhead": 1.0}, False, 30, 10, _build_vit),
    Workload("llama_infer", {"default": 1.0, "reduce-overhead": 1.0}, False, 30, 10, _build_llama),
)


# ---------------------------------------------------------------------------- columns
def _assert_close(got: Any, expected: Any, tolerance: float, what: str) -> None:
    got, expected = got.detach().float(), expected.detach().float()
    scale = max(1.0, float(expected.abs().max()))
    torch.testing.assert_close(
        got, expected, rtol=tolerance, atol=tolerance * scale, msg=lambda m: f"{what}: {m}"
    )


def _relative_l2(got: list[torch.Tensor], expected: list[torch.Tensor]) -> float:
    """``|got - expected| / |expected|`` over all the tensors together, in fp32."""
    a = torch.cat([g.float().flatten() for g in got])
    b = torch.cat([g.float().flatten() for g in expected])
    return float((a - b).norm() / b.norm().clamp_min(1e-12))


def _short(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {' / '.join(lines[:3])}"[:300]


class Column:
    """One compiled copy of a workload's model, driven the way a user's loop drives it.

    ``kept`` is the last call's output (the loss, for training): it stays alive into the
    next call, as a loop variable does in user code, and nothing else holds an older one.
    """

    def __init__(self, built: BuiltModel, compile_model: Callable[[nn.Module], Any]) -> None:
        self.built = built
        self.model = copy.deepcopy(built.module)
        self.compile_model = compile_model
        self.compiled: Any = None
        self.kept: Any = None
        self.checks: list[str] = []
        self.notes: list[str] = []  # figures the checks found, shown whether they passed or not

    def _record_check(self, what: str, check: Callable[[], None]) -> None:
        try:
            check()
            self.checks.append(f"{what} ok")
        except AssertionError as error:
            self.checks.append(f"{what} MISMATCH: {_short(error)}")

    @property
    def check(self) -> str:
        bad = [c for c in self.checks if "MISMATCH" in c]
        verdict = "; ".join(bad) if bad else ("ok" if self.checks else "not run")
        return ", ".join([verdict, *self.notes])


class InferenceColumn(Column):
    def prepare(self) -> None:
        """The eager output to check against, then compile (lazily: nothing traced yet)."""
        assert self.built.call is not None
        with torch.no_grad():
            self.expected = self.built.call(self.model, self.built.inputs)
        self.compiled = self.compile_model(self.model)

    def first_call(self) -> None:
        assert self.built.call is not None
        with torch.no_grad():
            self.kept = self.built.call(self.compiled, self.built.inputs)

    def check_first(self) -> None:
        tolerance = self.built.tolerance
        self._record_check(
            "first call", lambda: _assert_close(self.kept, self.expected, tolerance, "output")
        )

    def check_later(self) -> None:
        """After the warm calls: in reduce-overhead, the output of a replay."""
        tolerance = self.built.tolerance
        self._record_check(
            "later call", lambda: _assert_close(self.kept, self.expected, tolerance, "output")
        )

    def run(self, calls: int) -> None:
        call, compiled, inputs = self.built.call, self.compiled, self.built.inputs
        assert call is not None
        # the previous output lives on only in `out`, until the next call has returned
        out, self.kept = self.kept, None
        with torch.no_grad():
            for _ in range(calls):
                out = call(compiled, inputs)
        self.kept = out


class TrainingColumn(Column):
    def prepare(self) -> None:
        """One eager step (it creates the optimizer's state), the eager loss and gradients to
        check against, then compile (lazily: nothing traced yet)."""
        assert self.built.optimizer is not None
        model, inputs = self.model, self.built.inputs
        self.opt = self.built.optimizer(model.parameters())
        model(*inputs).backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        loss = model(*inputs)
        loss.backward()
        self.expected_loss = loss.detach()
        # on the host, so that the memory baseline does not hold a copy of the gradients
        self.expected_grads = [p.grad.detach().to("cpu", copy=True) for p in model.parameters()]
        self.opt.zero_grad(set_to_none=True)
        self.fp32_grads: list[torch.Tensor] | None = None
        if self.built.dtype == torch.bfloat16:
            # the same weights and inputs in fp32: what bf16 gradients are measured against
            wide = copy.deepcopy(model).float()
            wide_inputs = [x.float() if x.is_floating_point() else x for x in inputs]
            wide(*wide_inputs).backward()
            self.fp32_grads = [p.grad.detach().to("cpu") for p in wide.parameters()]
            del wide, wide_inputs
        self.compiled = self.compile_model(model)

    def first_call(self) -> None:
        loss = self.compiled(*self.built.inputs)
        loss.backward()
        self.kept = loss

    def check_first(self) -> None:
        def compare() -> None:
            _assert_close(self.kept, self.expected_loss, self.built.tolerance, "loss")
            grads = [p.grad.detach().to("cpu") for p in self.model.parameters()]
            if self.built.dtype != torch.bfloat16:
                for i, (got, expected) in enumerate(zip(grads, self.expected_grads)):
                    _assert_close(got, expected, self.built.tolerance, f"grad {i}")
                return
            # bf16 gradients of a deep network differ element by element between any two
            # orders of rounding (fused or not), most in the first layers: compare all of
            # them together, by the relative L2 norm of the difference from fp32's, beside
            # eager bf16's own difference
            assert self.fp32_grads is not None
            error = _relative_l2(grads, self.fp32_grads)
            eager_error = _relative_l2(self.expected_grads, self.fp32_grads)
            self.notes.append(f"grads rel. L2 vs fp32 {error:.3f} (eager bf16 {eager_error:.3f})")
            allowed = max(self.built.grad_tolerance, 1.5 * eager_error)
            assert error <= allowed, (
                f"gradients: relative L2 error from fp32 {error:.3f} > {allowed:.3f} "
                f"(eager bf16: {eager_error:.3f})"
            )

        try:
            self._record_check("first step", compare)
        finally:
            del self.expected_grads
            self.fp32_grads = None
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)

    def check_later(self) -> None:
        """One more step, its loss against the eager model's on the same weights (in
        reduce-overhead, the loss of a replay)."""
        inputs = self.built.inputs
        with torch.no_grad():
            expected = self.model(*inputs)
        loss = self.compiled(*inputs)
        self.kept = loss
        try:
            self._record_check(
                "later step", lambda: _assert_close(loss, expected, self.built.tolerance, "loss")
            )
        finally:
            loss.backward()
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)

    def run(self, steps: int) -> None:
        compiled, opt, inputs = self.compiled, self.opt, self.built.inputs
        # The loop as users write it: the previous step's loss is still alive (in `loss`)
        # while the next forward runs, and is dropped when the next one replaces it.
        loss, self.kept = self.kept, None
        for _ in range(steps):
            loss = compiled(*inputs)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        self.kept = loss


# ----------------------------------------------------------------------------- memory
class Memory:
    """Figures of the CUDA caching allocator as differences from a baseline (None on CPU)."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda

    def settle(self) -> None:
        """Free what can be freed: garbage, the allocator's cached blocks, cuBLAS workspaces.

        cuBLAS keeps a workspace (32 MiB on Hopper) per stream it ran on, allocated through
        the caching allocator and freed only when the workspaces are cleared, as both tree
        runtimes do around their warm-ups and recordings. Left in the baseline, a workspace
        that an eager call allocated and a tree runtime then cleared would make a figure
        smaller by its size, or below zero; cleared first, each figure counts the workspaces
        its own calls allocate.
        """
        gc.collect()
        if self.cuda:
            torch.cuda.synchronize()
            clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
            if clear is not None:
                clear()
            torch.cuda.empty_cache()

    def baseline(self) -> tuple[int, int] | None:
        """Allocated and reserved bytes now, after settling; the peaks start from here."""
        self.settle()
        if not self.cuda:
            return None
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated(), torch.cuda.memory_reserved()

    def reset_peak(self) -> None:
        """Settle, then start the peaks from here (the baseline they subtract stays)."""
        self.settle()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()

    def peak_since(self, base: tuple[int, int] | None) -> tuple[int | None, int | None]:
        if base is None:
            return None, None
        torch.cuda.synchronize()
        return (
            torch.cuda.max_memory_allocated() - base[0],
            torch.cuda.max_memory_reserved() - base[1],
        )


def _reset_stacks(cuda: bool) -> None:
    import sapwood
    import sapwood_cudagraph_trees

    torch._dynamo.reset()
    sapwood.reset()
    sapwood_cudagraph_trees.reset()
    if cuda:
        torch.cuda.synchronize()


def _compiler(name: str, mode: str, smoke: bool) -> Callable[[nn.Module], Any]:
    import sapwood

    compile_fn: Any = torch.compile if name == "torch" else sapwood.compile
    if smoke:
        return lambda module: compile_fn(module, backend="eager")
    return lambda module: compile_fn(module, mode=mode)


def _start_column(
    workload: Workload,
    built: BuiltModel,
    name: str,
    mode: str,
    setting: Setting,
    memory: Memory,
    calls: int,
) -> tuple[Column, dict[str, Any]]:
    """Build, first call, checks, warm calls and the steady-state memory of one column."""
    kind = TrainingColumn if workload.training else InferenceColumn
    column = kind(built, _compiler(name, mode, setting.smoke))
    column.prepare()
    sync = None if setting.smoke else torch.cuda.synchronize
    base = memory.baseline()
    figures: dict[str, Any] = {"first_call": once_seconds(column.first_call, sync)}
    figures["first_call_peak"], figures["first_call_peak_reserved"] = memory.peak_since(base)
    column.check_first()
    column.run(WARM_CALLS)
    column.check_later()
    memory.reset_peak()
    column.run(calls)
    figures["steady_peak"], figures["steady_peak_reserved"] = memory.peak_since(base)
    figures["check"] = column.check
    return column, figures


def _warm_kernels(workload: Workload, built: BuiltModel) -> None:
    """Compile the workload once with each stack (default mode), run it once, forget it: the
    Triton kernels and their autotuning results land in the caches before any measured first
    call, for both columns alike. (A kernel with several launch configurations is benchmarked
    at its first run, with an L2-sized buffer allocated (50 MiB on an H100) while the call's
    activations are alive; the result is cached on disk by the kernel's source. Warmed by
    torch alone, every sapwood kernel whose source differed in any detail paid that in
    sapwood's first call and not in torch's: gpt_train's default-mode 1.64x.)"""
    import sapwood

    for name, compile_fn in (("torch", torch.compile), ("sapwood", sapwood.compile)):
        start = time.perf_counter()
        compiled: Any = None
        try:
            compiled = compile_fn(copy.deepcopy(built.module))
            if workload.training:
                compiled(*built.inputs).backward()
            else:
                assert built.call is not None
                with torch.no_grad():
                    built.call(compiled, built.inputs)
            torch.cuda.synchronize()
            print(f"  kernel warm-up, {name} (unmeasured): {fmt_time(time.perf_counter() - start)}")
        except Exception as error:
            print(
                f"  kernel warm-up, {name}, failed: measured first calls may include kernel "
                f"compiles: {error}"
            )
        finally:
            compiled = None
            _reset_stacks(cuda=True)


def _tree_functions() -> dict[str, Any]:
    """What sapwood's tree on device 0 holds: per function, recordings, replays, fallbacks."""
    import sapwood_cudagraph_trees

    info = sapwood_cudagraph_trees.tree_info(0)
    fields = ("name", "mode", "warmups", "recordings", "replays", "eager_reason", "fallbacks")
    functions = [{f: getattr(fn, f, None) for f in fields} for fn in info.functions]
    for entry in functions:
        entry["fallbacks"] = dict(entry["fallbacks"] or {})
    return {
        "functions": functions,
        "checkpoint_restores": getattr(info, "checkpoint_restores", None),
        "pool_reserved_bytes": getattr(info, "pool_reserved_bytes", None),
    }


def _print_tree(key: str, tree: dict[str, Any]) -> None:
    functions = tree["functions"]
    if not functions:
        print(f"  [{key} sapwood] tree on device 0: no functions")
        return
    print(
        f"  [{key} sapwood] tree on device 0: {len(functions)} functions, "
        f"{tree['checkpoint_restores']} checkpoint restores, pool "
        f"{_mib(tree['pool_reserved_bytes'])} MiB"
    )
    for fn in functions:
        eager = f", runs eagerly: {fn['eager_reason']}" if fn["eager_reason"] else ""
        print(
            f"    {fn['name']} ({fn['mode']}): {fn['warmups']} warmups, {fn['recordings']} "
            f"recordings, {fn['replays']} replays, fallbacks {fn['fallbacks'] or '{}'}{eager}"
        )


# ---------------------------------------------------------------------------- the run
def _mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / MIB:.1f}"


def _over(ours: float | None, reference: float | None) -> float | None:
    if ours is None or reference is None or reference <= 0:
        return None
    return ours / reference


def _memory_over(ours: int | None, reference: int | None) -> float | None:
    """sapwood / torch of two memory figures, each at least 1 MiB: two figures near zero (a
    replay allocates next to nothing outside its pool) compare as equal, not as noise."""
    if ours is None or reference is None:
        return None
    return max(ours, MIB) / max(reference, MIB)


def _selected(only: list[str] | None, workload: str, mode: str) -> bool:
    return not only or any(name in f"{workload}/{mode}" for name in only)


def _measure_pair(
    workload: Workload,
    built: BuiltModel,
    mode: str,
    order: tuple[str, ...],
    setting: Setting,
    memory: Memory,
    rounds: int,
    calls: int,
    errors: dict[str, str],
) -> tuple[dict[str, dict[str, Any]], list[float], dict[str, Any] | None]:
    """Both columns of one (workload, mode): first calls, memory, interleaved timing."""
    key = f"{workload.name}/{mode}"
    sync = None if setting.smoke else torch.cuda.synchronize
    _reset_stacks(not setting.smoke)
    columns: dict[str, Column] = {}
    figures: dict[str, dict[str, Any]] = {}
    for name in order:
        try:
            columns[name], figures[name] = _start_column(
                workload, built, name, mode, setting, memory, calls
            )
            figures[name]["built_first"] = name == order[0]
            print(
                f"  {mode} / {name}: first call {fmt_time(figures[name]['first_call'])}, "
                f"check {figures[name]['check']}",
                flush=True,
            )
        except Exception as error:
            errors[f"{key} {name}"] = _short(error)
            traceback.print_exc()
            print(f"  {mode} / {name}: FAILED {_short(error)}", flush=True)
    samples: dict[str, list[float]] = {name: [] for name in columns}
    round_ratios: list[float] = []
    for round_ in range(rounds):
        for name in order if round_ % 2 == 0 else order[::-1]:
            column = columns.get(name)
            if column is None:
                continue
            try:
                seconds = per_call_seconds(
                    lambda column=column: column.run(calls), calls=1, repeats=REPEATS, sync=sync
                )
                samples[name].append(seconds / calls)
            except Exception as error:
                errors[f"{key} {name}"] = f"while timed: {_short(error)}"
                traceback.print_exc()
                del columns[name]
        if all(name in columns for name in COMPILERS):
            round_ratios.append(samples[TARGET][-1] / samples[REFERENCE][-1])
    for name, times in samples.items():
        if times and name in columns:
            figures[name]["per_call"] = statistics.median(times)
    tree = None
    if mode in ("reduce-overhead", "max-autotune") and TARGET in columns:
        tree = _tree_functions()
        _print_tree(key, tree)
    columns.clear()
    _reset_stacks(not setting.smoke)
    memory.settle()
    return figures, round_ratios, tree


def _print_workload(
    workload: Workload,
    label: str,
    by_mode: dict[str, dict[str, dict[str, Any]]],
    round_ratios: dict[str, list[float]],
    ratios: list[dict[str, Any]],
) -> None:
    rows = []
    for mode, by_column in by_mode.items():
        reference = by_column.get(REFERENCE, {}).get("per_call")
        for name in COMPILERS:
            v = by_column.get(name)
            if v is None:
                rows.append([f"{mode} / {name}", "FAILED", "", "", "", "", "", "", ""])
                continue
            per_call = v.get("per_call")
            relative = _over(per_call, reference)
            rows.append(
                [
                    f"{mode} / {name}" + (" *" if v.get("built_first") else ""),
                    fmt_time(per_call),
                    "n/a" if relative is None else f"{relative:6.2f}x",
                    fmt_time(v.get("first_call")),
                    _mib(v.get("first_call_peak")),
                    _mib(v.get("steady_peak")),
                    _mib(v.get("first_call_peak_reserved")),
                    _mib(v.get("steady_peak_reserved")),
                    v.get("check", "")[:72],
                ]
            )
    print_table(
        f"{workload.name}: {label}\n(ratio vs torch in the same mode; * built first; MiB: peak "
        "allocated, and reserved (rsv), above the memory allocated before the first call)",
        [
            "column",
            "per call",
            "ratio",
            "first call",
            "1st peak MiB",
            "steady MiB",
            "1st rsv MiB",
            "steady rsv MiB",
            "check",
        ],
        rows,
    )
    for entry in ratios:
        if entry["workload"] != workload.name:
            continue
        value = entry["value"]
        shown = "n/a" if value is None else f"{value:.2f}"
        mode = entry["mode"]
        if entry["figure"] == "per call" and round_ratios.get(mode):
            rounds = ", ".join(f"{r:.2f}" for r in round_ratios[mode])
            print(
                f"{entry['label']}: {shown}  (median of {len(round_ratios[mode])} interleaved "
                f"rounds: {rounds})"
            )
        else:
            print(f"{entry['label']}: {shown}")


def _ratio_entries(
    workload: Workload,
    mode: str,
    by_column: dict[str, dict[str, Any]],
    round_ratios: list[float],
) -> list[dict[str, Any]]:
    ours, reference = by_column.get(TARGET, {}), by_column.get(REFERENCE, {})
    per_call = statistics.median(round_ratios) if round_ratios else None
    if per_call is None:
        per_call = _over(ours.get("per_call"), reference.get("per_call"))
    figures = [
        ("per call", per_call, workload.per_call_targets[mode]),
        ("first call time", _over(ours.get("first_call"), reference.get("first_call")), None),
    ]
    for figure, key, target in (
        ("first-call peak memory", "first_call_peak", FIRST_PEAK_TARGET),
        ("steady peak memory", "steady_peak", STEADY_PEAK_TARGET),
        ("first-call peak reserved", "first_call_peak_reserved", None),
        ("steady peak reserved", "steady_peak_reserved", None),
    ):
        figures.append((figure, _memory_over(ours.get(key), reference.get(key)), target))
    return [
        {
            "label": f"{workload.name} {mode}, {figure}, sapwood / torch",
            "value": value,
            "target": target,
            "better": "lower",
            "workload": workload.name,
            "mode": mode,
            "figure": figure,
        }
        for figure, value, target in figures
    ]


def _print_targets(ratios: list[dict[str, Any]], smoke: bool) -> None:
    print()
    for entry in ratios:
        target = entry["target"]
        if target is None:
            continue
        value = entry["value"]
        if value is None:
            verdict = (
                "SKIP (not measured on the CPU)" if smoke and "memory" in entry["label"] else "MISS"
            )
            print(f"TARGET {entry['label']}: n/a (<= {target:g}) {verdict}")
        else:
            verdict = "OK" if value <= target else "MISS"
            print(f"TARGET {entry['label']}: {value:.2f} (<= {target:g}) {verdict}")


def _no_graph_caches() -> None:
    """No first call may be a hit of a graph compiled earlier in this process or run."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = False
    if hasattr(functorch_config, "enable_autograd_cache"):
        functorch_config.enable_autograd_cache = False


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"torch": torch.__version__, "python": sys.version.split()[0]}
    for package in ("torchvision", "timm", "transformers"):
        try:
            found[package] = __import__(package).__version__
        except ImportError:
            found[package] = None
    return found


def main(
    out: Path,
    only: list[str] | None = None,
    quick: bool = False,
    cpu_smoke: bool = False,
    warmup: bool = True,
) -> dict[str, Any]:
    setting = Setting(smoke=cpu_smoke)
    cuda = not cpu_smoke
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("bench_models_gpu needs a CUDA device (or --cpu-smoke)")
    if cuda:
        _no_graph_caches()
    memory = Memory(cuda)
    rounds = 2 if cpu_smoke else (QUICK_ROUNDS if quick else ROUNDS)
    started = time.perf_counter()
    results: dict[str, dict[str, dict[str, Any]]] = {}
    labels: dict[str, str] = {}
    errors: dict[str, str] = {}
    round_ratios: dict[str, dict[str, list[float]]] = {}
    trees: dict[str, Any] = {}
    ratios: list[dict[str, Any]] = []
    pairs = 0
    if cpu_smoke:
        print(
            "CPU smoke run: tiny sizes, fp32, backend='eager' for both stacks; figures mean nothing"
        )
    for workload in WORKLOADS:
        modes = [m for m in workload.per_call_targets if _selected(only, workload.name, m)]
        if not modes:
            continue
        calls = 2 if cpu_smoke else (workload.quick_calls if quick else workload.calls)
        print(f"\n=== {workload.name} ===", flush=True)
        try:
            built = workload.build(setting)
        except Exception as error:
            traceback.print_exc()
            for mode in modes:
                errors[f"{workload.name}/{mode}"] = f"building the model: {_short(error)}"
            continue
        labels[workload.name] = built.label
        print(f"  {built.label}")
        if cuda and warmup:
            _warm_kernels(workload, built)
        results[workload.name] = {}
        round_ratios[workload.name] = {}
        for mode in modes:
            # alternate which compiler's column is built and timed first, pair by pair
            order = COMPILERS if pairs % 2 == 0 else COMPILERS[::-1]
            pairs += 1
            figures, rounds_of_pair, tree = _measure_pair(
                workload, built, mode, order, setting, memory, rounds, calls, errors
            )
            results[workload.name][mode] = figures
            round_ratios[workload.name][mode] = rounds_of_pair
            if tree is not None:
                trees[f"{workload.name}/{mode}"] = tree
            ratios += _ratio_entries(workload, mode, figures, rounds_of_pair)
        _print_workload(
            workload, built.label, results[workload.name], round_ratios[workload.name], ratios
        )
        del built
        memory.settle()
    for key, message in errors.items():
        print(f"FAILED {key}: {message}")
    _print_targets(ratios, cpu_smoke)
    elapsed = time.perf_counter() - started
    print(f"\nbench_models_gpu: {elapsed:.0f} s")
    data: dict[str, Any] = {
        "device": "cpu (smoke run)" if cpu_smoke else torch.cuda.get_device_name(),
        **_versions(),
        "quick": quick,
        "kernel_warmup": warmup and cuda,
        "rounds": rounds,
        "seconds": elapsed,
        "workloads": labels,
        "results": results,
        "errors": errors,
        "round_ratios": round_ratios,
        "sapwood_trees": trees,
        "ratios": [] if cpu_smoke else ratios,
    }
    if cpu_smoke:
        data["smoke_ratios"] = ratios
    return write_json(out, NAME + ("_cpu_smoke" if cpu_smoke else ""), data)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=Path("bench-results"))
    parser.add_argument(
        "--only", nargs="+", action="extend", metavar="NAME", help="workload or workload/mode"
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on the CPU, eager")
    parser.add_argument("--no-warmup", action="store_true", help="skip the kernel warm-ups")
    args = parser.parse_args()
    main(args.out, args.only, args.quick, args.cpu_smoke, warmup=not args.no_warmup)
