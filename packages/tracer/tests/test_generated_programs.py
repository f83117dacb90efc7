"""Property: generated small Python programs over tensors and ints compile to one graph and
compute what eager Python computes.

Programs are built from statements over tensor variables ``t0..t2`` and int variables
``n0, n1``: expressions, helper-function calls, nested functions with defaults and
closures, ``if`` on ints, ``for`` and ``while`` loops, tuple swaps, f-strings, lists and dicts
of tensors, and comprehensions.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

import sapwood_tracer

TENSORS = ["t0", "t1", "t2"]
INTS = ["n0", "n1"]

small_int = st.integers(min_value=-3, max_value=4)


def int_expr() -> st.SearchStrategy[str]:
    leaf = st.one_of(st.sampled_from(INTS), small_int.map(str))
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(
                lambda p: f"({p[0]} {p[1]} {p[2]})"
            ),
            st.tuples(inner, st.integers(1, 5)).map(lambda p: f"({p[0]} % {p[1]})"),
            st.tuples(inner, inner).map(lambda p: f"max({p[0]}, {p[1]})"),
            st.tuples(inner, inner).map(lambda p: f"min({p[0]}, {p[1]})"),
        ),
        max_leaves=4,
    )


def tensor_expr() -> st.SearchStrategy[str]:
    leaf = st.sampled_from(TENSORS)
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(
                lambda p: f"({p[0]} {p[1]} {p[2]})"
            ),
            st.tuples(inner, st.sampled_from(["+", "*", "-"]), int_expr()).map(
                lambda p: f"({p[0]} {p[1]} {p[2]})"
            ),
            st.tuples(
                st.sampled_from(["torch.sin", "torch.relu", "torch.tanh", "abs", "helper"]), inner
            ).map(lambda p: f"{p[0]}({p[1]})"),
            st.tuples(inner, int_expr()).map(lambda p: f"scale({p[0]}, k={p[1]})"),
            st.tuples(
                inner, st.sampled_from(["sum(0, keepdim=True)", "t().t()", "clone()", "neg()"])
            ).map(lambda p: f"{p[0]}.{p[1]}"),
        ),
        max_leaves=5,
    )


def statement(depth: int = 0) -> st.SearchStrategy[list[str]]:
    assign_t = st.tuples(st.sampled_from(TENSORS), tensor_expr()).map(
        lambda p: [f"{p[0]} = {p[1]}"]
    )
    assign_n = st.tuples(st.sampled_from(INTS), int_expr()).map(lambda p: [f"{p[0]} = {p[1]} % 11"])
    containers = st.tuples(
        st.sampled_from(TENSORS), tensor_expr(), tensor_expr(), st.integers(0, 1)
    ).map(
        lambda p: [
            f"xs = [{p[1]}, {p[2]}]",
            "xs.append(xs[0] * 2)",
            f"d = {{'a': xs[{p[3]}], 'b': len(xs)}}",
            f"{p[0]} = d['a'] * d['b']",
        ]
    )
    comprehension = st.tuples(st.sampled_from(TENSORS), tensor_expr(), st.integers(1, 3)).map(
        lambda p: [f"{p[0]} = sum([{p[1]} * i for i in range({p[2]}) if i != 1]) + {p[0]}"]
    )
    swap = st.tuples(st.sampled_from(TENSORS), st.sampled_from(TENSORS)).map(
        lambda p: [f"{p[0]}, {p[1]} = {p[1]}, {p[0]}"]
    )
    closure = st.tuples(st.sampled_from(TENSORS), tensor_expr(), st.sampled_from(INTS)).map(
        lambda p: [
            "def inner(t, k=2):",
            f"    return t * {p[2]} + k",
            f"{p[0]} = inner({p[1]})",
        ]
    )
    fstring = st.tuples(st.sampled_from(INTS), st.sampled_from(INTS)).map(
        lambda p: [f"{p[0]} = len(f'{{{p[1]}}}-{{{p[0]}:>3}}') % 7"]
    )
    while_loop = st.tuples(st.sampled_from(TENSORS), st.integers(0, 3)).map(
        lambda p: ["i = 0", f"while i < {p[1]}:", f"    {p[0]} = {p[0]} * 0.5 + i", "    i += 1"]
    )
    simple = st.one_of(
        assign_t, assign_n, containers, comprehension, swap, closure, fstring, while_loop
    )
    if depth >= 2:
        return simple

    def indent(lines: list[str]) -> list[str]:
        return ["    " + line for line in lines]

    body = st.lists(statement(depth + 1), min_size=1, max_size=2).map(
        lambda ls: [x for stmt in ls for x in stmt]
    )
    branch = st.tuples(
        int_expr(), st.sampled_from([">", "<", "==", "!="]), small_int, body, body
    ).map(lambda p: [f"if {p[0]} {p[1]} {p[2]}:", *indent(p[3]), "else:", *indent(p[4])])
    loop = st.tuples(st.integers(0, 3), body).map(
        lambda p: [f"for i in range({p[0]}):", *indent(p[1])]
    )
    return st.one_of(simple, simple, branch, loop)


programs = st.lists(statement(), min_size=1, max_size=5).map(
    lambda ls: [x for stmt in ls for x in stmt]
)

PRELUDE = """
def helper(t):
    return t * 0.5 + 1

def scale(t, *, k=1):
    return t * k
"""


def _build(lines: list[str]):
    source = PRELUDE + "def program(t0, t1, t2, n0, n1):\n" + "\n".join("    " + x for x in lines)
    source += "\n    return t0, [t1, (t2, n0)], {'n1': n1}\n"
    namespace = {"torch": torch}
    exec(compile(source, "<generated>", "exec"), namespace)
    return namespace["program"], source


@given(programs, st.integers(-2, 3), st.integers(-2, 3))
def test_generated_programs_match_eager(lines, n0, n1):
    program, source = _build(lines)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    sapwood_tracer.reset()
    compiled = sapwood_tracer.compile(program, backend=backend)
    gen = torch.Generator().manual_seed(0)
    args = [torch.randn(3, 3, generator=gen) for _ in range(3)]
    for _ in range(2):
        got = compiled(*args, n0, n1)
        want = program(*args, n0, n1)
        torch.testing.assert_close(got, want, equal_nan=True, msg=lambda m: f"{m}\n{source}")
    assert len(graphs) == 1, source


# -- with graph breaks ---------------------------------------------------------------------


def breaking_statement(depth: int = 0) -> st.SearchStrategy[list[str]]:
    """The statements above plus constructs that break the graph and side effects on the
    inputs ``log`` (a list), ``state`` (a dict) and ``box`` (an object)."""
    printing = st.tuples(st.sampled_from(TENSORS), st.sampled_from(INTS)).map(
        lambda p: [f"print('v', {p[1]}, round(float({p[0]}.sum()), 3))"]
    )
    item = st.tuples(st.sampled_from(INTS), st.sampled_from(TENSORS)).map(
        lambda p: [f"{p[0]} = int({p[1]}.abs().sum().item()) % 5"]
    )
    explicit = st.just(["sapwood_tracer.graph_break()"])
    effects = st.tuples(st.sampled_from(TENSORS), st.sampled_from(INTS)).map(
        lambda p: [
            f"log.append({p[0]} * 2)",
            f"state['k{{}}'.format({p[1]} % 3)] = {p[1]}",
            f"box.v = {p[0]} + len(log)",
        ]
    )
    plain = statement(2)
    simple = st.one_of(plain, printing, item, explicit, effects)
    if depth >= 2:
        return simple

    def indent(lines: list[str]) -> list[str]:
        return ["    " + line for line in lines]

    body = st.lists(breaking_statement(depth + 1), min_size=1, max_size=2).map(
        lambda ls: [x for stmt in ls for x in stmt]
    )
    data_branch = st.tuples(st.sampled_from(TENSORS), body, body).map(
        lambda p: [f"if {p[0]}.sum() > 0:", *indent(p[1]), "else:", *indent(p[2])]
    )
    loop = st.tuples(st.integers(0, 3), body).map(
        lambda p: [f"for i in range({p[0]}):", *indent(p[1])]
    )
    return st.one_of(simple, simple, data_branch, loop)


breaking_programs = st.lists(breaking_statement(), min_size=1, max_size=5).map(
    lambda ls: [x for stmt in ls for x in stmt]
)


class _Box:
    v: object = None


def _build_breaking(lines: list[str]):
    source = PRELUDE + "def program(t0, t1, t2, n0, n1, log, state, box):\n"
    source += "\n".join("    " + x for x in lines)
    source += "\n    return t0, [t1, (t2, n0)], {'n1': n1}\n"
    namespace = {"torch": torch, "sapwood_tracer": sapwood_tracer}
    exec(compile(source, "<generated>", "exec"), namespace)
    return namespace["program"], source


@given(breaking_programs, st.integers(-2, 3), st.integers(-2, 3))
def test_generated_programs_with_graph_breaks_match_eager(lines, n0, n1):
    import contextlib
    import io

    program, source = _build_breaking(lines)
    sapwood_tracer.reset()
    compiled = sapwood_tracer.compile(program, backend=lambda gm, ex: gm.forward)
    gen = torch.Generator().manual_seed(0)
    args = [torch.randn(3, 3, generator=gen) for _ in range(3)]
    for _ in range(2):
        runs = []
        for fn in (program, compiled):
            log, state, box = [], {"k0": -1}, _Box()
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                result = fn(*args, n0, n1, log, state, box)
            runs.append((result, log, state, box.v, out.getvalue()))
        (want, *want_state), (got, *got_state) = runs
        torch.testing.assert_close(got, want, equal_nan=True, msg=lambda m: f"{m}\n{source}")
        torch.testing.assert_close(got_state[:3], want_state[:3], msg=lambda m: f"{m}\n{source}")
        # every print ran exactly once, in order
        assert got_state[3] == want_state[3], source
