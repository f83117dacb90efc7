"""Recording nodes: fake metadata on every node, typed failures, attributes."""

from __future__ import annotations

import operator

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

from sapwood_graph import (
    AttrSource,
    FakePropagationError,
    GraphInputError,
    ItemSource,
    LocalSource,
    OutputGraph,
    SubgraphError,
    TensorPropertySource,
)

X = LocalSource("x")
SELF = LocalSource("self")


@pytest.fixture
def og():
    return OutputGraph()


def test_call_function_nodes_carry_the_fake_result(og):
    x = og.create_graph_input(X, torch.randn(2, 3))
    y = og.root.call_function(torch.sum, (x,), {"dim": 1})
    value = y.node.meta["example_value"]
    assert isinstance(value, FakeTensor) and value.shape == (2,)
    assert y.node.op == "call_function" and y.node.target is torch.sum


def test_call_method_nodes_carry_the_fake_result(og):
    x = og.create_graph_input(X, torch.randn(2, 3))
    y = og.root.call_method("view", (x, 3, 2))
    assert y.node.meta["example_value"].shape == (3, 2)
    assert y.node.op == "call_method"


def test_operators_on_proxies_record_with_metadata(og):
    x = og.create_graph_input(X, torch.randn(2, 3))
    y = (x + 1) * x
    assert y.node.target is operator.mul
    assert y.node.meta["example_value"].shape == (2, 3)


def test_torch_functions_on_proxies_record_with_metadata(og):
    x = og.create_graph_input(X, torch.randn(2, 3))
    y = torch.nn.functional.softmax(x, dim=-1)
    assert y.node.meta["example_value"].shape == (2, 3)


def test_tuple_results_are_indexable(og):
    x = og.create_graph_input(X, torch.randn(4, 3))
    parts = og.root.call_function(torch.split, (x, 2))
    second = parts[1]
    assert second.node.target is operator.getitem
    assert second.node.meta["example_value"].shape == (2, 3)


def test_symbolic_results_follow_dynamic_dims(og):
    x = og.create_graph_input(X, torch.randn(5, 3), dynamic_dims=[0])
    y = og.root.call_function(torch.cat, ([x, x],))
    size = y.node.meta["example_value"].shape[0]
    assert isinstance(size, torch.SymInt)
    symbol = og.input_for(TensorPropertySource(X, "size", 0)).symbol
    assert size.node.expr == 2 * symbol


def test_a_symint_from_a_fake_shape_is_rebuilt_from_the_graph(og):
    x = og.create_graph_input(X, torch.randn(5, 3), dynamic_dims=[0])
    n = x.node.meta["example_value"].shape[0]
    z = og.root.call_function(torch.zeros, ((2 * n + 1, 3),))
    assert (
        z.node.meta["example_value"].shape[0].node.expr
        == 2 * og.input_for(TensorPropertySource(X, "size", 0)).symbol + 1
    )
    compiled = og.compile(z, lambda gm, ex: gm.forward)
    assert compiled(*compiled.resolve_inputs({"x": torch.randn(7, 3)})).shape == (15, 3)


def test_a_failing_fake_run_raises_a_typed_error_naming_the_op(og):
    x = og.create_graph_input(X, torch.randn(2, 3))
    y = og.create_graph_input(LocalSource("y"), torch.randn(4, 5))
    nodes_before = len(og.root.graph.nodes)
    with pytest.raises(FakePropagationError) as info:
        og.root.call_function(torch.matmul, (x, y))
    assert info.value.op == "torch.matmul"
    assert "shapes cannot be multiplied" in info.value.reason or info.value.reason
    assert info.value.__cause__ is not None
    assert len(og.root.graph.nodes) == nodes_before


def test_a_data_dependent_op_is_reported_as_such(og):
    x = og.create_graph_input(X, torch.randn(()))
    value = og.root.call_method("item", (x,))
    with pytest.raises(FakePropagationError) as info:
        og.root.call_function(bool, (value,))
    assert info.value.data_dependent
    assert info.value.op == "bool"


def test_an_unbacked_scalar_is_bound_by_the_node_that_made_it(og):
    x = og.create_graph_input(X, torch.tensor(3))
    n = og.root.call_method("item", (x,))
    symbol = n.node.meta["example_value"].node.expr
    assert og.root.bound_symbols[symbol] is n


def test_unbacked_sizes_of_a_result_are_bound_by_size_nodes(og):
    y = og.create_graph_input(X, torch.tensor([0.0, 1.0, 2.0]))
    nz = og.root.call_function(torch.nonzero, (y,))
    symbol = nz.node.meta["example_value"].shape[0].node.expr
    binder = og.root.bound_symbols[symbol].node
    assert binder.args == (nz.node, 0)


def test_a_real_tensor_argument_becomes_a_get_attr_constant(og):
    x = og.create_graph_input(X, torch.randn(3))
    bias = torch.ones(3)
    og.root.call_function(torch.add, (x, bias))
    og.root.call_function(torch.mul, (x, bias))
    get_attrs = [n for n in og.root.graph.nodes if n.op == "get_attr"]
    assert len(get_attrs) == 1
    assert og.attributes[get_attrs[0].target] is bias
    assert isinstance(get_attrs[0].meta["example_value"], FakeTensor)


def test_attributes_are_named_after_their_source_and_deduplicated_by_identity(og):
    layer = torch.nn.Linear(2, 2)
    source = AttrSource(ItemSource(AttrSource(SELF, "layers"), 0), "weight")
    name = og.install_attribute(layer.weight, source=source)
    assert name == "self_layers_0_weight"
    assert og.install_attribute(layer.weight) == name
    other = og.install_attribute(torch.nn.Linear(2, 2).weight, source=source)
    assert other == "self_layers_0_weight_1"


def test_attribute_names_never_shadow_graph_module_members(og):
    assert og.install_attribute(torch.ones(1), name_hint="forward") == "forward_"
    assert og.install_attribute(torch.ones(1), name_hint="3d") == "_3d"


def test_get_attr_of_a_parameter_records_a_fake_parameter(og):
    layer = torch.nn.Linear(2, 3)
    w = og.root.get_attr(layer.weight, source=AttrSource(SELF, "weight"))
    assert w.node.op == "get_attr" and w.node.target == "self_weight"
    assert w.node.meta["example_value"].shape == (3, 2)
    assert w.node.meta["example_value"].requires_grad
    assert og.root.get_attr(layer.weight) is w


def test_get_attr_by_unknown_name_is_refused(og):
    with pytest.raises(GraphInputError):
        og.root.get_attr("nothing_here")


def test_call_module_runs_the_module_on_fakes(og):
    layer = torch.nn.Linear(4, 2)
    x = og.create_graph_input(X, torch.randn(3, 4), dynamic_dims=[0])
    y = og.root.call_module(layer, (x,), source=AttrSource(SELF, "fc"))
    assert y.node.op == "call_module" and y.node.target == "self_fc"
    assert y.node.meta["example_value"].shape[1] == 2
    compiled = og.compile(y, lambda gm, ex: gm.forward)
    real = torch.randn(6, 4)
    torch.testing.assert_close(compiled(*compiled.resolve_inputs({"x": real})), layer(real))


def test_a_fake_tensor_passed_instead_of_its_proxy_is_refused(og):
    x = og.create_graph_input(X, torch.randn(3))
    with pytest.raises(SubgraphError):
        og.root.call_function(torch.neg, (x.node.meta["example_value"],))


def test_only_recording_kinds_are_accepted(og):
    with pytest.raises(SubgraphError):
        og.root.create_proxy("placeholder", "x", ())


def test_a_proxy_of_a_tuple_unpacks_into_getitem_proxies(og):
    x = og.create_graph_input(X, torch.randn(4, 3))
    left, right = x.chunk(2)
    assert left.node.target is operator.getitem and right.node.args[1] == 1
    assert right.node.meta["example_value"].shape == (2, 3)


def test_a_proxy_of_a_tensor_cannot_be_iterated(og):
    x = og.create_graph_input(X, torch.randn(4, 3))
    with pytest.raises(SubgraphError, match="cannot iterate"):
        iter(x)
