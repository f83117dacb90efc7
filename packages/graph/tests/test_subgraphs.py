"""Nested subtracers: automatic lifting through any depth, symbols included; subgraph install."""

from __future__ import annotations

import pytest
import torch

from sapwood_graph import LocalSource, OutputGraph, SubgraphError


def run_subgraph(subgraph, *args):
    """The higher-order op these tests use: call a subgraph on its operands."""
    return subgraph(*args)


def eager(gm, example_inputs):
    return gm.forward


def placeholders(tracer):
    return [n for n in tracer.graph.nodes if n.op == "placeholder"]


def test_an_outer_proxy_used_in_a_child_is_lifted_once():
    og = OutputGraph()
    x = og.create_graph_input(LocalSource("x"), torch.randn(3))
    with og.root.subtracer() as child:
        a = child.call_function(torch.sin, (x,))
        b = child.call_function(torch.cos, (x,))
        child.output((a + b,))
    assert child.lifted_inputs == [x]
    (ph,) = placeholders(child)
    assert ph.meta["lifted_from"] is x.node
    assert ph.meta["example_value"] is x.node.meta["example_value"]


def test_operator_overloads_inside_a_child_record_into_the_child():
    og = OutputGraph()
    x = og.create_graph_input(LocalSource("x"), torch.randn(3))
    with og.root.subtracer() as child:
        y = x * 2
        assert child.owns(y)
        child.output(y)
    assert child.lifted_inputs == [x]


def test_lifting_goes_through_every_enclosing_level():
    og = OutputGraph()
    x = og.create_graph_input(LocalSource("x"), torch.randn(3))
    with og.root.subtracer("a") as a, a.subtracer("b") as b, b.subtracer("c") as c:
        y = c.call_function(torch.neg, (x,))
        c.output(y)
    assert [p.node.name for p in c.lifted_inputs] == ["x"]
    assert c.lifted_inputs[0].node.graph is b.graph
    assert b.lifted_inputs[0].node.graph is a.graph
    assert a.lifted_inputs == [x]


def test_symbols_of_a_lifted_value_are_lifted_with_it():
    og = OutputGraph()
    x = og.create_graph_input(LocalSource("x"), torch.randn(5, 2), dynamic_dims=[0])
    with og.root.subtracer() as outer, outer.subtracer() as inner:
        inner.output(inner.call_function(torch.relu, (x,)))
    symbol = og.input_for(og.graph_inputs[0].source).symbol
    assert symbol in inner.bound_symbols and symbol in outer.bound_symbols
    assert [p.node.name for p in inner.lifted_inputs] == ["x_size_0", "x"]


def test_explicit_inputs_come_before_lifted_ones():
    og = OutputGraph()
    x = og.create_graph_input(LocalSource("x"), torch.randn(3))
    with og.root.subtracer() as child:
        lifted = child.call_function(torch.neg, (x,))
        u = child.create_subgraph_input("u", x)
        v = child.create_subgraph_input("v", torch.randn(3))
        child.output(lifted + u + v)
    assert [n.name for n in placeholders(child)] == ["u", "v", "x"]


def test_a_value_from_a_closed_child_cannot_be_used_outside():
    og = OutputGraph()
    x = og.create_graph_input(LocalSource("x"), torch.randn(3))
    with og.root.subtracer() as child:
        inner = child.call_function(torch.neg, (x,))
        child.output(inner)
    with pytest.raises(SubgraphError, match="does not belong"):
        og.root.call_function(torch.neg, (inner,))
    with pytest.raises(SubgraphError, match="closed"):
        child.call_function(torch.neg, (x,))


def test_only_the_innermost_tracer_opens_a_child():
    og = OutputGraph()
    with og.root.subtracer(), pytest.raises(SubgraphError):
        og.root.subtracer().__enter__()


def test_the_output_is_set_once():
    og = OutputGraph()
    x = og.create_graph_input(LocalSource("x"), torch.randn(3))
    with og.root.subtracer() as child:
        child.output(child.call_function(torch.neg, (x,)))
        with pytest.raises(SubgraphError):
            child.output(x)


def test_a_graph_module_needs_an_output():
    og = OutputGraph()
    with og.root.subtracer() as child:
        pass
    with pytest.raises(SubgraphError):
        child.graph_module()


def _body(og, x, fn):
    with og.root.subtracer("body") as child:
        u = child.create_subgraph_input("u", x)
        child.output((child.call_function(fn, (u,)),))
    return child.graph_module()


def test_structurally_equal_subgraphs_are_installed_once():
    og = OutputGraph()
    x = og.create_graph_input(LocalSource("x"), torch.randn(3))
    first = og.root.install_subgraph("body", _body(og, x, torch.sin))
    second = og.root.install_subgraph("body", _body(og, x, torch.sin))
    third = og.root.install_subgraph("body", _body(og, x, torch.cos))
    assert first == second
    assert third != first
    assert isinstance(og.attributes[third], torch.fx.GraphModule)


def test_a_nested_region_compiles_and_matches_eager():
    og = OutputGraph()
    x = og.create_graph_input(LocalSource("x"), torch.randn(4, 3), dynamic_dims=[0])
    w = og.create_graph_input(LocalSource("w"), torch.randn(3))
    with og.root.subtracer("outer") as outer:
        with outer.subtracer("inner") as inner:
            inner.output((inner.call_function(torch.mul, (x, w)),))
        name = outer.install_subgraph("inner", inner.graph_module())
        result = outer.call_function(run_subgraph, (outer.get_attr(name), *inner.lifted_inputs))
        outer.output((result[0] + x,))
    name = og.root.install_subgraph("outer", outer.graph_module())
    out = og.root.call_function(run_subgraph, (og.root.get_attr(name), *outer.lifted_inputs))
    compiled = og.compile(out[0], eager)
    xs, ws = torch.randn(6, 3), torch.randn(3)
    got = compiled(*compiled.resolve_inputs({"x": xs, "w": ws}))
    torch.testing.assert_close(got, xs * ws + xs)
