"""One trace per module structure: instances of a class share cache entries.

Modules are guarded by class and by what the trace read of them (attributes by value, hooks,
submodules by class, parameters and buffers as graph inputs with their tensor guards), never
by identity: the blocks of a model compiled one by one share one trace, a deep copy reuses
it, and every result stays equal to eager (other weights, other flags, other hooks).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import sapwood_tracer
from sapwood_tracer.api import events


class Block(nn.Module):
    """A pre-norm transformer block, in plain torch."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.register_buffer("scale", torch.tensor(1.0))
        self.eps = 0.0

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        attn = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, n, d)) * self.scale
        x = x + self.mlp(self.norm2(x)) + self.eps
        if self.training:
            x = x * 0.5
        return x


X = torch.randn(2, 5, 16)


@pytest.fixture
def captures():
    """The code objects traced while the test runs, one item per trace."""
    seen: list[str] = []
    stop = events.listen(
        lambda kind, data: seen.append(data["code"].co_qualname) if kind == "capture" else None
    )
    yield seen
    stop()


def _blocks(n: int) -> list[Block]:
    torch.manual_seed(0)
    return [Block().eval() for _ in range(n)]


def test_eight_identical_blocks_compiled_separately_trace_at_most_twice(backend, captures, same):
    blocks = _blocks(8)
    compiled = [sapwood_tracer.compile(b, backend=backend) for b in blocks]
    with torch.no_grad():
        for block, c in zip(blocks, compiled):
            same(c(X), block(X))
    assert len(captures) <= 2
    assert backend.count <= 2


def test_blocks_sharing_a_trace_give_each_their_own_result(backend, same):
    blocks = _blocks(3)
    compiled = [sapwood_tracer.compile(b, backend=backend) for b in blocks]
    outputs = [c(X) for c in compiled]
    for block, out in zip(blocks, outputs):
        same(out, block(X))
    assert not torch.allclose(outputs[0], outputs[1])  # other weights, other result
    assert backend.count == 1


def test_blocks_sharing_a_trace_train_their_own_parameters(backend):
    blocks = [b.train() for b in _blocks(2)]
    twins = copy.deepcopy(blocks)
    compiled = [sapwood_tracer.compile(b, backend=backend) for b in blocks]
    for c, eager in zip(compiled, twins):
        c(X).sum().backward()
        eager(X).sum().backward()
    for block, twin in zip(blocks, twins):
        for (name, p), q in zip(block.named_parameters(), twin.parameters()):
            torch.testing.assert_close(p.grad, q.grad, msg=name)
    assert backend.count == 1


def test_a_deep_copy_reuses_the_trace_with_no_recompile(backend, captures, same):
    (block,) = _blocks(1)
    compiled = sapwood_tracer.compile(block, backend=backend)
    same(compiled(X), block(X))
    twin = copy.deepcopy(block)
    with torch.no_grad():
        twin.proj.weight.mul_(2)
    compiled_twin = sapwood_tracer.compile(twin, backend=backend)
    for _ in range(3):
        same(compiled_twin(X), twin(X))
    assert len(captures) == 1


def test_a_deep_copy_of_a_compiled_module_runs_its_own_copy(backend, captures, same):
    (block,) = _blocks(1)
    compiled = sapwood_tracer.compile(block, backend=backend)
    compiled(X)
    twin = copy.deepcopy(compiled)
    with torch.no_grad():
        twin._orig_mod.proj.weight.mul_(2)
    for _ in range(3):
        same(twin(X), twin._orig_mod(X))
    same(compiled(X), block(X))
    assert len(captures) == 1


def test_an_attribute_changed_on_one_instance_is_guarded(backend, same):
    a, b = _blocks(2)
    b.eps = 0.25
    compiled_a = sapwood_tracer.compile(a, backend=backend)
    compiled_b = sapwood_tracer.compile(b, backend=backend)
    same(compiled_a(X), a(X))
    same(compiled_b(X), b(X))
    assert backend.count == 2


def test_the_training_flag_of_one_instance_is_guarded(backend, same):
    a, b = _blocks(2)
    b.train()
    compiled_a = sapwood_tracer.compile(a, backend=backend)
    compiled_b = sapwood_tracer.compile(b, backend=backend)
    same(compiled_a(X), a(X))
    same(compiled_b(X), b(X))
    assert backend.count == 2


def test_a_hook_on_a_submodule_of_one_instance_is_guarded(backend, same):
    a, b = _blocks(2)
    b.proj.register_forward_hook(lambda module, args, out: out * 3)
    compiled_a = sapwood_tracer.compile(a, backend=backend)
    compiled_b = sapwood_tracer.compile(b, backend=backend)
    with torch.no_grad():
        same(compiled_a(X), a(X))
        same(compiled_b(X), b(X))
        same(compiled_a(X), a(X))
    assert backend.count == 2


def test_a_submodule_of_another_class_is_guarded(backend, same):
    a, b = _blocks(2)
    b.mlp[1] = nn.ReLU()
    compiled_a = sapwood_tracer.compile(a, backend=backend)
    compiled_b = sapwood_tracer.compile(b, backend=backend)
    with torch.no_grad():
        same(compiled_a(X), a(X))
        same(compiled_b(X), b(X))
    assert backend.count == 2


def test_parameters_of_another_dtype_or_requires_grad_are_guarded(backend, same):
    a, b, c = _blocks(3)
    b.double()
    c.requires_grad_(False)
    compiled = [sapwood_tracer.compile(m, backend=backend) for m in (a, b, c)]
    for module, comp in zip((a, b, c), compiled):
        x = X.double() if module is b else X
        same(comp(x), module(x))
    assert backend.count == 3


class _Pair(nn.Module):
    def __init__(self, tied: bool) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = self.a if tied else nn.Linear(4, 4)

    def forward(self, x):
        if self.a is self.b:
            return self.a(x)
        return self.a(x) + self.b(x)


def test_identity_between_two_submodules_is_guarded(backend, same):
    x = torch.randn(2, 4)
    for tied in (False, True, False, True):
        pair = _Pair(tied)
        same(sapwood_tracer.compile(pair, backend=backend)(x), pair(x))
    assert backend.count == 2
