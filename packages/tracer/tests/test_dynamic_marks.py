"""``mark_dynamic`` with bounds, ``maybe_mark_dynamic``, torch's own marks, and what the
user hears when code specialises a dim marked dynamic; each call compared with eager."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import sapwood_tracer
from sapwood_tracer import SpecializedDimWarning, Unsupported, mark_dynamic, maybe_mark_dynamic
from sapwood_tracer.api import cache as _cache


def _entries(fn):
    cache = _cache.lookup(fn.__code__)
    return [] if cache is None else cache.entries


def _guards(fn):
    return [g.render() for entry in _entries(fn) for g in entry.guards]


def _double(x):
    return x * 2


def test_bounds_become_guards_and_sizes_within_share_one_graph(backend, same):
    compiled = sapwood_tracer.compile(_double, backend=backend)
    for size in (8, 4, 16, 11):
        x = torch.randn(size, 3)
        mark_dynamic(x, 0, min=4, max=16)
        same(compiled(x), x * 2)
    assert backend.count == 1
    rendered = _guards(_double)
    assert "L['x'].size()[0] >= 4" in rendered and "L['x'].size()[0] <= 16" in rendered


def test_a_size_outside_the_bounds_traces_again(backend, same):
    compiled = sapwood_tracer.compile(_double, backend=backend, dynamic=False)
    x = torch.randn(8, 3)
    mark_dynamic(x, 0, min=4, max=16)
    same(compiled(x), x * 2)
    y = torch.randn(32, 3)  # unmarked, and past the first variant's max
    same(compiled(y), y * 2)
    assert backend.count == 2


def test_torchs_bounded_marks_are_read():
    import torch._dynamo

    x = torch.randn(8, 3)
    torch._dynamo.mark_dynamic(x, 0, min=3, max=10)
    sapwood_tracer.compile(_double, backend=lambda gm, ex: gm.forward)(x)
    rendered = _guards(_double)
    assert "L['x'].size()[0] >= 3" in rendered and "L['x'].size()[0] <= 10" in rendered


def test_code_may_narrow_the_bounds(backend, same):
    def fn(x):
        if x.shape[0] > 5:
            return x + 1
        return x - 1

    compiled = sapwood_tracer.compile(fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # narrowing is no specialisation: no warning
        for size in (8, 12, 3):
            x = torch.randn(size, 2)
            mark_dynamic(x, 0, min=2, max=16)
            same(compiled(x), fn(x))
    assert backend.count == 2  # one for sizes 6..16, one for 2..5


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"min": 10}, ValueError),  # the tensor's size (8) is below it
        ({"max": 4}, ValueError),
        ({"min": 6, "max": 5}, ValueError),
        ({"min": -1}, TypeError),
        ({"max": 2.5}, TypeError),
    ],
)
def test_bad_bounds_are_refused_where_they_are_given(kwargs, error):
    with pytest.raises(error):
        mark_dynamic(torch.randn(8, 3), 0, **kwargs)


def _exact(x):
    if x.shape[0] == 6:
        return x + 1
    return x - 1


def test_specialising_a_marked_dim_warns_once_naming_the_line(backend, same):
    compiled = sapwood_tracer.compile(_exact, backend=backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            x = torch.randn(6, 2)
            mark_dynamic(x, 0)
            same(compiled(x), _exact(x))
    (warning,) = [w for w in caught if issubclass(w.category, SpecializedDimWarning)]
    line = _exact.__code__.co_firstlineno + 1
    assert f"test_dynamic_marks.py:{line}" in str(warning.message)
    assert "specialises it to 6" in str(warning.message)
    assert warning.filename == __file__


def test_under_fullgraph_specialising_a_marked_dim_is_an_error(backend):
    compiled = sapwood_tracer.compile(_exact, backend=backend, fullgraph=True)
    x = torch.randn(6, 2)
    mark_dynamic(x, 0)
    with pytest.raises(Unsupported, match="exactly 6"):
        compiled(x)


@pytest.mark.parametrize("mark", ["sapwood", "torch"])
def test_maybe_mark_dynamic_may_be_specialised_quietly(backend, same, mark):
    import torch._dynamo

    compiled = sapwood_tracer.compile(_exact, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for size in (6, 7, 9):
            x = torch.randn(size, 2)
            (maybe_mark_dynamic if mark == "sapwood" else torch._dynamo.maybe_mark_dynamic)(x, 0)
            same(compiled(x), _exact(x))
    assert backend.count == 2  # 6 exactly, then the other sizes symbolic


@settings(max_examples=25, deadline=None)
@given(
    low=st.integers(2, 20),
    span=st.integers(0, 20),
    sizes=st.lists(st.integers(2, 45), min_size=1, max_size=6),
)
def test_bounded_variants_agree_with_eager_and_their_guards(low, span, sizes):
    """Whatever sizes come, the result is eager's, and a size outside the first call's
    bounds never reuses that variant."""
    sapwood_tracer.reset()
    high = low + span
    compiled = sapwood_tracer.compile(_double, backend=lambda gm, ex: gm.forward)
    first = torch.randn(low, 2)
    mark_dynamic(first, 0, min=low, max=high)
    torch.testing.assert_close(compiled(first), first * 2)
    (bounded,) = _entries(_double)
    for size in sizes:
        x = torch.randn(size, 2)
        torch.testing.assert_close(compiled(x), x * 2)
        used = [e for e in _entries(_double) if type(e.fn(((x,)), (), {})).__name__ != "Miss"]
        if not low <= size <= high:
            assert bounded not in used
        else:
            assert bounded in used
