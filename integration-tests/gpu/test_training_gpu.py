"""Real training steps under reduce-overhead: the backward graph on the trees, BatchNorm's
buffers updated inside the graph, stale-output errors that name the user's line, and outputs a
CUDA graph cannot hold.

Runs on the GPU machine through ``nox -s gpu``; skipped elsewhere with its reason.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from zoo import CNN

import sapwood

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _fresh() -> None:
    sapwood.reset()


def _functions() -> list:
    import sapwood_cudagraph_trees

    return list(sapwood_cudagraph_trees.tree_info(0).functions)


def _fallbacks(mode: str) -> dict[str, int]:
    seen: dict[str, int] = {}
    for info in _functions():
        if info.mode == mode:
            for reason, count in info.fallbacks.items():
                seen[reason] = seen.get(reason, 0) + count
    return seen


def _replays(mode: str) -> int:
    return sum(info.replays for info in _functions() if info.mode == mode)


class SdpaBlock(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class GPTWithLoss(nn.Module):
    """The common pattern: the loss is computed inside the compiled module."""

    def __init__(self, vocab: int = 128, dim: int = 64, layers: int = 2, dropout: float = 0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(SdpaBlock(dim, 4, dropout) for _ in range(layers))
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_loss_inside_the_module_puts_the_backward_on_the_trees(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    reference = GPTWithLoss().cuda()
    trained = copy.deepcopy(reference)
    compiled = sapwood.compile(trained, mode="reduce-overhead")
    opt_ref = torch.optim.AdamW(reference.parameters(), lr=1e-3)
    opt_new = torch.optim.AdamW(trained.parameters(), lr=1e-3)
    tokens = torch.randint(0, 128, (4, 32), device="cuda")
    targets = torch.randint(0, 128, (4, 32), device="cuda")
    for _ in range(8):
        losses = []
        for model, opt in ((reference, opt_ref), (compiled, opt_new)):
            with torch.autocast("cuda", dtype=dtype, enabled=dtype is not torch.float32):
                loss = model(tokens, targets)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.detach().float())
        torch.testing.assert_close(losses[1], losses[0], rtol=2e-2, atol=2e-2)
    assert _fallbacks("backward") == {}, _fallbacks("backward")
    assert _fallbacks("forward") == {}, _fallbacks("forward")
    assert _replays("backward") >= 5 and _replays("forward") >= 5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])  # efficient, flash
def test_attention_dropout_training_replays_with_fresh_masks(dtype: torch.dtype) -> None:
    # Attention's dropout keeps its seed and offset in CPU tensors when it runs and in device
    # tensors when it is captured, and its backward reads them by the same rule: a backward
    # must run the way its forward ran (eager with eager, captured with captured).
    torch.manual_seed(0)
    model = GPTWithLoss(dropout=0.5).cuda().to(dtype)
    compiled = sapwood.compile(model, mode="reduce-overhead")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, 128, (4, 32), device="cuda")
    losses = []
    for _ in range(8):
        loss = compiled(tokens, tokens)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))
    torch.cuda.synchronize()
    assert all(torch.isfinite(torch.tensor(losses)))
    assert len(set(losses[3:])) > 1  # dropout draws new masks on each replay
    assert _replays("forward") >= 4, _fallbacks("forward")
    assert _replays("backward") >= 4, _fallbacks("backward")


def test_batchnorm_training_updates_running_statistics_inside_the_graph() -> None:
    torch.manual_seed(0)
    reference = CNN().cuda().train()
    trained = copy.deepcopy(reference)
    compiled = sapwood.compile(trained, mode="reduce-overhead")
    opt_ref = torch.optim.SGD(reference.parameters(), lr=1e-2)
    opt_new = torch.optim.SGD(trained.parameters(), lr=1e-2)
    x = torch.randn(8, 3, 16, 16, device="cuda")
    for _ in range(6):
        for model, opt in ((reference, opt_ref), (compiled, opt_new)):
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    torch.testing.assert_close(trained.norm.running_mean, reference.norm.running_mean)
    torch.testing.assert_close(trained.norm.running_var, reference.norm.running_var)
    assert int(trained.norm.num_batches_tracked) == 6
    assert _fallbacks("forward") == {}, _fallbacks("forward")
    assert _replays("forward") >= 3 and _replays("backward") >= 3


def _double(x: torch.Tensor) -> torch.Tensor:
    produced_here = x * 2 + 1  # the line the error must name
    return produced_here


def test_stale_output_error_names_the_users_source_line() -> None:
    compiled = sapwood.compile(_double, mode="reduce-overhead")
    x = torch.randn(16, device="cuda")
    for _ in range(3):
        compiled(x)
    kept = compiled(x)
    sapwood.mark_step_begin()
    compiled(x)
    with pytest.raises(RuntimeError) as caught:
        kept.sum().item()
    message = str(caught.value)
    assert "test_training_gpu.py" in message
    assert "produced_here = x * 2 + 1" in message


def test_sparse_output_falls_back_with_a_reason_instead_of_crashing() -> None:
    def sparse(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).relu().to_sparse()

    compiled = sapwood.compile(sparse, mode="reduce-overhead")
    for _ in range(4):
        x = torch.randn(8, 8, device="cuda")
        torch.testing.assert_close(compiled(x).to_dense(), sparse(x).to_dense())


def _first_step_peak(model: nn.Module, mode: str, x: torch.Tensor) -> int:
    """Bytes allocated at the peak of a first compiled forward and backward, above before."""
    compiled = sapwood.compile(model, mode=mode)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    compiled(x).sum().backward()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    model.zero_grad(set_to_none=True)
    return peak


def test_first_backward_under_reduce_overhead_frees_saved_activations_as_it_goes() -> None:
    # The first call of each graph is a warm-up, run eagerly in the trees' pool. Inductor's
    # backward drops each saved activation after its last use, while the gradients pile up:
    # the runtime must not hold the inputs, or the peak is every activation plus every
    # gradient at once (for this model about 1.6 times what default mode needs).
    torch.manual_seed(0)
    width, layers, batch = 4096, 4, 2048
    model = nn.Sequential(
        *(nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(layers))
    )
    model = model.cuda()
    x = torch.randn(batch, width, device="cuda")
    default_peak = _first_step_peak(model, "default", x)  # compiles and autotunes the kernels
    sapwood.reset()
    trees_peak = _first_step_peak(model, "reduce-overhead", x)
    cublas_workspace = 32 << 20
    assert trees_peak <= 1.1 * default_peak + cublas_workspace, (trees_peak, default_peak)
