"""Dynamic shapes: the recompile policy, symbolic sizes in the trace, and the guards.

Every test compares with eager on each call and counts the graphs the backend compiled.
"""

from __future__ import annotations

import sympy
import torch
from hypothesis import given
from hypothesis import strategies as st

import sapwood_tracer
from sapwood_graph import Guard, GuardKind, LocalSource
from sapwood_tracer import mark_dynamic, mark_static
from sapwood_tracer.api import cache as _cache
from sapwood_tracer.guards.emitter import Emitter, Miss
from sapwood_tracer.guards.fast_path import emit_guards


def _entries(fn):
    cache = _cache.lookup(fn.__code__)
    return [] if cache is None else cache.entries


def _calls(compiled, fn, same, *arg_sets):
    for args in arg_sets:
        same(compiled(*args), fn(*args))


def _placeholders(gm):
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


# --------------------------------------------------------------------- the policy


def test_varying_batch_size_compiles_once_more_then_reuses_the_symbolic_graph(backend, same):
    def fn(x):
        return torch.relu(x) * 2

    compiled = sapwood_tracer.compile(fn, backend=backend)
    _calls(compiled, fn, same, *[(torch.randn(b, 4),) for b in (3, 4, 5, 6, 7, 12)])
    assert backend.count == 2
    sizes = [
        n
        for n in _placeholders(backend.graphs[1])
        if isinstance(n.meta["example_value"], torch.SymInt)
    ]
    assert len(sizes) == 1


def test_only_the_dims_that_varied_become_symbolic(backend, same):
    def fn(x):
        return x.sum(0)

    compiled = sapwood_tracer.compile(fn, backend=backend)
    _calls(compiled, fn, same, (torch.randn(3, 4),), (torch.randn(5, 4),))
    _calls(compiled, fn, same, (torch.randn(5, 6),))
    assert backend.count == 3  # the second dim varied only on the third call
    _calls(compiled, fn, same, (torch.randn(7, 9),), (torch.randn(2, 3),))
    assert backend.count == 3


def test_dynamic_false_compiles_once_per_size(backend, same):
    def fn(x):
        return x + 1

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=False)
    _calls(compiled, fn, same, *[(torch.randn(b),) for b in (3, 4, 5)])
    assert backend.count == 3


def test_dynamic_true_is_symbolic_from_the_first_call(backend, same):
    def fn(x, y):
        return x @ y

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(
        compiled,
        fn,
        same,
        (torch.randn(3, 4), torch.randn(4, 5)),
        (torch.randn(6, 2), torch.randn(2, 7)),
    )
    assert backend.count == 1


def test_mark_dynamic_makes_the_first_trace_symbolic_in_that_dim(backend, same):
    def fn(x):
        return x.mean(1)

    compiled = sapwood_tracer.compile(fn, backend=backend)
    for b in (3, 8, 5):
        x = torch.randn(b, 4)
        mark_dynamic(x, 0)
        same(compiled(x), fn(x))
    assert backend.count == 1


def test_mark_static_overrides_dynamic_true(backend, same):
    def fn(x):
        return x * 3

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    for b in (3, 4):
        x = torch.randn(b, 4)
        mark_static(x, 0)
        same(compiled(x), fn(x))
    assert backend.count == 2


def test_mark_dynamic_refuses_a_dim_out_of_range():
    import pytest

    with pytest.raises(IndexError, match="out of range"):
        mark_dynamic(torch.randn(2, 3), 2)


def test_int_arguments_that_vary_become_symbolic(backend, same):
    def fn(x, n):
        return x * n + n

    compiled = sapwood_tracer.compile(fn, backend=backend)
    _calls(compiled, fn, same, *[(torch.randn(3), n) for n in (2, 3, 4, 10, 0, 1, -5)])
    assert backend.count == 2


def test_parameters_stay_static_under_dynamic_true(backend, same):
    model = torch.nn.Linear(4, 3)
    compiled = sapwood_tracer.compile(model, backend=backend, dynamic=True)
    with torch.no_grad():
        for b in (2, 5):
            x = torch.randn(b, 4)
            same(compiled(x), model(x))
    assert backend.count == 1
    weight = [n for n in _placeholders(backend.graphs[0]) if "weight" in n.name]
    assert weight and all(isinstance(s, int) for s in weight[0].meta["example_value"].shape)


# --------------------------------------------------------------------- sizes in the trace


def test_sizes_feed_view_reshape_arange_and_new_tensors(backend, same):
    def fn(x):
        b, s = x.shape[0], x.size(1)
        flat = x.reshape(b * s)
        index = torch.arange(x.numel())
        return flat.view(b, -1) + 1, index * 2, torch.zeros(b, s).shape, x.new_ones(s)

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(compiled, fn, same, (torch.randn(3, 5),), (torch.randn(4, 2),), (torch.randn(7, 3),))
    assert backend.count == 1


def test_returned_sizes_are_ints_of_the_call(backend, same):
    def fn(x):
        return x.shape[0] * 2, x.numel(), x.size(), len(x.shape)

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(compiled, fn, same, (torch.randn(3, 5),), (torch.randn(6, 2),))
    assert backend.count == 1


def test_symbolic_sizes_compare_with_sizes_and_tuples_by_value(backend, same):
    def fn(x, y):
        return x + 1, x.shape == y.shape, x.shape == (x.shape[0], 4), x.shape != (2, 4)

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(compiled, fn, same, (torch.randn(3, 4), torch.randn(5, 4)))
    _calls(compiled, fn, same, (torch.randn(6, 4), torch.randn(6, 4)))
    _calls(compiled, fn, same, (torch.randn(2, 4), torch.randn(7, 4)))


def test_slicing_and_extending_a_symbolic_size_gives_a_torch_size(backend, same):
    def fn(x):  # concatenation on purpose: torch.Size + tuple is what is tested
        return x.new_zeros(x.shape[:-1] + (2,)), x.shape[1:], x.shape + (1,)  # noqa: RUF005

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(compiled, fn, same, (torch.randn(3, 4),), (torch.randn(5, 6),))
    assert backend.count == 1


def test_max_and_min_of_sizes_stay_symbolic(backend, same):
    def fn(x, y):
        return x.new_ones(max(x.shape[0], y.shape[0] * 2)), min(x.shape[0], 4)

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(compiled, fn, same, *[(torch.randn(a), torch.randn(b)) for a, b in [(3, 2), (9, 3)]])
    assert backend.count == 1


def test_a_size_lives_across_a_graph_break(backend, same):
    def fn(x):
        b = x.shape[0]
        y = x * 2
        sapwood_tracer.graph_break()
        return y.view(b, -1), b + 1

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(compiled, fn, same, *[(torch.randn(b, 2, 2),) for b in (3, 5, 6, 8)])


def test_branching_on_a_size_guards_the_condition_not_the_value(backend, same):
    def fn(x):
        if x.shape[0] > 8:
            return x * 2
        return x - 1

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(compiled, fn, same, *[(torch.randn(b),) for b in (3, 4, 8)])
    assert backend.count == 1
    _calls(compiled, fn, same, *[(torch.randn(b),) for b in (9, 20)])
    assert backend.count == 2
    _calls(compiled, fn, same, (torch.randn(5),), (torch.randn(30),))
    assert backend.count == 2


def test_a_size_used_as_a_python_int_specialises_with_a_guard(backend, same):
    def fn(x):
        return [x[i] for i in range(x.shape[0])]

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(compiled, fn, same, (torch.randn(3),), (torch.randn(3),), (torch.randn(4),))
    assert backend.count == 2


def test_sizes_zero_and_one_are_specialised(backend, same):
    def fn(x):
        return x.sum(0)

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(compiled, fn, same, (torch.randn(1, 3),), (torch.randn(1, 3),))
    assert backend.count == 1
    _calls(compiled, fn, same, (torch.randn(4, 3),), (torch.randn(9, 3),))
    assert backend.count == 2  # 1 was specialised; 4 and 9 share the symbolic graph


def test_equal_sizes_share_a_symbol_until_they_differ(backend, same):
    def fn(x, y):
        return x.sum() + y.sum()

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(compiled, fn, same, (torch.randn(4), torch.randn(4)), (torch.randn(6), torch.randn(6)))
    assert backend.count == 1
    _calls(compiled, fn, same, (torch.randn(5), torch.randn(7)), (torch.randn(2), torch.randn(9)))
    assert backend.count == 2


def test_a_strided_view_does_not_reuse_the_graph_of_dense_inputs(backend, same):
    def fn(x):
        return x.view(-1) * 2 if x.is_contiguous() else x * 3

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(compiled, fn, same, (torch.randn(3, 4),), (torch.randn(5, 4),))
    assert backend.count == 1
    _calls(compiled, fn, same, (torch.randn(6, 4)[::2],), (torch.randn(10, 4)[::2],))
    assert backend.count == 2


def test_transposed_inputs_of_varying_sizes_share_one_graph(backend, same):
    def fn(x):
        return x * 2

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=True)
    _calls(compiled, fn, same, *[(torch.randn(4, n).t(),) for n in (3, 5, 7)])
    assert backend.count == 1


# --------------------------------------------------------------------- guards


def _symbolic_entry(backend):
    def fn(x):
        if x.shape[0] > 8:
            return x * 2
        return x.view(x.shape[0], -1)

    compiled = sapwood_tracer.compile(fn, backend=backend)
    x = torch.randn(4, 3)
    mark_dynamic(x, 0)
    compiled(x)
    (entry,) = _entries(fn)
    return entry, fn


def test_guards_reject_a_rank_change(backend):
    entry, fn = _symbolic_entry(backend)
    assert type(entry.fn((torch.randn(5, 3),), (), fn.__globals__)) is not Miss
    assert type(entry.fn((torch.randn(5, 3, 1),), (), fn.__globals__)) is Miss


def test_guards_reject_a_dtype_change(backend):
    entry, fn = _symbolic_entry(backend)
    x = torch.randn(5, 3, dtype=torch.float64)
    assert type(entry.fn((x,), (), fn.__globals__)) is Miss


def test_guards_reject_a_size_violating_a_recorded_condition(backend):
    entry, fn = _symbolic_entry(backend)
    assert type(entry.fn((torch.randn(8, 3),), (), fn.__globals__)) is not Miss
    assert type(entry.fn((torch.randn(9, 3),), (), fn.__globals__)) is Miss


def test_guards_reject_a_static_dim_that_changed(backend):
    entry, fn = _symbolic_entry(backend)
    assert type(entry.fn((torch.randn(5, 4),), (), fn.__globals__)) is Miss


def test_guard_code_reads_sizes_by_index_only(backend):
    entry, _ = _symbolic_entry(backend)
    text = entry.fn.__sapwood_source__
    assert ".size(0)" in text
    assert "L['x']" not in text  # sources are never spliced as text


def _shape_check(expr, symbols):
    """A generated function checking one SHAPE guard over int arguments ``a``, ``b``."""

    def code(a, b):
        return a, b

    guard = Guard(GuardKind.SHAPE, None, expr, tuple((s, LocalSource(n)) for s, n in symbols))
    em = Emitter(code.__code__, {})
    lines = emit_guards(em, [guard], {}, em.const((Miss(0),)))
    em.lines = ["    g = 0", "    try:", *lines, "        pass", "    except Exception:"]
    em.lines += ["        return False", "    return True"]  # a failed guard returns a Miss
    return em.build("check", list(em.lines))


_A, _B = sympy.symbols("a b", integer=True)
_EXPRESSIONS = [
    sympy.Eq(_A, _B),
    sympy.Ge(_A, 2),
    sympy.Lt(_A * 3 - _B, 7),
    sympy.Eq(sympy.Mod(_A, 4), 0),
    sympy.Ne(_A**2, _B + 1),
    sympy.And(sympy.Le(_A, 8), sympy.Gt(_B, _A)),
    sympy.Or(sympy.Eq(_A, 1), sympy.Eq(_B, 2)),
    sympy.Eq(sympy.Max(_A, _B), _B),
    sympy.Le(sympy.Rational(1, 2) * _A, _B),
]


@given(st.integers(-20, 40), st.integers(-20, 40), st.sampled_from(range(len(_EXPRESSIONS))))
def test_shape_guards_evaluate_as_their_expression(a, b, which):
    expr = _EXPRESSIONS[which]
    check = _shape_check(expr, [(_A, "a"), (_B, "b")])
    assert (check((a, b), (), {}) is True) is bool(expr.subs({_A: a, _B: b}))


@given(
    st.lists(st.tuples(st.integers(2, 12), st.integers(2, 12)), min_size=1, max_size=6),
    st.sampled_from([None, True]),
)
def test_any_sequence_of_sizes_gives_eager_results(sizes, dynamic):
    sapwood_tracer.reset()

    def fn(x, n):
        b, s = x.shape
        y = x.reshape(s, b).t() * n
        if b * s > 30:
            y = y - x.numel()
        return y.sum(1), b + n

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward, dynamic=dynamic)
    for b, s in sizes:
        x = torch.randn(b, s)
        out, ref = compiled(x, s), fn(x, s)
        torch.testing.assert_close(out[0], ref[0])
        assert out[1] == ref[1] and type(out[1]) is int


_FOLDING = {
    "max_mod": lambda n, m: max(2, n + n) % 6,
    "min_mod": lambda n, m: min(7, 3 * n) % 3,
    "max_floordiv": lambda n, m: max(2, 4 * n) // 4,
    "max_sub_self": lambda n, m: max(n, m) - max(m, n),
    "mod_of_sum": lambda n, m: (n + m) % 2 + (2 * n) % 4,
    "times_zero": lambda n, m: n * 0 + (m - m) + n % 1,
}


@given(
    st.sampled_from(sorted(_FOLDING)),
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=2, max_size=6),
)
def test_arithmetic_on_symbolic_ints_that_folds_is_never_wrong(name, calls):
    # torch's ShapeEnv folds ``Max(2, 2*n) % 6`` to 0 with no guard (it takes
    # ``Max(2, 2*n) / 6`` for an integer): a folded result must hold for every later call
    expression = _FOLDING[name]

    def program(x, n, m):
        return x + expression(n, m)

    sapwood_tracer.reset()
    compiled = sapwood_tracer.compile(program, backend=lambda gm, ex: gm.forward, dynamic=True)
    x = torch.zeros(2)
    for n, m in calls:
        torch.testing.assert_close(compiled(x, n, m), program(x, n, m))
