"""``it.__length_hint__()`` of the iterators the trace models, against Python's answers."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import sapwood_tracer


@settings(max_examples=30, deadline=None)
@given(
    kind=st.sampled_from(["list", "tuple", "set", "dict", "keys", "values", "items", "range"]),
    size=st.integers(0, 6),
    taken=st.integers(0, 7),
)
def test_the_hint_counts_what_is_left_as_python_does(kind, size, taken):
    def fn(x, size, taken):
        items = list(range(size))
        made = {
            "list": items,
            "tuple": tuple(items),
            "set": set(items),
            "dict": dict.fromkeys(items, "v"),
            "keys": dict.fromkeys(items).keys(),
            "values": dict.fromkeys(items, 1).values(),
            "items": dict.fromkeys(items, 1).items(),
            "range": range(size),
        }[kind]
        it = iter(made)
        hints = [it.__length_hint__()]
        for _ in range(min(taken, size)):
            next(it)
            hints.append(it.__length_hint__())
        return x + 1, hints

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward, dynamic=False)
    x = torch.zeros(2)
    assert compiled(x, size, taken)[1] == fn(x, size, taken)[1]


def test_a_generator_has_no_length_hint_as_in_python(backend):
    def fn(x):
        gen = (i for i in range(3))
        try:
            gen.__length_hint__()
        except AttributeError:
            return x - 1
        return x + 1

    x = torch.zeros(2)
    torch.testing.assert_close(sapwood_tracer.compile(fn, backend=backend)(x), fn(x))


def test_an_unknown_rest_is_a_graph_break_not_a_guess(backend):
    def fn(x, it):
        return x + it.__length_hint__()

    with pytest.raises(sapwood_tracer.Unsupported):
        sapwood_tracer.compile(fn, backend=backend, fullgraph=True)(torch.zeros(2), iter([1, 2]))
