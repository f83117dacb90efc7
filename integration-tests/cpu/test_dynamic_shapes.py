"""Dynamic shapes end to end through ``sapwood.compile`` on the CPU.

The zoo's GPT is called with 10 batch sizes and 10 sequence lengths (each batch size with two
lengths): with the default policy it compiles at most twice (static, then symbolic in both
dims), and every output equals eager's. The first two calls vary both sizes, so the second
trace makes both symbolic; the sizes are >= 2 (torch specialises 0 and 1, and so does sapwood).
"""

from __future__ import annotations

import pytest
import torch
from zoo import CountingBackend, build

import sapwood

BATCHES = list(range(2, 12))
LENGTHS = list(range(3, 23, 2))


@pytest.fixture(autouse=True)
def _fresh() -> None:
    sapwood.reset()


def _pairs() -> list[tuple[int, int]]:
    return list(zip(BATCHES, LENGTHS)) + list(zip(BATCHES, reversed(LENGTHS)))


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_ten_batch_sizes_and_ten_lengths_compile_at_most_twice(backend: str) -> None:
    model, _ = build("gpt")
    model.eval()
    counting = CountingBackend(backend)
    compiled = sapwood.compile(model, backend=counting)
    with torch.no_grad():
        for batch, length in _pairs():
            tokens = torch.randint(0, 64, (batch, length))
            torch.testing.assert_close(compiled(tokens), model(tokens), rtol=1e-4, atol=1e-4)
    assert len(counting.graphs) <= 2


def test_dynamic_true_compiles_once_for_every_size() -> None:
    model, _ = build("mlp")
    counting = CountingBackend("eager")
    compiled = sapwood.compile(model, backend=counting, dynamic=True)
    with torch.no_grad():
        for batch in BATCHES:
            x = torch.randn(batch, 32)
            torch.testing.assert_close(compiled(x), model(x))
    assert len(counting.graphs) == 1


def test_marked_dims_are_symbolic_from_the_first_call() -> None:
    model, _ = build("gpt")
    model.eval()
    counting = CountingBackend("eager")
    compiled = sapwood.compile(model, backend=counting)
    with torch.no_grad():
        for length in LENGTHS[:4]:
            tokens = torch.randint(0, 64, (2, length))
            sapwood.mark_dynamic(tokens, 1)
            torch.testing.assert_close(compiled(tokens), model(tokens), rtol=1e-4, atol=1e-4)
    assert len(counting.graphs) == 1
