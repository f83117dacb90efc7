"""A loop whose body breaks the graph: the resume function reads the loop's next item ahead,
as data of the call (range, list and tuple iterators, ``enumerate`` and ``zip`` over them),
so the rest of the body, the loop's next step and the body up to the break are one graph.

The bound the issue asks for: a call that goes through ``k`` graph breaks, in loops and
branches, compiles at most ``k + 1`` graphs (no graph for a break of sapwood's own making).
"""

from __future__ import annotations

import io
import itertools
from typing import Any

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import sapwood_tracer

from .conftest import CountingBackend, assert_same

X = torch.arange(4.0) - 1.5


def test_a_range_loop_that_breaks_runs_one_graph_per_iteration():
    def fn(x, n):
        for i in range(n):
            x = x + i
            sapwood_tracer.graph_break()
            x = x * 0.5
        return x.sin()

    backend = CountingBackend()
    compiled = sapwood_tracer.compile(fn, backend=backend)
    assert_same(compiled(X, 12), fn(X, 12))
    # the entry, the body around the break (its index a symbol), the last step
    assert backend.count == 3, backend.count
    report = sapwood_tracer.explain(fn)(X, 12)
    assert all("next item" not in b.reason for b in report.breaks), str(report)


def test_a_loop_over_a_list_of_tensors_with_its_index_shares_one_graph():
    def fn(x, xs):
        for i, t in enumerate(xs):
            x = x + t * i
            print(end="")
            x = x.cos()
        return x

    backend = CountingBackend()
    compiled = sapwood_tracer.compile(fn, backend=backend)
    xs = [torch.randn(4) for _ in range(8)]
    for n in (8, 8, 5):
        assert_same(compiled(X, xs[:n]), fn(X, xs[:n]))
    # two entries (the list's length is guarded), one body graph, one last step
    assert backend.count <= 4, backend.count


def test_items_of_changing_shapes_read_ahead_become_dynamic_as_arguments_do():
    def fn(x, ts):
        for t in ts:
            x = x + t.sum()
            print(end="")
            x = x * t.mean()
        return x

    backend = CountingBackend()
    compiled = sapwood_tracer.compile(fn, backend=backend)
    ts = [torch.randn(k) for k in range(2, 12)]
    assert_same(compiled(X, ts), fn(X, ts))
    # the entry, the body for the first length, again with the length a symbol, the last step
    assert backend.count <= 4, backend.count


def test_zip_over_a_list_and_a_tuple_that_breaks():
    def fn(x, xs, scales):
        for t, s in zip(xs, scales):
            x = x + t * s
            print(end="")
        return x

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    xs = [torch.randn(4) for _ in range(5)]
    for scales in ((1.0, 2.0, 3.0), (0.5,) * 7, ()):
        assert_same(compiled(X, xs, scales), fn(X, xs, scales))


def test_an_uneven_zip_takes_the_item_of_its_first_iterator_at_the_end_as_python_does():
    def fn(x, first, second):
        a = iter(first)
        for p, q in zip(a, second):
            x = x + p * q
            print(end="")
        return x, list(a)

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    for first, second in (([1, 2, 3, 4], [5, 6]), ([1], [2, 3]), ([], [1])):
        got, want = compiled(X, first, second), fn(X, first, second)
        assert_same(got[0], want[0])
        assert got[1] == want[1]  # zip took (and dropped) one more item of ``a``


def test_a_list_the_body_shrinks_after_the_break_is_read_as_python_reads_it():
    def fn(x, xs):
        for t in xs:
            x = x + t
            print(end="")
            if len(xs) > 2:
                xs.pop()
        return x

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    for n in (6, 3, 1):
        got_list, want_list = list(range(n)), list(range(n))
        assert_same(compiled(X, got_list), fn(X, want_list))
        assert got_list == want_list


def test_an_exhausted_list_iterator_stays_exhausted_after_the_list_grows():
    def fn(x, xs):
        it = iter(xs)
        for t in it:
            x = x + t
            print(end="")
        xs.append(7)
        return x, next(it, "done")

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    for n in (3, 1, 0):
        got_list, want_list = list(range(n)), list(range(n))
        got, want = compiled(X, got_list), fn(X, want_list)
        assert_same(got[0], want[0])
        assert got[1] == want[1] == "done"
        assert got_list == want_list


def test_an_explicit_next_inside_the_loop_is_taken_where_python_takes_it():
    def fn(x, n):
        it = iter(range(n))
        for i in it:
            x = x + i
            print(end="")
            x = x + next(it, 100)
        return x

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    for n in (7, 4, 1, 0):
        assert_same(compiled(X, n), fn(X, n))


def test_nested_range_loops_that_break_share_their_graphs_across_trip_counts():
    def fn(x, n, m):
        for i in range(n):
            for j in range(m):
                x = x * 0.9 + i - j
                print(end="")
        return x

    backend = CountingBackend()
    compiled = sapwood_tracer.compile(fn, backend=backend)
    for n, m in ((3, 4), (5, 2), (4, 4)):
        assert_same(compiled(X, n, m), fn(X, n, m))
    # per call an entry (range() specialises on its bound); the inner body, the inner loop's
    # end with the outer loop's next step, and the last step: shared by every call
    assert backend.count <= 3 + 3, backend.count


# -- the bound: k breaks on a call, at most k + 1 graphs ---------------------------------------

_SINK = io.StringIO()


def _program(draw: Any, depth: int, loops: itertools.count) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(
                ["op", "break", "if", "for", "for_list"] if depth < 2 else ["op", "break"]
            )
        )
        if kind == "op":
            a, b = draw(st.integers(1, 3)), draw(st.integers(-2, 2))
            lines.append(f"x = x * {a / 2} + {b}")
        elif kind == "break":
            lines.append("print('|', end='', file=SINK)")
        elif kind == "if":
            flag = draw(st.sampled_from(["a", "b"]))
            lines.append(f"if {flag}:")
            lines += ["    " + line for line in _program(draw, depth + 1, loops)]
            lines.append("else:")
            lines += ["    " + line for line in _program(draw, depth + 1, loops)]
        else:
            var = f"i{next(loops)}"
            over = f"range({draw(st.integers(0, 4))})" if kind == "for" else "ts"
            lines.append(f"for {var} in {over}:")
            lines.append(f"    x = x + {var}")
            lines += ["    " + line for line in _program(draw, depth + 1, loops)]
    return lines


@st.composite
def _programs(draw: Any) -> str:
    body = _program(draw, 0, itertools.count())
    return "def fn(x, a, b, ts):\n" + "".join(f"    {line}\n" for line in body) + "    return x\n"


@settings(max_examples=60, deadline=None)
@given(
    _programs(),
    st.lists(st.tuples(st.booleans(), st.booleans(), st.integers(0, 3)), min_size=1, max_size=3),
)
def test_a_call_through_k_breaks_in_loops_and_branches_compiles_at_most_k_plus_1_graphs(
    source: str, calls: list[tuple[bool, bool, int]]
) -> None:
    namespace: dict[str, Any] = {"SINK": _SINK}
    exec(source, namespace)
    fn = namespace["fn"]
    sapwood_tracer.reset()
    backend = CountingBackend()
    compiled = sapwood_tracer.compile(fn, backend=backend)
    for a, b, n in calls:
        ts = [torch.full((4,), float(v)) for v in range(n)]
        want = fn(X, a, b, ts)
        before_graphs, before_breaks = backend.count, _SINK.tell()
        got = compiled(X, a, b, ts)
        breaks = _SINK.tell() - before_breaks
        assert_same(got, want)
        assert backend.count - before_graphs <= breaks + 1, (source, a, b, n, backend.count)
