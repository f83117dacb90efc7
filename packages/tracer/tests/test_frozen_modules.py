"""``guards="inputs"``: modules declared frozen are checked by identity alone (issue 33's
opt-in for serving). What is still seen, what is not (by contract), when it is not applied,
and what ``explain()`` says."""

from __future__ import annotations

import gc
from typing import Any

import pytest
import torch

import sapwood_tracer
from sapwood_tracer.api import cache

from .conftest import CountingBackend


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(4, 8)
        self.second = torch.nn.Linear(8, 2)
        self.scale = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x))) * self.scale


def _step(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x) + 1


def _frozen(fn: Any = _step, fullgraph: bool = True) -> tuple[Any, CountingBackend]:
    backend = CountingBackend()
    compiled = sapwood_tracer.compile(fn, backend=backend, fullgraph=fullgraph, guards="inputs")
    return compiled, backend


def _entries() -> list[Any]:
    found = cache.lookup(_step.__code__)
    return list(found.entries) if found is not None else []


def test_a_frozen_module_is_checked_by_identity_and_arguments_as_always():
    compiled, backend = _frozen()
    net, other = _Net(), _Net()
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(net, x), _step(net, x))
    assert [e.guard_mode.split()[0] for e in _entries()] == ["inputs"]
    assert len(_entries()[0].guards) < 30  # (the whole tree: hundreds)
    # another module of the same class: its own entry (the identity guard), its own weights
    torch.testing.assert_close(compiled(other, x), _step(other, x))
    assert backend.count == 2
    # arguments are still guarded: another shape traces again
    y = torch.randn(5, 4)
    torch.testing.assert_close(compiled(net, y), _step(net, y))
    assert backend.count == 3


def test_values_written_in_place_are_seen():
    compiled, _ = _frozen()
    net, x = _Net(), torch.randn(2, 4)
    compiled(net, x)
    with torch.no_grad():
        net.first.weight.copy_(torch.randn(8, 4))  # new weights loaded in place
        net.second.bias.zero_()
    torch.testing.assert_close(compiled(net, x), _step(net, x))


def test_what_the_declaration_excludes_is_not_seen_by_contract():
    compiled, _ = _frozen()
    net, x = _Net(), torch.randn(2, 4)
    before = compiled(net, x)
    net.scale = 3.0  # a Python attribute changed: excluded by the declaration
    net.second.weight = torch.nn.Parameter(torch.zeros(2, 8))  # a parameter replaced
    torch.testing.assert_close(compiled(net, x), before)  # the module as traced
    # the same change under the default guards is seen
    full = sapwood_tracer.compile(_step, backend=CountingBackend(), fullgraph=True)
    torch.testing.assert_close(full(net, x), _step(net, x))


def test_global_hooks_and_class_patches_are_still_seen():
    compiled, _ = _frozen(fullgraph=False)
    net, x = _Net(), torch.randn(2, 4)
    compiled(net, x)
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o * 0)
    try:
        torch.testing.assert_close(compiled(net, x), _step(net, x))
    finally:
        handle.remove()
    original = _Net.forward
    _Net.forward = lambda self, x: self.first(x).sum(dim=1, keepdim=True)  # type: ignore[method-assign]
    try:
        torch.testing.assert_close(compiled(net, x), _step(net, x))
    finally:
        _Net.forward = original  # type: ignore[method-assign]
    torch.testing.assert_close(compiled(net, x), _step(net, x))


class _Counting(_Net):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls = getattr(self, "calls", 0) + 1
        return super().forward(x)


def test_a_forward_that_changes_the_module_keeps_every_guard():
    compiled, _ = _frozen()
    net, x = _Counting(), torch.randn(2, 4)
    compiled(net, x)
    compiled(net, x)
    assert net.calls == 2
    (mode,) = {e.guard_mode for e in _entries()}
    assert mode.startswith("all (guards='inputs' asked, but the function changes the module")


def test_the_entry_dies_with_its_module():
    compiled, _ = _frozen()
    net = _Net()
    compiled(net, torch.randn(2, 4))
    assert len(_entries()) == 1
    del net
    gc.collect()
    assert _entries() == []


def test_explain_says_whether_the_declaration_applies():
    compiled, _ = _frozen()
    text = str(sapwood_tracer.explain(compiled)(_Net(), torch.randn(2, 4)))
    assert "Guard mode of _step: inputs (the module L['model'] declared frozen" in text
    plain = sapwood_tracer.compile(_step, backend=CountingBackend())
    assert "Guard mode" not in str(sapwood_tracer.explain(plain)(_Net(), torch.randn(2, 4)))


def test_a_compiled_module_passes_its_own_module_frozen():
    net, x = _Net(), torch.randn(2, 4)
    compiled = sapwood_tracer.compile(net, backend=CountingBackend(), guards="inputs")
    torch.testing.assert_close(compiled(x), net(x))
    modes = [e.guard_mode for e in cache.lookup(_Net.forward.__code__).entries]
    assert modes and modes[0].startswith("inputs (the module L['self']")


def test_a_bad_guard_mode_is_a_value_error():
    with pytest.raises(ValueError, match="guards must be one of 'all', 'inputs'"):
        sapwood_tracer.compile(_step, backend=CountingBackend(), guards="none")
