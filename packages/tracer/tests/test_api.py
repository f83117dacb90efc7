"""The compile wrapper, reset() and the per-code cache."""

from __future__ import annotations

import sys

import pytest
import torch

import sapwood_tracer

X = torch.randn(2, 3)


def test_compiled_function_keeps_its_name_and_signature_behaviour(backend):
    def scale(x, k=2.0, *, shift=0.0):
        return x * k + shift

    compiled = sapwood_tracer.compile(scale, backend=backend)
    assert compiled.__name__ == "scale"
    torch.testing.assert_close(compiled(X), X * 2)
    torch.testing.assert_close(compiled(X, 3.0, shift=1.0), X * 3 + 1)
    torch.testing.assert_close(compiled(k=0.5, x=X), X * 0.5)


def test_same_signature_hits_the_cache(backend):
    compiled = sapwood_tracer.compile(lambda x: x.cos(), backend=backend)
    for _ in range(5):
        compiled(torch.randn(2, 3))
    assert backend.count == 1


def test_reset_drops_every_cache_entry(backend):
    compiled = sapwood_tracer.compile(lambda x: x.cos(), backend=backend)
    compiled(X)
    sapwood_tracer.reset()
    compiled(X)
    assert backend.count == 2


def test_cache_is_per_code_object_shared_across_function_objects(backend):
    def make(k):
        def fn(x):
            return x * k

        return fn

    a = sapwood_tracer.compile(make(2), backend=backend)
    b = sapwood_tracer.compile(make(3), backend=backend)
    torch.testing.assert_close(a(X), X * 2)
    torch.testing.assert_close(b(X), X * 3)
    torch.testing.assert_close(a(X), X * 2)
    assert backend.count == 2


def test_a_function_compiled_with_another_backend_is_traced_for_it():
    """Entries serve only calls through a compile with their backend: compiling a function a
    second time with another backend (another mode) never runs the first one's graphs."""
    ran: list[str] = []

    def backend_named(name):
        def backend(gm, example_inputs):
            def run(*args):
                ran.append(name)
                return gm(*args)

            return run

        return backend

    def f(x):
        return x.sin() + 1

    first = sapwood_tracer.compile(f, backend=backend_named("first"))
    second = sapwood_tracer.compile(f, backend=backend_named("second"))
    strict = sapwood_tracer.compile(f, backend=backend_named("first"), fullgraph=True)
    for compiled in (first, second, first, second, strict):
        torch.testing.assert_close(compiled(X), X.sin() + 1)
    assert ran == ["first", "second", "first", "second", "first"]


def test_compiling_again_with_the_same_backend_shares_the_entries(backend):
    def f(x):
        return x.cos()

    for _ in range(3):
        sapwood_tracer.compile(f, backend=backend)(X)
    assert backend.count == 1


def test_varargs_and_varkw_signatures(backend):
    def fn(*xs, **kw):
        return sum(xs) * kw.get("k", 1)

    compiled = sapwood_tracer.compile(fn, backend=backend)
    torch.testing.assert_close(compiled(X, X, k=2), (X + X) * 2)
    torch.testing.assert_close(compiled(X), X)


def test_backend_receives_example_inputs(backend):
    seen = []

    def spy(gm, example_inputs):
        seen.append(list(example_inputs))
        return gm.forward

    sapwood_tracer.compile(lambda x, y: x + y, backend=spy)(X, X + 1)
    assert len(seen) == 1 and len(seen[0]) == 2


def test_dynamic_other_than_none_true_false_is_refused():
    with pytest.raises(TypeError, match="dynamic"):
        sapwood_tracer.compile(lambda x: x, backend=lambda gm, ex: gm.forward, dynamic="yes")


def test_non_callables_are_refused():
    with pytest.raises(TypeError):
        sapwood_tracer.compile(3, backend=lambda gm, ex: gm.forward)


def test_unknown_opcode_is_reported_by_name(monkeypatch):
    from sapwood_tracer import Unsupported
    from sapwood_tracer.interpreter import registry as _registry

    table = dict(_registry.dispatch_table())
    del table["BINARY_OP"]
    monkeypatch.setattr(_registry, "_tables", {sys.version_info[:2]: table})
    with pytest.raises(Unsupported, match="opcode BINARY_OP"):
        sapwood_tracer.compile(lambda x: x + 1, fullgraph=True, backend=lambda gm, ex: gm.forward)(
            X
        )


def test_changing_a_default_after_compiling_is_seen(backend):
    def fn(x, k=2.0):
        return x * k

    compiled = sapwood_tracer.compile(fn, backend=backend)
    torch.testing.assert_close(compiled(X), X * 2)
    fn.__defaults__ = (5.0,)
    torch.testing.assert_close(compiled(X), X * 5)


def test_binding_errors_are_the_usual_type_errors(backend):
    compiled = sapwood_tracer.compile(lambda x, *, k: x * k, backend=backend)
    with pytest.raises(TypeError):
        compiled(X)
    with pytest.raises(TypeError):
        compiled(X, k=1, j=2)


def test_compiled_functions_and_modules_called_from_traced_code_are_traced_through(backend):
    inner = sapwood_tracer.compile(lambda t: t.sin(), backend=backend)
    layer = sapwood_tracer.compile(torch.nn.Linear(3, 3), backend=backend)

    def outer(x):
        return layer(inner(x)) * 2

    compiled = sapwood_tracer.compile(outer, backend=backend)
    torch.testing.assert_close(compiled(X), layer._orig_mod(X.sin()) * 2)
    assert backend.count == 1


class _Slotted:
    __slots__ = ("k",)

    def __init__(self):
        self.k = 1


def test_errors_inside_library_code_name_the_users_line():
    import copy

    def fn(x):
        cfg = copy.copy(_Slotted())  # (an object with slots: copy.py reduces it)
        return x * cfg.k

    with pytest.raises(
        sapwood_tracer.Unsupported, match=r"copy\.py:\d+, reached from .*test_api\.py:\d+"
    ):
        sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)(X)
