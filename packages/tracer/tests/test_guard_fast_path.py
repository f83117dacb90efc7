"""The fast form of the guard check keeps every guard's meaning, both ways.

The per-call check leaves out implied guards, reads modules through their instance dict
(with class checks that keep this equal to attribute access), checks module tensors'
aliasing by their ids, and finds the failing guard with a locator only when a check raised.
Each test changes one thing the fast form reads differently and checks that a change which
matters recompiles (the result equal to eager) and one that does not, does not.
"""

from __future__ import annotations

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import Unsupported

X = torch.randn(3, 4)


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.scale = 2.0
        self.unused = 1.0

    def forward(self, x):
        return self.linear(x) * self.scale


def _compile(module, backend, **options):
    compiled = sapwood_tracer.compile(module, backend=backend, **options)
    return compiled


def _only_entry():
    from sapwood_tracer.api import cache as _cache

    (cache,) = [c for c in _cache._caches.values() if c.entries]
    return cache.entries[0]


def test_module_attributes_read_recompile_and_others_do_not(backend, same):
    m = Scaled()
    compiled = _compile(m, backend)
    same(compiled(X), m(X))
    m.unused = 5.0
    same(compiled(X), m(X))
    assert backend.count == 1
    m.scale = 3.0
    same(compiled(X), m(X))
    assert backend.count == 2


def test_forward_hook_registered_later_recompiles_and_runs(backend, same):
    m = Scaled()
    compiled = _compile(m, backend)
    compiled(X)
    handle = m.linear.register_forward_hook(lambda mod, args, out: out + 1)
    same(compiled(X), m(X))
    assert backend.count == 2
    handle.remove()
    same(compiled(X), m(X))
    assert backend.count == 2  # the first entry applies again


def test_hook_put_straight_into_a_hook_dict_is_seen(backend, same):
    m = Scaled()
    compiled = _compile(m, backend)
    compiled(X)
    m.linear._forward_pre_hooks[12345] = lambda mod, args: (args[0] * 3,)
    same(compiled(X), m(X))
    assert backend.count == 2


def test_backward_hook_registered_later_is_seen(backend):
    m = Scaled()
    compiled = _compile(m, backend, fullgraph=True)
    compiled(X)
    m.linear.register_full_backward_hook(lambda mod, gin, gout: None)
    with pytest.raises(Unsupported, match="backward hooks"):
        compiled(X)


def test_forward_assigned_on_the_instance_later_is_seen(backend, same):
    m = Scaled()
    compiled = _compile(m, backend)
    compiled(X)
    m.linear.forward = lambda x: x - 1
    same(compiled(X), m(X))
    assert backend.count == 2


def test_module_class_reassigned_later_is_seen(backend, same):
    class Doubled(torch.nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    m = Scaled()
    compiled = _compile(m, backend)
    compiled(X)
    m.linear.__class__ = Doubled
    same(compiled(X), m(X))
    assert backend.count == 2


@pytest.mark.parametrize("where", ["class", "base"])
def test_property_added_to_a_module_class_later_is_seen(backend, same, where):
    class Base(torch.nn.Module):
        pass

    class Holder(Base):
        def __init__(self) -> None:
            super().__init__()
            self.scale = 2.0

        def forward(self, x):
            return x * self.scale

    m = Holder()
    compiled = _compile(m, backend)
    same(compiled(X), X * 2.0)
    owner = Holder if where == "class" else Base
    owner.scale = property(lambda self: 5.0)  # a data descriptor wins over the instance dict
    same(compiled(X), m(X))
    assert backend.count == 2


def test_module_class_given_new_bases_later_is_seen(backend, same):
    class Plain(torch.nn.Module):
        pass

    class WithScale(torch.nn.Module):
        scale = property(lambda self: 5.0)

    class Holder(Plain):
        def __init__(self) -> None:
            super().__init__()
            self.scale = 2.0

        def forward(self, x):
            return x * self.scale

    m = Holder()
    compiled = _compile(m, backend)
    same(compiled(X), X * 2.0)
    Holder.__bases__ = (WithScale,)  # a new MRO, with a property the instance dict loses to
    same(compiled(X), m(X))
    assert backend.count == 2


def test_instance_attribute_deleted_later_falls_back_to_the_class_attribute(backend, same):
    class Holder(torch.nn.Module):
        scale = 3.0

        def __init__(self) -> None:
            super().__init__()
            self.scale = 2.0

        def forward(self, x):
            return x * self.scale

    m = Holder()
    compiled = _compile(m, backend)
    same(compiled(X), X * 2.0)
    del m.scale
    same(compiled(X), X * 3.0)
    assert backend.count == 2


def test_child_of_a_module_list_slice_replaced_later_is_guarded_by_structure(backend, same):
    class Stack(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])

        def forward(self, x):
            for layer in self.layers[:2]:
                x = layer(x)
            return x

    m = Stack()
    compiled = _compile(m, backend)
    same(compiled(X), m(X))
    m.layers[1] = torch.nn.Linear(4, 4)  # the same structure: the same trace, new weights
    same(compiled(X), m(X))
    assert backend.count == 1
    m.layers[1] = torch.nn.Linear(4, 4, bias=False)  # another structure: a new trace
    same(compiled(X), m(X))
    assert backend.count == 2


def test_parameter_replaced_by_a_new_one_of_the_same_kind_needs_no_recompile(backend, same):
    m = Scaled()
    compiled = _compile(m, backend)
    compiled(X)
    m.linear.weight = torch.nn.Parameter(torch.randn(4, 4))
    same(compiled(X), m(X))
    assert backend.count == 1


def test_parameters_tied_after_compiling_recompile(backend, same):
    class Two(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(4, 4)
            self.b = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.b(self.a(x))

    m = Two()
    compiled = _compile(m, backend)
    compiled(X)
    m.b.weight = m.a.weight
    same(compiled(X), m(X))
    assert backend.count == 2


def test_an_argument_that_is_a_module_tensor_gets_its_own_entry(backend, same):
    class Shifted(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("shift", torch.ones(4))
            self.register_buffer("scale", torch.full((4,), 2.0))

        def forward(self, x):
            return x * self.scale + self.shift

    m = Shifted()

    def fn(x):
        return m(x)

    compiled = sapwood_tracer.compile(fn, backend=backend)
    same(compiled(torch.zeros(4)), fn(torch.zeros(4)))
    same(compiled(m.shift), fn(m.shift))  # the argument is the buffer itself
    assert backend.count == 2
    same(compiled(torch.zeros(4)), fn(torch.zeros(4)))
    assert backend.count == 2


def test_a_failed_check_names_its_guard(backend):
    m = Scaled()
    compiled = _compile(m, backend)
    compiled(X)
    entry = _only_entry()
    m.scale = 4.0
    L = (m, X)
    miss = entry.fn(L, (), type(m).forward.__globals__)
    assert "scale" in entry.describe_guard(miss.index)


def test_a_check_that_raises_names_its_guard(backend):
    m = Scaled()
    compiled = _compile(m, backend)
    compiled(X)
    entry = _only_entry()
    del m.scale  # reading the instance dict raises KeyError: the locator finds the guard
    L = (m, X)
    miss = entry.fn(L, (), type(m).forward.__globals__)
    assert "scale" in entry.describe_guard(miss.index)


@pytest.mark.parametrize(
    "first,second",
    [(2.5, 2.5000000000000004), (1.0, 1), (3, 3.0), (7, True), ("a", "b")],
)
def test_constants_compare_by_exact_type_and_value(backend, same, first, second):
    def fn(x, c):
        return x * 2, c, type(c).__name__

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=False)
    same(compiled(X, first), fn(X, first))
    same(compiled(X, second), fn(X, second))
    assert backend.count == 2


def test_module_attribute_names_never_reach_the_generated_source(backend):
    evil = "x') or __import__('os').system('echo pwned') or ('"

    class Holder(torch.nn.Module):
        def forward(self, x):
            return x * getattr(self, evil)

    m = Holder()
    setattr(m, evil, 3.0)
    compiled = _compile(m, backend)
    torch.testing.assert_close(compiled(X), X * 3.0)
    assert "pwned" not in _only_entry().fn.__sapwood_source__
    setattr(m, evil, 4.0)
    torch.testing.assert_close(compiled(X), X * 4.0)


def test_an_entry_with_many_guards_keeps_a_small_frame(backend, same):
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4, bias=False) for _ in range(100)])
    compiled = _compile(model, backend)
    same(compiled(X), model(X))
    entry = _only_entry()
    assert len(entry.guards) > 400
    # the 100 weights are alive together at the graph call; everything else is reused
    assert entry.fn.__code__.co_nlocals < 130


def _straight_line_program(steps):
    """Lines of a generated-style function body over ``v<n>`` locals, and its result."""
    lines = []
    for n, (kind, a, b) in enumerate(steps):
        if kind == "const" or n == 0:
            lines.append(f"    v{n} = {a}")
        elif kind == "add":
            lines.append(f"    v{n} = v{a % n} + v{b % n}")
        else:  # an early exit, like a failed guard
            lines.append(f"    if v{a % n} > {b * 50}:")
            lines.append(f"        return (-1, v{a % n})")
            lines.append(f"    v{n} = v{a % n} * 2")
    reads = ", ".join(f"v{i}" for i in range(0, len(steps), 3))
    lines.append(f"    return ({reads},)")
    return lines


def test_reusing_dead_locals_never_changes_what_a_function_computes():
    from hypothesis import given
    from hypothesis import strategies as st

    from sapwood_tracer.guards.emitter import _reuse_locals

    step = st.tuples(
        st.sampled_from(["const", "add", "exit"]), st.integers(0, 40), st.integers(0, 40)
    )

    @given(st.lists(step, min_size=1, max_size=40))
    def run(steps):
        lines = _straight_line_program(steps)
        results = []
        for body in (lines, _reuse_locals(lines)):
            scope: dict = {}
            exec("def f():\n" + "\n".join(body) + "\n", {}, scope)
            results.append(scope["f"]())
        assert results[0] == results[1]

    run()


def test_locals_are_left_alone_where_reuse_would_not_be_sound():
    from sapwood_tracer.guards.emitter import _reuse_locals

    looped = ["    v0 = 1", "    for i in range(3):", "        v1 = v0 + i", "    return v1"]
    assigned_twice = ["    v0 = 1", "    v1 = v0", "    v0 = 2", "    return v1 + v0"]
    read_first = ["    v1 = v0", "    v0 = 1", "    return v1"]
    for lines in (looped, assigned_twice, read_first):
        assert _reuse_locals(lines) == lines
