"""Guard records: deduplication, ordering, tensor specs and rendering for people."""

from __future__ import annotations

import sympy
import torch

from sapwood_graph import Guard, GuardKind, GuardSet, LocalSource, TensorPropertySource, TensorSpec

X = LocalSource("x")


def test_a_guard_set_keeps_the_first_of_equal_guards_in_insertion_order():
    guards = GuardSet()
    first = Guard(GuardKind.CONSTANT_MATCH, LocalSource("n"), 3)
    second = Guard(GuardKind.TYPE_MATCH, X, int)
    assert guards.add(first) is True
    assert guards.add(second) is True
    assert guards.add(Guard(GuardKind.CONSTANT_MATCH, LocalSource("n"), 3)) is False
    assert list(guards) == [first, second]
    assert len(guards) == 2 and first in guards


def test_guards_differing_in_expected_value_are_both_kept():
    guards = GuardSet(
        [Guard(GuardKind.CONSTANT_MATCH, X, 1), Guard(GuardKind.CONSTANT_MATCH, X, 2)]
    )
    assert len(guards) == 2


def test_guards_can_be_selected_by_kind_and_by_source():
    n = LocalSource("n")
    shape = Guard(
        GuardKind.SHAPE,
        None,
        sympy.Ge(sympy.Symbol("s0"), 2),
        ((sympy.Symbol("s0"), TensorPropertySource(X, "size", 0)),),
    )
    guards = GuardSet([Guard(GuardKind.TYPE_MATCH, n, int), shape])
    assert guards.of_kind(GuardKind.SHAPE) == [shape]
    assert guards.about(n) == [Guard(GuardKind.TYPE_MATCH, n, int)]
    assert guards.about(TensorPropertySource(X, "size", 0)) == [shape]


def test_each_kind_renders_readably():
    assert Guard(GuardKind.CONSTANT_MATCH, LocalSource("n"), 3).render() == "L['n'] == 3"
    assert Guard(GuardKind.TYPE_MATCH, LocalSource("n"), int).render() == "type(L['n']) is int"
    assert Guard(GuardKind.ID_MATCH, LocalSource("m"), 1234).render() == "id(L['m']) == 1234"
    assert Guard(GuardKind.ALIAS_MATCH, LocalSource("b"), LocalSource("a")).render() == (
        "L['b'] is L['a']"
    )
    spec = TensorSpec.of(torch.zeros(2, 3), dynamic_dims=[0])
    assert Guard(GuardKind.TENSOR_MATCH, X, spec).render() == (
        "L['x'] matches Tensor(float32, cpu, [?, 3])"
    )


def test_shape_guards_render_over_sources_not_symbols():
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    guard = Guard(
        GuardKind.SHAPE,
        None,
        sympy.Eq(s0, 2 * s1),
        (
            (s0, TensorPropertySource(X, "size", 0)),
            (s1, TensorPropertySource(LocalSource("y"), "size", 1)),
        ),
    )
    assert guard.render() == "L['x'].size()[0] == 2*L['y'].size()[1]"


def test_tensor_spec_matches_the_tensor_it_was_made_from():
    t = torch.randn(3, 4)
    assert TensorSpec.of(t).matches(t)


def test_tensor_spec_rejects_other_dtype_shape_grad_and_type():
    spec = TensorSpec.of(torch.randn(3, 4))
    assert not spec.matches(torch.randn(3, 4, dtype=torch.float64))
    assert not spec.matches(torch.randn(3, 5))
    assert not spec.matches(torch.randn(3, 4, requires_grad=True))
    assert not spec.matches(torch.nn.Parameter(torch.randn(3, 4)))
    assert not spec.matches(torch.randn(4, 3).t())
    assert not spec.matches(3)


def test_tensor_spec_leaves_dynamic_dims_free():
    spec = TensorSpec.of(torch.randn(3, 4), dynamic_dims=[0])
    assert spec.shape == (None, 4)
    assert spec.matches(torch.randn(9, 4))
    assert not spec.matches(torch.randn(9, 5))


def test_tensor_specs_are_hashable_values():
    assert TensorSpec.of(torch.zeros(2)) == TensorSpec.of(torch.ones(2))
    assert len({TensorSpec.of(torch.zeros(2)), TensorSpec.of(torch.ones(2))}) == 1


def test_guards_on_unhashable_constants_are_kept_once():
    """A constant guard may expect a slice (unhashable before Python 3.12) or a tuple of them."""
    from sapwood_graph import GuardKind, GuardSet, LocalSource
    from sapwood_graph.guards import Guard

    s = LocalSource("s")
    guards = GuardSet()
    assert guards.add(Guard(GuardKind.CONSTANT_MATCH, s, slice(1, 3)))
    assert not guards.add(Guard(GuardKind.CONSTANT_MATCH, s, slice(1, 3)))
    assert guards.add(Guard(GuardKind.CONSTANT_MATCH, s, slice(1, 4)))
    assert guards.add(Guard(GuardKind.CONSTANT_MATCH, s, (slice(None), 0)))
    assert len(guards) == 3
