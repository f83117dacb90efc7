"""Identity tests between tensors computed in the trace, and ``id()``: answered from what the
trace knows (one value, or torch returned the very input), equal to eager, in one graph."""

from __future__ import annotations

import functools
import weakref

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import Unsupported

X = torch.randn(3, 4)


def test_a_value_is_itself_and_distinct_results_are_not_the_same_object(check):
    def fn(x):
        y = x * 2
        z = y
        return y + 1, z is y, (x * 2) is y, y is not z

    check(fn, (X,))


def test_contiguous_is_its_input_exactly_when_the_input_is_contiguous(check):
    def fn(x):
        y = x.contiguous()
        return y * 2, y is x, y is not x

    check(fn, (X,), (torch.randn(4, 3).t(),))


def test_contiguous_of_a_computed_tensor_is_that_tensor(check):
    def fn(x):
        t = x + 1
        return t.contiguous() is t, t.t().contiguous() is t, t.contiguous() * 3

    check(fn, (X,))


def test_to_the_same_dtype_is_the_input_and_to_another_dtype_is_not(check):
    def fn(x):
        return x.to(torch.float32) is x, x.float() is x, x.double() is x, x.cpu() is x, x + 1

    check(fn, (X,), (X.double(),))


def test_in_place_results_are_their_target(check):
    def fn(x):
        y = x.clone()
        z = y.add_(1)
        w = y
        w += 1
        return z is y, w is y, y.mul_(2) is z, y

    check(fn, (X,))


def test_views_are_new_objects(check):
    def fn(x):
        return x.view_as(x) is x, x.reshape(3, 4) is x, x[:] is x, x.detach() is x, x * 1

    check(fn, (X,))


def test_distinct_inputs_are_distinct_and_one_input_twice_is_one_object(check, backend):
    def fn(a, b):
        return a is b, a.contiguous() is b, a + b

    other = torch.randn(3, 4)
    check(fn, (X, other), (X, X))


def test_ids_compare_as_identity(check):
    def fn(x, y):
        t = x + 1
        u = t
        same = id(t) == id(u)
        differ = id(t) != id(x)
        return same, differ, id(x) == id(y), id(x.contiguous()) == id(x), t

    check(fn, (X, torch.randn(3, 4)))


def test_ids_of_python_objects_compare_as_identity(check):
    def fn(x, items):
        alias = items
        return x * 2, id(alias) == id(items), id(items) != id([]), id(None) == id(None)

    check(fn, (X, [1, 2]))


@pytest.mark.parametrize(
    "body",
    [
        lambda x: x * (id(x) % 2),
        lambda x: x * 2 if id(x) == 7 else x,
        lambda x: x * 2 if id(x) < id(x + 1) else x,
    ],
    ids=["arithmetic", "compared_with_a_number", "ordered"],
)
def test_what_an_id_cannot_tell_is_refused(backend, body):
    compiled = sapwood_tracer.compile(body, backend=backend, fullgraph=True)
    with pytest.raises(Unsupported, match="id"):
        compiled(X)


def test_id_of_an_input_module_compared_with_a_number_guards_its_identity(backend):
    first, second = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    remembered = id(first)

    def fn(module, x):
        if id(module) == remembered:
            return module(x) + 1
        return module(x) - 1

    compiled = sapwood_tracer.compile(fn, backend=backend, fullgraph=True)
    x = torch.randn(2, 4)
    for module in (first, second, first, second):
        torch.testing.assert_close(compiled(module, x), fn(module, x))
    assert len(backend.graphs) == 2  # one per module: the identity is guarded


def test_id_of_a_function_or_module_compared_with_a_number(check):
    def fn(x):
        return x + (1 if id(torch) == id(torch) else 0) + (2 if id(torch.sin) != 5 else 0)

    check(fn, (X,))


def test_tiny_transformer_is_one_graph_equal_to_eager(check):
    torch.manual_seed(0)
    model = torch.nn.Transformer(
        d_model=16,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dim_feedforward=32,
        dropout=0.0,
    ).eval()
    src, tgt = torch.randn(5, 2, 16), torch.randn(4, 2, 16)

    def fn(src, tgt):
        # the decoder's cross-attention asks `query is key` of two computed tensors
        return model(src, tgt)

    check(fn, (src, tgt), (torch.randn(5, 2, 16), torch.randn(4, 2, 16)), graphs=1)


def _squares(n):
    return (i * i for i in range(n))


def _compile_eager(fn):
    return sapwood_tracer.compile(fn, backend=lambda gm, example_inputs: gm.forward)


def test_one_generator_reached_through_two_inputs_is_the_same_object():
    def fn(a, b):
        return a is b, a is not b

    compiled = _compile_eager(fn)
    g, h = _squares(3), _squares(3)
    for args in [(g, g), (g, h), (h, h), (h, g)]:  # the answer changes with the aliasing
        assert compiled(*args) == fn(*args)
    report = sapwood_tracer.explain(fn)(g, g)
    assert not report.breaks and not report.eager_functions


def test_a_weak_reference_to_a_generator_gives_that_generator():
    def fn(ref, g):
        return ref() is g

    compiled = _compile_eager(fn)
    g, h = _squares(4), _squares(4)
    for args in [(weakref.ref(g), g), (weakref.ref(h), g), (weakref.ref(g), g)]:
        assert compiled(*args) == fn(*args)
    assert list(g) == [0, 1, 4, 9]  # the identity test took no item
    report = sapwood_tracer.explain(fn)(weakref.ref(h), h)
    assert not report.breaks and not report.eager_functions


def _one():
    return 1


def _two():
    return 2


@pytest.mark.parametrize(
    "same, other",
    [(_one, _two), (functools.partial(_one), functools.partial(_two))],
    ids=["function", "partial"],
)
def test_a_function_or_partial_reached_through_two_inputs_is_the_same_object(same, other):
    def fn(a, b):
        return a is b, a is not b

    def through_a_weak_reference(ref, b):
        return ref() is b

    compiled = _compile_eager(fn)
    for args in [(same, same), (same, other), (other, other), (other, same)]:
        assert compiled(*args) == fn(*args)
    compiled_ref = _compile_eager(through_a_weak_reference)
    for args in [(weakref.ref(same), same), (weakref.ref(same), other)]:
        assert compiled_ref(*args) == through_a_weak_reference(*args)
    report = sapwood_tracer.explain(fn)(same, same)
    assert not report.breaks and not report.eager_functions


class _Kernel(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


KERNEL = _Kernel()
KERNELS: dict[int, object] = {}


def test_a_dict_keyed_by_id_of_a_lasting_object_is_handed_over_at_a_break():
    # transformers' kernel routing: ``table[id(fn)] = ...`` then the table escapes the graph
    def route(x: torch.Tensor) -> torch.Tensor:
        table = dict(KERNELS)
        table[id(KERNEL)] = KERNEL
        y = x * 2
        sapwood_tracer.graph_break()
        KERNELS.clear()
        KERNELS.update(table)
        return y + len(table)

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = sapwood_tracer.compile(route, backend=backend)
    for _ in range(2):
        KERNELS.clear()
        torch.testing.assert_close(compiled(X), route(X))
        assert list(KERNELS) == [id(KERNEL)] and KERNELS[id(KERNEL)] is KERNEL
    assert len(graphs) == 2  # before and after the break: nothing ran eagerly as a whole


def test_ids_of_classes_functions_and_constant_containers_key_a_dict(check):
    def keyed(x: torch.Tensor, table: dict) -> tuple:
        seen = {}
        seen[id(torch.Tensor)] = 1
        seen[id(torch.nn.functional.relu)] = 2
        seen[id(None)] = 3
        items = [1, 2]
        seen[id(items)] = 4
        seen[id(table)] = 5
        seen[id(type(table))] = 6
        hit = seen.get(id(table), 0) + seen.get(id(dict), 0) + seen.get(id(items), 0)
        return x + len(seen) + hit, id(table) in seen, id([1, 2]) in seen

    check(keyed, (X, {"a": 1}), graphs=1)


def test_ids_of_values_made_in_the_trace_are_not_handed_over_as_new_objects(backend):
    # eagerly ``frozenset(s)`` is ``s`` and zip hands out one tuple again: their ids, read
    # before a break and compared after it, must compare as eagerly
    def ids(x: torch.Tensor) -> tuple:
        s = frozenset(range(3))
        t = frozenset(s)
        a, b = id(s), id(t)
        pairs = zip([1, 2], [3, 4])
        first = id(next(pairs))
        second = id(next(pairs))
        sapwood_tracer.graph_break()
        return x + 1, a == b, first == second

    compiled = sapwood_tracer.compile(ids, backend=backend)
    for _ in range(2):
        got, expected = compiled(X), ids(X)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:] == (True, True)
