"""Cutting graphs at gradient-bucket boundaries (``split_at_buckets``): the plan, the pieces,
and that the cut never changes values or gradients."""

from __future__ import annotations

import itertools

import torch
from hypothesis import given
from hypothesis import strategies as st

from sapwood_graph import BucketPlan, split_at_buckets
from sapwood_graph.buckets import META_KEY


class CountingBackend:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append((gm, list(example_inputs)))
        return gm.forward


def chain(widths):
    """A traced MLP whose weights are placeholders (as sapwood's graphs take parameters), its
    example inputs (an input, then each layer's weight and bias as parameters)."""
    n = len(widths) - 1

    def fn(x, *params):
        for i in range(n):
            x = torch.nn.functional.linear(x, params[2 * i], params[2 * i + 1])
            if i < n - 1:
                x = torch.relu(x)
        return (x.sum(),)

    torch.manual_seed(0)
    params = []
    for a, b in itertools.pairwise(widths):
        params += [torch.nn.Parameter(torch.randn(b, a)), torch.nn.Parameter(torch.randn(b))]
    x = torch.randn(3, widths[0])
    graph = torch.fx.Graph()
    inputs = [graph.placeholder("x")] + [graph.placeholder(f"p{i}") for i in range(len(params))]
    h = inputs[0]
    for i in range(n):
        h = graph.call_function(
            torch.nn.functional.linear, (h, inputs[1 + 2 * i], inputs[2 + 2 * i])
        )
        if i < n - 1:
            h = graph.call_function(torch.relu, (h,))
    graph.output((graph.call_method("sum", (h,)),))
    return torch.fx.GraphModule(torch.nn.Module(), graph), [x, *params], fn


def nbytes(t):
    return t.numel() * t.element_size()


def test_one_piece_per_bucket_with_parameters_in_reverse_order_of_use():
    gm, examples, _ = chain([4, 8, 8, 8])
    layer = nbytes(examples[3]) + nbytes(examples[4])  # an 8x8 layer with its bias
    inner = CountingBackend()
    split_at_buckets(inner, bucket_cap_bytes=layer, first_bucket_cap_bytes=layer)(gm, examples)
    plan = gm.meta[META_KEY]
    assert isinstance(plan, BucketPlan) and plan.split
    assert [b.params for b in plan.buckets] == [("p0", "p1"), ("p2", "p3"), ("p4", "p5")]
    assert [b.nbytes for b in plan.buckets] == [
        nbytes(examples[1]) + nbytes(examples[2]),
        layer,
        layer,
    ]
    assert "into 3 graphs" in plan.describe()


def test_pieces_are_compiled_on_their_first_call_only():
    gm, examples, _ = chain([4, 8, 8, 8])
    inner = CountingBackend()
    compiled = split_at_buckets(inner, bucket_cap_bytes=1, first_bucket_cap_bytes=1)(gm, examples)
    assert inner.graphs == []
    compiled(*examples)
    compiled(*examples)
    assert len(inner.graphs) == 3
    # each piece got the real values it was called with
    assert all(
        isinstance(e, torch.Tensor) and not isinstance(e, torch._subclasses.FakeTensor)
        for _, ex in inner.graphs
        for e in ex
    )


def test_pieces_keep_the_front_ends_marks_on_their_inputs_and_not_on_intermediates():
    gm, examples, _ = chain([4, 8, 8, 8])
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            node.meta["layout_guarded"] = True
            node.meta["static_input"] = node.name != "x"
    inner = CountingBackend()
    compiled = split_at_buckets(inner, bucket_cap_bytes=1, first_bucket_cap_bytes=1)(gm, examples)
    compiled(*examples)
    outer = {n.name for n in gm.graph.nodes if n.op == "placeholder"}
    seen_intermediate = False
    for piece, _ in inner.graphs:
        for node in piece.graph.nodes:
            if node.op != "placeholder":
                continue
            if node.name in outer:
                assert node.meta.get("layout_guarded") is True
                assert bool(node.meta.get("static_input")) == (node.name != "x")
            else:  # an output of an earlier piece: nothing guards it
                seen_intermediate = True
                assert not node.meta.get("layout_guarded")
                assert not node.meta.get("static_input")
    assert seen_intermediate


def test_parameters_that_fit_one_bucket_leave_the_graph_whole():
    gm, examples, _ = chain([4, 8, 8])
    inner = CountingBackend()
    split_at_buckets(inner, bucket_cap_bytes=1 << 20, first_bucket_cap_bytes=1 << 20)(gm, examples)
    assert inner.graphs[0][0] is gm
    assert gm.meta[META_KEY].not_split_because == "its parameters fit in one bucket"


def test_only_the_reduced_parameters_count():
    gm, examples, _ = chain([4, 8, 8, 8])
    inner = CountingBackend()
    keep = {id(examples[5]), id(examples[6])}  # the last layer's weight and bias only
    split_at_buckets(inner, bucket_cap_bytes=1, first_bucket_cap_bytes=1, params=keep)(gm, examples)
    plan = gm.meta[META_KEY]
    # the layers before the last one hold no reduced parameter: nothing to cut them off for
    assert not plan.split
    assert [b.params for b in plan.buckets] == [("p4", "p5")]


def test_a_graph_with_fake_inputs_is_not_split():
    gm, examples, _ = chain([4, 8, 8, 8])
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    fakes = [mode.from_tensor(e) for e in examples]
    inner = CountingBackend()
    split_at_buckets(inner, bucket_cap_bytes=1, first_bucket_cap_bytes=1)(gm, fakes)
    assert inner.graphs[0][0] is gm
    assert gm.meta[META_KEY].not_split_because == "the graph has symbolic sizes"


@given(
    widths=st.lists(st.integers(1, 6), min_size=2, max_size=6),
    cap=st.integers(1, 400),
    first=st.integers(1, 400),
)
def test_the_cut_never_changes_values_or_gradients(widths, cap, first):
    gm, examples, fn = chain(widths)
    compiled = split_at_buckets(
        CountingBackend(), bucket_cap_bytes=cap, first_bucket_cap_bytes=min(first, cap)
    )(gm, examples)
    x, *params = examples
    (expected,) = fn(x, *params)
    want = torch.autograd.grad(expected, params)
    (got,) = compiled(x, *params)
    have = torch.autograd.grad(got, params)
    torch.testing.assert_close(got, expected)
    for a, b in zip(have, want, strict=True):
        torch.testing.assert_close(a, b)
    plan = gm.meta[META_KEY]
    counted = [p for b in plan.buckets for p in b.params]
    assert len(counted) == len(set(counted))
