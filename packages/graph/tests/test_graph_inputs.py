"""Graph inputs: keyed by source, fake values, dynamic dims bound by SymInt placeholders."""

from __future__ import annotations

import pytest
import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensor

from sapwood_graph import (
    GraphInputError,
    GuardKind,
    LocalSource,
    OutputGraph,
    TensorPropertySource,
)

X = LocalSource("x")


def test_the_same_source_gives_the_same_placeholder():
    og = OutputGraph()
    t = torch.randn(2, 3)
    assert og.create_graph_input(X, t) is og.create_graph_input(LocalSource("x"), t)
    assert len(og.graph_inputs) == 1


def test_a_static_tensor_input_carries_a_fake_tensor_of_its_metadata():
    og = OutputGraph()
    t = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    fake = og.create_graph_input(X, t).node.meta["example_value"]
    assert isinstance(fake, FakeTensor)
    assert fake.shape == (2, 3) and fake.dtype == torch.float64 and fake.requires_grad
    assert fake.fake_mode is og.fake_mode


def test_a_tensor_input_records_a_tensor_match_guard():
    og = OutputGraph()
    og.create_graph_input(X, torch.randn(2, 3), dynamic_dims=[1])
    (guard,) = og.guards.of_kind(GuardKind.TENSOR_MATCH)
    assert guard.source == X
    assert guard.expected.shape == (2, None)


def test_dynamic_dims_become_symints_bound_by_size_placeholders():
    og = OutputGraph()
    proxy = og.create_graph_input(X, torch.randn(5, 3, 7), dynamic_dims=[0, 2])
    fake = proxy.node.meta["example_value"]
    assert isinstance(fake.shape[0], torch.SymInt) and isinstance(fake.shape[2], torch.SymInt)
    assert fake.shape[1] == 3 and not isinstance(fake.shape[1], torch.SymInt)
    sources = [i.source for i in og.graph_inputs]
    assert sources == [
        TensorPropertySource(X, "size", 0),
        TensorPropertySource(X, "size", 2),
        X,
    ]
    size0 = og.input_for(TensorPropertySource(X, "size", 0))
    assert size0.kind == "symint" and size0.example == 5
    assert size0.symbol == fake.shape[0].node.expr
    assert og.root.bound_symbols[size0.symbol] is size0.proxy


def test_sizes_zero_and_one_stay_static_even_when_marked_dynamic():
    og = OutputGraph()
    proxy = og.create_graph_input(X, torch.randn(1, 4), dynamic_dims=[0, 1])
    fake = proxy.node.meta["example_value"]
    assert fake.shape[0] == 1 and not isinstance(fake.shape[0], torch.SymInt)
    assert og.input_for(X).dynamic_dims == frozenset({1})


def test_a_transposed_dynamic_input_keeps_its_stride_order():
    og = OutputGraph()
    t = torch.randn(6, 4).t()
    fake = og.create_graph_input(X, t, dynamic_dims=[0, 1]).node.meta["example_value"]
    assert not fake.is_contiguous()
    assert fake.t().is_contiguous()


def test_equal_dynamic_sizes_share_one_symbol_and_one_placeholder():
    og = OutputGraph()
    og.create_graph_input(X, torch.randn(4, 2), dynamic_dims=[0])
    og.create_graph_input(LocalSource("y"), torch.randn(4, 3), dynamic_dims=[0])
    symints = [i for i in og.graph_inputs if i.kind == "symint"]
    assert [i.source for i in symints] == [TensorPropertySource(X, "size", 0)]


def test_a_python_int_becomes_a_symint_placeholder():
    og = OutputGraph()
    proxy = og.create_graph_input(LocalSource("n"), 6)
    value = proxy.node.meta["example_value"]
    assert isinstance(value, torch.SymInt)
    assert isinstance(value.node.expr, sympy.Symbol)
    assert og.input_for(LocalSource("n")).symbol == value.node.expr
    assert og.guards.about(LocalSource("n"))[0].kind is GuardKind.TYPE_MATCH


def test_small_ints_are_symbolic_too():
    og = OutputGraph()
    value = og.create_graph_input(LocalSource("n"), 1).node.meta["example_value"]
    assert isinstance(value, torch.SymInt)


def test_other_values_are_plain_placeholders():
    og = OutputGraph()
    proxy = og.create_graph_input(LocalSource("scale"), 0.5)
    assert proxy.node.meta["example_value"] == 0.5
    assert og.input_for(LocalSource("scale")).kind == "value"


def test_an_input_created_while_a_subtracer_is_open_is_the_roots_and_lifted_on_use():
    og = OutputGraph()
    y = og.create_graph_input(LocalSource("y"), torch.randn(2))
    with og.root.subtracer("body") as body:
        x = og.create_graph_input(X, torch.randn(2))
        assert og.root.owns(x) and not body.owns(x)
        body.output((body.call_function(torch.add, (x, 1)),))
    assert [p.node for p in body.lifted_inputs] == [x.node]
    placeholders = [n.name for n in og.root.graph.nodes if n.op == "placeholder"]
    assert placeholders == [y.node.name, x.node.name]


def test_the_same_tensor_under_two_sources_shares_one_fake():
    og = OutputGraph()
    t = torch.randn(3)
    a = og.create_graph_input(LocalSource("a"), t)
    b = og.create_graph_input(LocalSource("b"), t)
    assert a is not b
    assert a.node.meta["example_value"] is b.node.meta["example_value"]


def test_dynamic_dims_out_of_range_are_refused():
    og = OutputGraph()
    with pytest.raises(GraphInputError, match="out of range"):
        og.create_graph_input(X, torch.randn(2, 3), dynamic_dims=[2])


def test_negative_dynamic_dims_count_from_the_end():
    og = OutputGraph()
    og.create_graph_input(X, torch.randn(2, 3), dynamic_dims=[-1])
    assert og.input_for(X).dynamic_dims == frozenset({1})


def test_release_lets_the_example_inputs_die_and_refuses_new_nodes():
    import gc
    import weakref

    from sapwood_graph import GraphError

    og = OutputGraph()
    t = torch.randn(2, 3)
    x = og.create_graph_input(X, t)
    y = og.root.call_function(torch.relu, (x,))
    compiled = og.compile((y,), backend=lambda gm, example_inputs: gm.forward)
    og.release()
    alive = weakref.ref(t)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del t
        assert alive() is None
    finally:
        if enabled:
            gc.enable()
    assert og.graph_inputs == []
    with pytest.raises(GraphError):
        og.create_graph_input(LocalSource("z"), torch.randn(1))
    (out,) = compiled(torch.full((2,), -1.0))
    assert out.tolist() == [0.0, 0.0]


def test_a_derived_input_takes_the_callers_fake_and_gets_no_guard():
    og = OutputGraph()
    t = torch.randn(4, 3)
    base = og.create_graph_input(X, t, dynamic_dims=[0]).node.meta["example_value"]
    with og.fake_mode:
        fake = base[:, None]
    derived = LocalSource("leaf")
    proxy = og.create_derived_input(derived, t[:, None], fake)
    assert proxy.node.meta["example_value"] is fake
    (info,) = [i for i in og.graph_inputs if i.source == derived]
    assert info.dynamic_dims == frozenset({0})
    assert not og.guards.about(derived)
    with pytest.raises(GraphInputError):
        og.create_derived_input(derived, t[:, None], fake)


def test_only_inputs_whose_guard_fixes_every_size_and_stride_are_marked_layout_guarded():
    og = OutputGraph()
    fixed = og.create_graph_input(X, torch.randn(4, 3).t())
    dynamic = og.create_graph_input(LocalSource("y"), torch.randn(5, 3), dynamic_dims=[0])
    number = og.create_graph_input(LocalSource("n"), 3)
    t = torch.randn(2, 2)
    derived = og.create_derived_input(
        LocalSource("leaf"),
        t,
        og.create_graph_input(LocalSource("z"), t).node.meta["example_value"],
    )
    assert fixed.node.meta.get("layout_guarded") is True
    (guard,) = og.guards.about(X)
    assert guard.expected.stride == (1, 3)  # the marked promise is this guard's
    assert not dynamic.node.meta.get("layout_guarded")
    assert not number.node.meta.get("layout_guarded")
    assert not derived.node.meta.get("layout_guarded")  # no guard of its own


def test_a_spec_is_static_only_when_no_size_or_stride_is_free():
    og = OutputGraph()
    og.create_graph_input(X, torch.randn(4, 3))
    og.create_graph_input(LocalSource("y"), torch.randn(5, 3), dynamic_dims=[0])
    fixed, free = (g.expected for g in og.guards.of_kind(GuardKind.TENSOR_MATCH))
    assert fixed.static and not free.static
