"""Attributes a program set on an input tensor (``x.scale = 2.0``) are read as Python reads
them: from the tensor's own ``__dict__`` for any name no data descriptor of the class takes,
methods included, and guarded, so a later call with other attributes recompiles."""

from __future__ import annotations

import torch

import sapwood_tracer


def _compiled(fn):
    sapwood_tracer.reset()
    return sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)


def test_an_attribute_of_the_input_tensor_is_read_and_guarded() -> None:
    def fn(x):
        scale = getattr(x, "scale", None)
        if scale is None:
            return x + 1
        return x * scale

    compiled = _compiled(fn)
    plain = torch.ones(3)
    scaled = torch.ones(3)
    scaled.scale = 5.0
    for x in (scaled, plain, scaled, plain):
        torch.testing.assert_close(compiled(x), fn(x))
    scaled.scale = 7.0  # changed between calls
    torch.testing.assert_close(compiled(scaled), fn(scaled))
    del scaled.scale
    torch.testing.assert_close(compiled(scaled), fn(scaled))


def test_hasattr_of_an_input_tensor_follows_its_dict() -> None:
    def fn(x):
        return x * 2 if hasattr(x, "marked") else x - 2

    compiled = _compiled(fn)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), x - 2)
    x.marked = True
    torch.testing.assert_close(compiled(x), x * 2)


def test_an_instance_attribute_shadowing_a_method_is_seen() -> None:
    def fn(x):
        return x.view(-1) * 2

    compiled = _compiled(fn)
    x = torch.ones(2, 2)
    torch.testing.assert_close(compiled(x), fn(x))
    odd = torch.ones(2, 2)
    odd.view = lambda *shape: torch.zeros(3)
    torch.testing.assert_close(compiled(odd), fn(odd))
    torch.testing.assert_close(compiled(x), fn(x))


def test_a_parameter_attribute_read_in_a_module() -> None:
    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(3))

        def forward(self, x):
            return x * self.weight * getattr(self.weight, "gain", 1.0)

    m = Scaled()
    compiled = sapwood_tracer.compile(m, backend=lambda gm, ex: gm.forward)
    x = torch.arange(3.0)
    torch.testing.assert_close(compiled(x), m(x))
    m.weight.gain = 3.0
    torch.testing.assert_close(compiled(x), m(x))
