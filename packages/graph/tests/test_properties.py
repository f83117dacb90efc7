"""Property tests: random programs built through the API behave like the same ops run eagerly.

* random op sequences over tensors of random shapes, dtypes and dynamic dims: whenever the
  recorded guards accept a set of inputs, the compiled graph gives what eager PyTorch gives;
* random nesting of subtracers using outer values: a child's lifted inputs are exactly the
  outer values it (or a descendant) used, each once, and the nested program is still right;
* DCE removes exactly the dead pure nodes;
* graph-input dedup merges two sources only when they hold the same tensor object.
"""

from __future__ import annotations

import operator

import torch
from hypothesis import given
from hypothesis import strategies as st

from sapwood_graph import GuardKind, LocalSource, OutputGraph

# ----------------------------------------------------------------------------- building blocks

# name, arity, how to record it (root tracer or any tracer), how to run it eagerly.
UNARY = [
    ("neg", lambda t, a: t.call_function(torch.neg, (a,)), torch.neg),
    ("abs", lambda t, a: t.call_method("abs", (a,)), torch.abs),
    ("sin", lambda t, a: t.call_function(torch.sin, (a,)), torch.sin),
    ("tanh", lambda t, a: t.call_method("tanh", (a,)), torch.tanh),
    ("relu", lambda t, a: t.call_function(torch.relu, (a,)), torch.relu),
    ("scale", lambda t, a: t.call_function(operator.mul, (a, 2)), lambda a: a * 2),
    ("shift", lambda t, a: t.call_function(operator.add, (a, 1.5)), lambda a: a + 1.5),
    (
        "rowsum",
        lambda t, a: t.call_method("sum", (a,), {"dim": -1, "keepdim": True}),
        lambda a: a.sum(dim=-1, keepdim=True),
    ),
]
BINARY = [
    ("add", lambda t, a, b: t.call_function(torch.add, (a, b)), torch.add),
    ("mul", lambda t, a, b: t.call_function(operator.mul, (a, b)), operator.mul),
    ("sub", lambda t, a, b: t.call_method("sub", (a, b)), lambda a, b: a.sub(b)),
    ("maximum", lambda t, a, b: t.call_function(torch.maximum, (a, b)), torch.maximum),
]
DTYPES = [torch.float32, torch.float64, torch.int64]


def run_subgraph(subgraph, *args):
    return subgraph(*args)


def eager_backend(gm, example_inputs):
    return gm.forward


def make_tensor(shape, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=dtype)
    return torch.randint(-5, 6, shape, generator=gen, dtype=dtype)


def guards_accept(guards, f_locals):
    """A slow reference check of the guards the library recorded."""
    for guard in guards:
        if guard.kind is GuardKind.TENSOR_MATCH:
            if not guard.expected.matches(guard.source.resolve(f_locals, {})):
                return False
        elif guard.kind is GuardKind.SHAPE:
            values = {sym: src.resolve(f_locals, {}) for sym, src in guard.symbols}
            if not bool(guard.expected.subs(values)):
                return False
    return True


# ----------------------------------------------------------------------------- strategies


@st.composite
def programs(draw):
    ndim = draw(st.integers(1, 3))
    base = draw(st.lists(st.integers(2, 5), min_size=ndim, max_size=ndim))
    n_inputs = draw(st.integers(1, 3))
    inputs = []
    for _ in range(n_inputs):
        # Broadcast-compatible variants of the base shape: some dims squeezed to 1.
        shape = [1 if draw(st.booleans()) and draw(st.booleans()) else s for s in base]
        dynamic = [d for d in range(ndim) if shape[d] > 1 and draw(st.booleans())]
        inputs.append((tuple(shape), draw(st.sampled_from(DTYPES)), dynamic))
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):
            steps.append(("u", draw(st.integers(0, len(UNARY) - 1)), draw(st.integers(0, 99))))
        else:
            steps.append(
                (
                    "b",
                    draw(st.integers(0, len(BINARY) - 1)),
                    draw(st.integers(0, 99)),
                    draw(st.integers(0, 99)),
                )
            )
    n_outputs = draw(st.integers(1, 3))
    outputs = [draw(st.integers(0, 99)) for _ in range(n_outputs)]
    seed = draw(st.integers(0, 2**16))
    grow = draw(st.integers(1, 3))
    return inputs, steps, outputs, seed, grow


def interpret(steps, outputs, pool, unary, binary):
    pool = list(pool)
    for step in steps:
        if step[0] == "u":
            pool.append(unary(step[1], pool[step[2] % len(pool)]))
        else:
            pool.append(binary(step[1], pool[step[2] % len(pool)], pool[step[3] % len(pool)]))
    return [pool[i % len(pool)] for i in outputs]


# ----------------------------------------------------------------------------- properties


@given(programs())
def test_random_op_sequences_compile_to_what_eager_computes(program):
    inputs, steps, outputs, seed, grow = program
    tensors = [make_tensor(shape, dtype, seed + i) for i, (shape, dtype, _) in enumerate(inputs)]
    og = OutputGraph()
    proxies = [
        og.create_graph_input(LocalSource(f"x{i}"), t, dynamic_dims=spec[2])
        for i, (t, spec) in enumerate(zip(tensors, inputs))
    ]
    traced = interpret(
        steps,
        outputs,
        proxies,
        lambda k, a: UNARY[k][1](og.root, a),
        lambda k, a, b: BINARY[k][1](og.root, a, b),
    )
    compiled = og.compile(tuple(traced), eager_backend)

    def check(values):
        f_locals = {f"x{i}": v for i, v in enumerate(values)}
        expected = interpret(
            steps, outputs, values, lambda k, a: UNARY[k][2](a), lambda k, a, b: BINARY[k][2](a, b)
        )
        got = compiled(*compiled.resolve_inputs(f_locals))
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e, equal_nan=True)

    check(tensors)
    # Fresh data, and dynamic dims grown consistently: whenever the guards accept, still right.
    grown = {}
    for shape, _, dynamic in inputs:
        for d in dynamic:
            grown.setdefault(shape[d], shape[d] + grow)
    fresh = []
    for i, (shape, dtype, dynamic) in enumerate(inputs):
        new_shape = tuple(grown[s] if d in dynamic else s for d, s in enumerate(shape))
        fresh.append(make_tensor(new_shape, dtype, seed + 100 + i))
    if guards_accept(compiled.guards, {f"x{i}": v for i, v in enumerate(fresh)}):
        check(fresh)
    check([make_tensor(t.shape, t.dtype, seed + 200 + i) for i, t in enumerate(tensors)])


@st.composite
def nested_programs(draw, depth=0):
    """A list of steps; a step is an op over visible values or a nested child program."""
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["u", "b", "sub"] if depth < 3 else ["u", "b"]))
        if kind == "sub":
            steps.append(("sub", draw(nested_programs(depth + 1))))
        elif kind == "u":
            steps.append(("u", draw(st.integers(0, len(UNARY) - 1)), draw(st.integers(0, 99))))
        else:
            steps.append(
                (
                    "b",
                    draw(st.integers(0, len(BINARY) - 1)),
                    draw(st.integers(0, 99)),
                    draw(st.integers(0, 99)),
                )
            )
    return steps


def _origin(node):
    while "lifted_from" in node.meta:
        node = node.meta["lifted_from"]
    return node


@given(nested_programs(), st.integers(1, 3), st.integers(0, 2**16))
def test_nested_subtracers_lift_exactly_the_outer_values_used(steps, n_inputs, seed):
    tensors = [make_tensor((3, 2), torch.float32, seed + i) for i in range(n_inputs)]
    og = OutputGraph()
    pool = [og.create_graph_input(LocalSource(f"x{i}"), t) for i, t in enumerate(tensors)]
    checked = []

    def build(tracer, steps, visible, level):
        """Record ``steps`` into ``tracer``; return (values made, outer values used)."""
        visible = list(visible)  # (proxy, level)
        used_outer = {}
        for step in steps:
            if step[0] == "sub":
                with tracer.subtracer() as child:
                    made, child_used = build(child, step[1], visible, level + 1)
                    child.output((made[-1][0],))
                expected = {p.node: None for p, lvl in child_used.values() if lvl <= level}
                got = [_origin(p.node) for p in child.lifted_inputs]
                assert len(got) == len(set(got)), "a value was lifted twice"
                assert set(got) == set(expected), "lifted inputs differ from the values used"
                checked.append(len(got))
                for key, (p, lvl) in child_used.items():
                    if lvl < level:
                        used_outer[key] = (p, lvl)
                name = tracer.install_subgraph("body", child.graph_module())
                out = tracer.call_function(
                    run_subgraph, (tracer.get_attr(name), *child.lifted_inputs)
                )
                visible.append((tracer.call_function(operator.getitem, (out, 0)), level))
                continue
            args = [visible[i % len(visible)] for i in step[2:]]
            for p, lvl in args:
                if lvl < level:
                    used_outer[_origin(p.node)] = (p, lvl)
            record = UNARY[step[1]][1] if step[0] == "u" else BINARY[step[1]][1]
            visible.append((record(tracer, *[p for p, _ in args]), level))
        return visible[len(visible) - len(steps) :] or visible, used_outer

    made, _ = build(og.root, steps, [(p, 0) for p in pool], 0)
    compiled = og.compile(made[-1][0], eager_backend)

    def run_eager(steps, visible):
        visible = list(visible)
        for step in steps:
            if step[0] == "sub":
                visible.append(run_eager(step[1], visible))
                continue
            args = [visible[i % len(visible)] for i in step[2:]]
            fn = UNARY[step[1]][2] if step[0] == "u" else BINARY[step[1]][2]
            visible.append(fn(*args))
        return visible[-1]

    expected = run_eager(steps, tensors)
    got = compiled(*compiled.resolve_inputs({f"x{i}": t for i, t in enumerate(tensors)}))
    torch.testing.assert_close(got, expected, equal_nan=True)


INPLACE = [
    ("relu_", lambda t, a: t.call_method("relu_", (a,)), lambda a: a.relu_()),
    ("mul_", lambda t, a: t.call_method("mul_", (a, 0.5)), lambda a: a.mul_(0.5)),
    ("add_", lambda t, a: t.call_function(torch.Tensor.add_, (a, 1.0)), lambda a: a.add_(1.0)),
]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["u", "b", "i"]),
            st.integers(0, 99),
            st.integers(0, 99),
            st.integers(0, 99),
        ),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.integers(0, 99), max_size=3),
    st.integers(0, 2**16),
)
def test_dce_removes_exactly_the_dead_pure_nodes(steps, outputs, seed):
    tensors = [make_tensor((4,), torch.float32, seed + i) for i in range(2)]
    og = OutputGraph()
    pool = [og.create_graph_input(LocalSource(f"x{i}"), t) for i, t in enumerate(tensors)]
    impure = set()
    for kind, k, i, j in steps:
        a, b = pool[i % len(pool)], pool[j % len(pool)]
        if kind == "u":
            pool.append(UNARY[k % len(UNARY)][1](og.root, a))
        elif kind == "b":
            pool.append(BINARY[k % len(BINARY)][1](og.root, a, b))
        else:
            p = INPLACE[k % len(INPLACE)][1](og.root, a)
            impure.add(p.node.name)
            pool.append(p)
    out_nodes = [pool[i % len(pool)].node for i in outputs]
    # Live = reachable backwards from the outputs and from every side-effecting node.
    live, stack = set(), [*out_nodes, *(n for n in og.root.graph.nodes if n.name in impure)]
    while stack:
        node = stack.pop()
        if node.name in live:
            continue
        live.add(node.name)
        stack.extend(n for n in node.all_input_nodes)
    recorded = {n.name for n in og.root.graph.nodes if n.op != "placeholder"}
    compiled = og.compile(tuple(pool[i % len(pool)] for i in outputs), eager_backend)
    kept = {
        n.name for n in compiled.graph_module.graph.nodes if n.op not in ("placeholder", "output")
    }
    assert kept == recorded & live
    assert impure <= kept

    # And the pruned graph still does what the ops do, mutations of inputs included.
    eager_inputs = [t.clone() for t in tensors]
    compiled_inputs = [t.clone() for t in tensors]
    values = list(eager_inputs)
    for kind, k, i, j in steps:
        a, b = values[i % len(values)], values[j % len(values)]
        if kind == "u":
            values.append(UNARY[k % len(UNARY)][2](a))
        elif kind == "b":
            values.append(BINARY[k % len(BINARY)][2](a, b))
        else:
            values.append(INPLACE[k % len(INPLACE)][2](a))
    expected = [values[i % len(values)] for i in outputs]
    got = compiled(*compiled.resolve_inputs({f"x{i}": t for i, t in enumerate(compiled_inputs)}))
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    for g, e in zip(compiled_inputs, eager_inputs):
        torch.testing.assert_close(g, e)


@given(st.lists(st.integers(0, 5), min_size=1, max_size=8), st.integers(0, 2**16))
def test_input_dedup_never_merges_different_sources(assignment, seed):
    # Six candidate objects; 3..5 are equal-valued copies of 0..2, never the same objects.
    originals = [make_tensor((3,), torch.float32, seed + i) for i in range(3)]
    objects = originals + [t.clone() for t in originals]
    og = OutputGraph()
    sources = [LocalSource(f"a{i}") for i in range(len(assignment))]
    proxies = [og.create_graph_input(s, objects[k]) for s, k in zip(sources, assignment)]
    total = proxies[0]
    for p in proxies[1:]:
        total = total + p
    compiled = og.compile(total, eager_backend)
    kept = set(compiled.input_sources)
    aliases = {g.source: g.expected for g in compiled.guards.of_kind(GuardKind.ALIAS_MATCH)}
    first_source_of = {}
    for source, k in zip(sources, assignment):
        first_source_of.setdefault(k, source)
        if first_source_of[k] == source:
            assert source in kept
        else:
            assert source not in kept and aliases[source] == first_source_of[k]
    assert len(kept) == len(set(assignment))
    f_locals = {str(s.local_name): objects[k] for s, k in zip(sources, assignment)}
    expected = sum(objects[k] for k in assignment)
    torch.testing.assert_close(compiled(*compiled.resolve_inputs(f_locals)), expected)
