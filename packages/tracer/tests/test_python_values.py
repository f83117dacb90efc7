"""Python values: constants, containers, iterators, comprehensions, unpacking, builtins."""

from __future__ import annotations

import functools
import itertools
import math
import operator

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import Unsupported

X = torch.randn(3, 4)


def test_constant_arithmetic_is_folded(check, backend):
    def fn(x):
        a = 3 * 4 + 2**3 - 7 // 2 % 5
        b = 1.5 / 3 + complex(1, 2).real
        c = (True + 1) << 2
        return x * a + b + c, a, b, c, "ab" * 2, None

    check(fn, (X,))
    assert len([n for n in backend.graphs[0].graph.nodes if n.op == "call_function"]) == 3


def test_tuple_list_dict_set_mutation_inside_the_frame(check):
    def fn(x):
        xs = [x]
        xs.append(x + 1)
        xs.extend([x + 2, x + 3])
        xs.insert(0, x - 1)
        last = xs.pop()
        del xs[1]
        xs[0] = xs[0] * 2
        d = {"a": x}
        d["b"] = last
        d.update(c=x + 5)
        d.setdefault("a", None)
        popped = d.pop("c")
        s = {1, 2}
        s.add(3)
        s.discard(1)
        t = (1, 2) + (3,)  # noqa: RUF005  (the construct under test)
        return (
            xs,
            d,
            popped,
            sorted(s),
            t,
            len(xs),
            "b" in d,
            4 in s,
            list(d.keys()),
            list(d.values()),
        )

    check(fn, (X,))


def test_slices_and_range(check):
    def fn(x):
        r = range(2, 10, 3)
        ys = list(range(5))[1:4]
        return x[::2], list(r), ys, r[1], len(r), ys[::-1], slice(1, 3).stop

    check(fn, (X,))


def test_builtin_iterators(check):
    def fn(x):
        out = []
        for i, (a, b) in enumerate(zip([x, x * 2], [1, 2]), start=1):
            out.append(a * b + i)
        rev = list(reversed(out))
        doubled = list(map(lambda t: t * 2, out))
        odd = list(filter(lambda n: n % 2, range(6)))
        it = iter([x, x + 1])
        first = next(it)
        rest = next(it)
        empty = next(iter([]), None)
        return out, rev, doubled, odd, first, rest, empty

    check(fn, (X,))


def test_itertools_basics(check):
    def fn(x):
        chain = list(itertools.chain([1, 2], (3,)))
        prod = list(itertools.product([0, 1], repeat=2))
        pairs = list(itertools.pairwise([1, 2, 4]))
        acc = list(itertools.accumulate([1, 2, 3]))
        isl = list(itertools.islice(range(10), 2, 8, 2))
        comb = list(itertools.combinations([1, 2, 3], 2))
        ys = [x * k for k in itertools.repeat(2, 3)]
        return chain, prod, pairs, acc, isl, comb, ys

    check(fn, (X,))


def test_comprehensions(check):
    def fn(x):
        squares = [i * i for i in range(4) if i != 2]
        tensors = [x * i for i in squares]
        table = {str(i): x + i for i in range(2)}
        members = {i % 3 for i in range(7)}
        nested = [[i * j for j in range(3)] for i in range(2)]
        total = sum(t.sum() for t in tensors)
        return squares, tensors, table, sorted(members), nested, total

    check(fn, (X,))


def test_unpacking_including_starred(check):
    def fn(x):
        a, b, c = 1, x, 3
        first, *middle, last = [x, x + 1, x + 2, x + 3]
        (p, q), r = (x, 2), 3
        merged = [*middle, *[a, c]]
        kw = {**{"k": b}, "z": last}
        return a, b, c, first, middle, last, p, q, r, merged, kw

    check(fn, (X,))


def test_fstrings_and_string_methods(check):
    def fn(x):
        n = x.shape[0]
        name = f"layer_{n:03d}_{x.dtype}!r={'q'!r}"
        parts = ["a", "b", "c"]
        return (
            x * len(name),
            name,
            "-".join(parts),
            name.upper().startswith("LAYER"),
            "%d-%s" % (n, "x"),  # noqa: UP031,
        )

    check(fn, (X,))


def test_builtins(check):
    def fn(x):
        vals = [3, 1, 2]
        return (
            len(vals),
            min(vals),
            max(vals),
            max(1, 5, 2),
            abs(-2),
            sum(vals),
            any(v > 2 for v in vals),
            all(v > 0 for v in vals),
            round(2.567, 2),
            isinstance(x, torch.Tensor),
            isinstance(3, (str, int)),
            issubclass(bool, int),
            int is int,
            callable(len),
            hasattr(x, "shape"),
            getattr(x, "missing", 7),
            int("5"),
            float(2),
            bool([]),
            str(3),
            divmod(7, 2),
            sorted(vals, reverse=True),
            min(vals, key=lambda v: -v),
            x * max(vals),
        )

    check(fn, (X,))


def test_math_and_operator_modules(check):
    def fn(x):
        scale = math.sqrt(x.shape[-1])
        return (
            x / scale,
            math.pi,
            math.ceil(2.1),
            math.log(8, 2),
            operator.add(1, 2),
            operator.truth(0),
            operator.itemgetter,
        )

    check(fn, (X,))


def test_functools_partial(check):
    def scaled(x, scale, shift=0.0):
        return x * scale + shift

    def fn(x):
        f = functools.partial(scaled, scale=3.0)
        g = functools.partial(scaled, x, 2.0)
        return f(x), g(shift=1.0), functools.reduce(operator.add, [1, 2, 3])

    check(fn, (X,))


def test_identity_tests(check):
    def fn(x, flag=None):
        a = [1]
        b = a
        return x if flag is None else -x, a is b, a != [1], x is x, flag is not None

    check(fn, (X,))


def test_id_is_refused():
    def fn(x):
        return x * (id(x) % 2)

    with pytest.raises(Unsupported, match="id"):
        sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward, fullgraph=True)(X)


def test_exceptions_raised_by_constant_folding_are_unsupported():
    def fn(x):
        return x * (1 // 0)

    with pytest.raises(Unsupported, match="ZeroDivisionError"):
        sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)(X)


def test_global_assignments_are_written_back_after_the_graph(backend):
    def fn(x):
        global _SOME_GLOBAL
        _SOME_GLOBAL = x * 2
        return _SOME_GLOBAL + 1  # the trace reads its own pending write

    compiled = sapwood_tracer.compile(fn, fullgraph=True, backend=backend)
    for x in (X, X + 1):
        out = compiled(x)
        assert torch.equal(out, x * 2 + 1)
        assert torch.equal(globals()["_SOME_GLOBAL"], x * 2)
    assert backend.count == 1


def test_mutations_of_input_lists_and_dicts_are_written_back(backend):
    def fn(xs, d):
        xs.append(xs[0] * 2)
        xs[0] = xs[0] + 1
        d["new"] = len(xs)
        del d["old"]
        return xs[0]

    compiled = sapwood_tracer.compile(fn, fullgraph=True, backend=backend)
    xs, d = [X], {"old": 1, "keep": 2}
    eager_xs, eager_d = [X], {"old": 1, "keep": 2}
    out = compiled(xs, d)
    expected = fn(eager_xs, eager_d)
    assert torch.equal(out, expected)
    assert len(xs) == 2 and all(torch.equal(a, b) for a, b in zip(xs, eager_xs))
    assert d == eager_d and list(d) == list(eager_d)
    assert xs[0] is out  # the list holds the very tensor returned, as eagerly


def test_containers_of_tensors_as_inputs(check):
    def fn(xs, d):
        return [t * 2 for t in xs], d["a"] + d["b"], len(xs)

    check(fn, ([X, X + 1], {"a": X, "b": 2.0}))


def test_membership_of_a_tensor_by_equality_is_refused():
    def fn(x, y):
        return x * 2 if x in [y] else x

    with pytest.raises(Unsupported, match="data-dependent"):
        sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)(X, X + 1)


def test_membership_by_identity_is_decided(check):
    def fn(x, y):
        return x * 2 if x in [x, y] else x

    check(fn, (X, X + 1))


def test_set_iteration_order_follows_the_set_history(check):
    def fn(x):
        s = set(range(20))
        for k in range(0, 20, 3):
            s.discard(k)
        s.add(100)
        s |= {7, 50}
        t = {"b", "a"} | {"c"}
        return x * len(s), list(s), sorted(t), list(s - {1, 2}), list(frozenset(s) & {4, 5, 100})

    check(fn, (X,))
