"""Memory: a compiled call keeps no reference to its arguments once it returns.

Every test runs with the cyclic garbage collector off: an argument must die by reference
counting alone, as soon as the caller drops it (a reference cycle through the trace's
objects or an exception's traceback would keep it alive until a collection).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch import nn

import sapwood_tracer


@pytest.fixture(autouse=True)
def _no_cyclic_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    if enabled:
        gc.enable()


def _dies_after_call(compiled: Callable[..., Any], make: Callable[[], Any], pick: Any) -> bool:
    """Call ``compiled`` on a fresh argument, drop it and the result: did the tensor die?"""
    arg = make()
    alive = weakref.ref(pick(arg))
    result = compiled(arg)
    del arg, result
    return alive() is None


def _same(arg: Any) -> Any:
    return arg


def _graph_break_in_the_middle(a):
    b = a + 1
    print("", end="")
    return b * 2


def _item(a):
    return a.sum().item()


def _data_dependent_branch(a):
    if a.sum() > 0:
        return a + 1
    return a - 1


def _list_argument(xs):
    return xs[0] * xs[1]


def _dict_argument(xs):
    return xs["a"] * 2


CASES = [
    ("one graph", lambda a: a * 2 + 1, lambda: torch.randn(3), _same),
    ("requires_grad", lambda a: (a * a).sum(), lambda: torch.randn(3, requires_grad=True), _same),
    ("a graph break", _graph_break_in_the_middle, lambda: torch.randn(3), _same),
    ("Tensor.item()", _item, lambda: torch.randn(3), _same),
    ("a data-dependent branch", _data_dependent_branch, lambda: torch.randn(3), _same),
    ("a list argument", _list_argument, lambda: [torch.randn(3), torch.randn(3)], lambda a: a[0]),
    ("a dict argument", _dict_argument, lambda: {"a": torch.randn(3)}, lambda a: a["a"]),
]


@pytest.mark.parametrize(("name", "fn", "make", "pick"), CASES, ids=[c[0] for c in CASES])
def test_the_argument_of_the_tracing_call_dies_with_its_caller(name, fn, make, pick, backend):
    compiled = sapwood_tracer.compile(fn, backend=backend)
    assert _dies_after_call(compiled, make, pick)


@pytest.mark.parametrize(("name", "fn", "make", "pick"), CASES, ids=[c[0] for c in CASES])
def test_the_argument_of_a_cached_call_dies_with_its_caller(name, fn, make, pick, backend):
    compiled = sapwood_tracer.compile(fn, backend=backend)
    compiled(make())
    assert _dies_after_call(compiled, make, pick)


def test_the_input_of_a_compiled_module_dies_with_its_caller(backend):
    compiled = sapwood_tracer.compile(nn.Sequential(nn.Linear(3, 3), nn.ReLU()), backend=backend)
    assert _dies_after_call(compiled, lambda: torch.randn(2, 3), _same)
    assert _dies_after_call(compiled, lambda: torch.randn(2, 3), _same)


def test_a_function_that_runs_eagerly_after_a_failed_trace_keeps_no_argument(backend):
    def weak(a):
        return weakref.ref(a)() * 2  # a weak reference in traced code: runs eagerly

    compiled = sapwood_tracer.compile(weak, backend=backend)
    assert _dies_after_call(compiled, lambda: torch.randn(3), _same)


def _entries(code) -> int:
    from sapwood_tracer.api import cache

    known = cache.lookup(code)
    return 0 if known is None else len(known.entries)


def test_a_deleted_module_dies_though_compiled_calls_used_it(backend):
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2))
    compiled = sapwood_tracer.compile(model, backend=backend)
    compiled(torch.randn(2, 3))
    compiled(torch.randn(2, 3))
    alive, weight = weakref.ref(model), weakref.ref(model[0].weight)
    del compiled, model
    assert alive() is None
    assert weight() is None


def test_a_deleted_python_module_dies_and_its_cache_entries_are_dropped(backend):
    import types

    scratch = types.ModuleType("scratch")
    exec("import torch\nSCALE = 3\ndef act(x):\n    return torch.relu(x) * SCALE\n", vars(scratch))
    holder = {"mod": scratch}

    def fn(x):
        mod = holder["mod"]
        return mod.act(x) + mod.SCALE

    compiled = sapwood_tracer.compile(fn, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), fn(x))
    assert _entries(fn.__code__) == 1
    alive = weakref.ref(scratch)
    del scratch, holder["mod"]
    assert alive() is None
    assert _entries(fn.__code__) == 0


def test_a_function_checked_by_identity_is_held_weakly(backend):
    namespace: dict = {}
    exec("def helper(x):\n    return x * 2\ndef fn(x):\n    return helper(x) + 1\n", namespace)
    fn = namespace["fn"]
    compiled = sapwood_tracer.compile(fn, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * 2 + 1)
    alive = weakref.ref(namespace["helper"])
    exec("def helper(x):\n    return x * 5\n", namespace)  # the old helper's last reference
    assert alive() is None
    assert _entries(fn.__code__) == 0
    torch.testing.assert_close(compiled(x), x * 5 + 1)
