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


def _one_graph(fn):
    sapwood_tracer.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return sapwood_tracer.compile(fn, backend=backend, fullgraph=True), graphs


def test_an_attribute_assigned_to_a_computed_tensor_is_read_back_and_set_on_the_output() -> None:
    def fn(x):
        y = x + 1
        y.tag = 3
        z = y.add_(1)  # the same object: it has the attribute too
        return y * z.tag, z

    compiled, graphs = _one_graph(fn)
    x = torch.randn(3)
    got, want = compiled(x), fn(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1].tag == want[1].tag == 3 and len(graphs) == 1


def test_an_attribute_assigned_to_an_input_tensor_is_written_to_the_real_tensor() -> None:
    def fn(x):
        x.scale = 2.0
        return x * x.scale

    compiled, graphs = _one_graph(fn)
    ours, theirs = torch.randn(3), torch.randn(3)
    theirs.copy_(ours)
    torch.testing.assert_close(compiled(ours), fn(theirs))
    assert ours.scale == theirs.scale == 2.0 and len(graphs) == 1


def test_an_assigned_attribute_shadows_a_method_and_data_descriptors_are_refused() -> None:
    def shadows(x):
        y = x * 2
        y.add = 5
        return y + y.add

    compiled, _ = _one_graph(shadows)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), shadows(x))

    def sets_grad(x):
        y = x * 2
        y.grad = x  # a data descriptor of the class: not modelled
        return y

    compiled, _ = _one_graph(sets_grad)
    try:
        compiled(x)
    except sapwood_tracer.Unsupported as exc:
        assert "Tensor.grad" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("assigning .grad was captured")
