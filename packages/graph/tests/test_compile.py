"""Compilation: DCE, input pruning and merging, the backend call, results, guards, hooks."""

from __future__ import annotations

import collections
import operator

import pytest
import torch

from sapwood_graph import (
    BackendCompilerFailed,
    GraphError,
    GuardKind,
    LocalSource,
    OutputGraph,
    SubgraphError,
    TensorPropertySource,
)

X, Y = LocalSource("x"), LocalSource("y")


class CountingBackend:
    """An eager backend that remembers what it was given."""

    def __init__(self):
        self.calls = []

    def __call__(self, gm, example_inputs):
        self.calls.append((gm, example_inputs))
        return gm.forward


def ops(gm):
    return [n.target for n in gm.graph.nodes if n.op not in ("placeholder", "output")]


def test_the_backend_is_called_once_with_the_graph_and_real_example_inputs():
    og = OutputGraph()
    t = torch.randn(3)
    x = og.create_graph_input(X, t)
    backend = CountingBackend()
    compiled = og.compile(x.sin(), backend)
    ((gm, example_inputs),) = backend.calls
    assert isinstance(gm, torch.fx.GraphModule)
    assert example_inputs == [t] and example_inputs[0] is t
    assert compiled.graph_module is gm
    assert compiled.input_sources == (X,)


def test_dead_pure_nodes_are_removed():
    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(3))
    og.root.call_function(torch.cos, (x,))
    compiled = og.compile(og.root.call_function(torch.sin, (x,)), CountingBackend())
    assert ops(compiled.graph_module) == [torch.sin]


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(lambda t, x: t.call_method("add_", (x, 1)), id="inplace-method"),
        pytest.param(lambda t, x: t.call_function(torch.relu_, (x,)), id="inplace-function"),
        pytest.param(lambda t, x: t.call_function(operator.setitem, (x, 0, 5.0)), id="setitem"),
        pytest.param(lambda t, x: t.call_function(operator.iadd, (x, 2)), id="augmented"),
        pytest.param(
            lambda t, x: t.call_function(torch.nn.functional.relu, (x,), {"inplace": True}),
            id="inplace-kwarg",
        ),
        pytest.param(lambda t, x: t.call_function(torch.neg, (x,), {"out": x}), id="out-kwarg"),
    ],
)
def test_unused_side_effecting_ops_are_kept(record):
    og = OutputGraph()
    t = torch.tensor([-1.0, 2.0, -3.0])
    x = og.create_graph_input(X, t)
    record(og.root, x)
    expected = t.clone()
    compiled = og.compile(None, CountingBackend())
    assert len(ops(compiled.graph_module)) == 1
    compiled(t)
    assert not torch.equal(t, expected)


def test_a_training_batch_norm_is_kept_because_it_updates_running_stats():
    og = OutputGraph()
    bn = torch.nn.BatchNorm1d(3).train()
    x = og.create_graph_input(X, torch.randn(4, 3))
    og.root.call_module(bn, (x,))
    compiled = og.compile(None, CountingBackend())
    assert len(ops(compiled.graph_module)) == 1


def test_unused_inputs_are_removed():
    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(3))
    og.create_graph_input(Y, torch.randn(3))
    og.create_graph_input(LocalSource("n"), 4)
    compiled = og.compile(x * 2, CountingBackend())
    assert compiled.input_sources == (X,)


def test_inputs_binding_used_symbols_are_kept():
    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(5, 2), dynamic_dims=[0])
    compiled = og.compile(x.sum(0), CountingBackend())
    assert compiled.input_sources == (TensorPropertySource(X, "size", 0), X)


def test_symbol_inputs_whose_symbol_is_unused_are_removed():
    og = OutputGraph()
    og.create_graph_input(X, torch.randn(5, 2), dynamic_dims=[0])
    y = og.create_graph_input(Y, torch.randn(3))
    compiled = og.compile(y + 1, CountingBackend())
    assert compiled.input_sources == (Y,)


def test_two_sources_holding_the_same_tensor_share_one_input_with_an_alias_guard():
    og = OutputGraph()
    t = torch.randn(3)
    a = og.create_graph_input(X, t)
    b = og.create_graph_input(Y, t)
    compiled = og.compile(a + b, CountingBackend())
    assert compiled.input_sources == (X,)
    (guard,) = compiled.guards.of_kind(GuardKind.ALIAS_MATCH)
    assert (guard.source, guard.expected) == (Y, X)
    torch.testing.assert_close(compiled(t), t + t)


def test_equal_but_distinct_tensors_are_never_merged():
    og = OutputGraph()
    t = torch.randn(3)
    a = og.create_graph_input(X, t)
    b = og.create_graph_input(Y, t.clone())
    compiled = og.compile(a + b, CountingBackend())
    assert compiled.input_sources == (X, Y)
    assert not compiled.guards.of_kind(GuardKind.ALIAS_MATCH)


def test_a_backend_exception_becomes_backend_compiler_failed():
    def broken_backend(gm, example_inputs):
        raise ValueError("no kernels today")

    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(3))
    with pytest.raises(BackendCompilerFailed) as info:
        og.compile(x + 1, broken_backend)
    assert info.value.backend == "broken_backend"
    assert "broken_backend" in str(info.value) and "no kernels today" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)


def test_a_backend_returning_no_callable_fails_clearly():
    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(3))
    with pytest.raises(BackendCompilerFailed, match="not a callable"):
        og.compile(x + 1, lambda gm, ex: None, backend_name="silly")


Pair = collections.namedtuple("Pair", ["left", "right"])


def test_the_output_structure_is_rebuilt_with_constants_in_place():
    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(3))
    outputs = {"pair": Pair(x + 1, "tag"), "list": [x * 2, None, 7], "same": x}
    compiled = og.compile(outputs, CountingBackend())
    t = torch.randn(3)
    result = compiled(t)
    assert isinstance(result["pair"], Pair) and result["pair"].right == "tag"
    torch.testing.assert_close(result["pair"].left, t + 1)
    assert result["list"][1:] == [None, 7]
    assert result["same"] is t
    assert compiled.output_spec.num_graph_outputs == 3


def test_an_output_from_a_subtracer_is_refused():
    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(3))
    with og.root.subtracer() as child:
        inner = child.call_function(torch.neg, (x,))
        child.output(inner)
    with pytest.raises(SubgraphError):
        og.compile(inner, CountingBackend())


def test_a_compiled_graph_takes_no_more_nodes():
    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(3))
    og.compile(x, CountingBackend())
    with pytest.raises(GraphError):
        og.root.call_function(torch.neg, (x,))
    with pytest.raises(GraphError):
        og.compile(x, CountingBackend())


def test_shape_guards_relate_duck_sized_inputs_and_exclude_zero_one():
    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(4), dynamic_dims=[0])
    y = og.create_graph_input(Y, torch.randn(4), dynamic_dims=[0])
    compiled = og.compile(x + y, CountingBackend())
    rendered = [g.render() for g in compiled.guards.of_kind(GuardKind.SHAPE)]
    assert "L['y'].size()[0] == L['x'].size()[0]" in rendered
    assert "L['x'].size()[0] >= 2" in rendered


def test_branching_on_a_size_while_tracing_becomes_a_shape_guard():
    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(6), dynamic_dims=[0])
    y = og.create_graph_input(Y, torch.randn(3), dynamic_dims=[0])
    n = x.node.meta["example_value"].shape[0]
    m = y.node.meta["example_value"].shape[0]
    assert bool(n > 2 * m - 1)  # a frontend specialising a Python branch
    rendered = [g.render() for g in og.shape_guards()]
    assert any("L['x'].size()[0]" in r and "L['y'].size()[0]" in r for r in rendered), rendered


def test_every_shape_guard_binds_all_its_symbols():
    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(6, 4), dynamic_dims=[0, 1])
    og.root.call_function(torch.reshape, (x, (-1,)))
    for guard in og.shape_guards():
        bound = {s for s, _ in guard.symbols}
        assert guard.expected.free_symbols <= bound


def test_compiled_result_equals_eager_with_new_sizes():
    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(5, 3), dynamic_dims=[0])
    n = og.create_graph_input(LocalSource("n"), 3)
    y = og.root.call_function(torch.cat, ([x, x * n],))
    compiled = og.compile(y.sum(1), CountingBackend())
    t = torch.randn(9, 3)
    got = compiled(*compiled.resolve_inputs({"x": t, "n": 4}))
    torch.testing.assert_close(got, torch.cat([t, t * 4]).sum(1))


def test_a_graph_with_symbols_gives_the_backend_fake_examples_of_its_shape_env():
    from torch._subclasses.fake_tensor import FakeTensor

    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(5, 3), dynamic_dims=[0])
    n = og.create_graph_input(LocalSource("n"), 3)
    backend = CountingBackend()
    og.compile(x * n, backend)
    ((_, examples),) = backend.calls
    size, fake, count = examples
    assert isinstance(fake, FakeTensor) and fake.fake_mode is og.fake_mode
    assert isinstance(size, torch.SymInt)
    assert size.node.expr == fake.shape[0].node.expr
    assert isinstance(count, torch.SymInt)


def test_a_static_graph_gives_the_backend_real_examples():
    og = OutputGraph()
    t = torch.randn(2, 3)
    x = og.create_graph_input(X, t)
    backend = CountingBackend()
    og.compile(x + 1, backend)
    ((_, examples),) = backend.calls
    assert examples[0] is t


def test_assumptions_a_backend_adds_while_compiling_are_guards():
    def bounding_backend(gm, example_inputs):
        size = example_inputs[0]
        assert bool(size <= 100)  # a backend specialising, as Inductor bounds sizes
        return gm.forward

    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(5, 3), dynamic_dims=[0])
    compiled = og.compile(x + 1, bounding_backend)
    rendered = [g.render() for g in compiled.guards.of_kind(GuardKind.SHAPE)]
    assert "L['x'].size()[0] <= 100" in rendered


def test_strides_that_depend_on_symbolic_sizes_are_shape_guards():
    og = OutputGraph()
    x = og.create_graph_input(X, torch.randn(3, 5).t(), dynamic_dims=[0, 1])
    compiled = og.compile(x * 2, CountingBackend())
    rendered = [g.render() for g in compiled.guards.of_kind(GuardKind.SHAPE)]
    assert "L['x'].stride()[1] == L['x'].size()[0]" in rendered
    (spec,) = [g.expected for g in compiled.guards.of_kind(GuardKind.TENSOR_MATCH)]
    assert spec.stride == (1, None)


def test_a_dynamic_strided_view_keeps_its_real_strides():
    og = OutputGraph()
    view = torch.randn(8, 4)[::2]
    x = og.create_graph_input(X, view, dynamic_dims=[0])
    assert x.node.meta["example_value"].stride() == view.stride()


def test_cleanup_hooks_run_once_last_first():
    calls = []
    og = OutputGraph()
    og.add_cleanup_hook(lambda: calls.append("first"))
    og.add_cleanup_hook(lambda: calls.append("second"))
    og.cleanup()
    og.cleanup()
    assert calls == ["second", "first"]


def test_leaving_the_with_block_runs_cleanup_hooks_even_on_error():
    calls = []
    with pytest.raises(RuntimeError), OutputGraph() as og:
        og.add_cleanup_hook(lambda: calls.append("restored"))
        raise RuntimeError("trace failed")
    assert calls == ["restored"]
