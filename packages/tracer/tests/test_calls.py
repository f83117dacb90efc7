"""Calls, all inlined: closures, defaults, keywords, *args/**kwargs, methods, classes."""

from __future__ import annotations

import collections
import dataclasses
import functools
import typing

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import Unsupported

X = torch.randn(3, 4)


def _scale(x, factor=2.0, *, shift=0.0):
    return x * factor + shift


def _collect(*args, **kwargs):
    return sum(args), sorted(kwargs.items())


def test_user_function_defaults_and_keywords(check):
    def fn(x):
        return _scale(x), _scale(x, 3.0), _scale(x, shift=1.0), _scale(factor=0.5, x=x)

    check(fn, (X,))


def test_varargs_and_varkw_both_ways(check):
    def fn(x):
        args = (x, x + 1)
        kw = {"b": 2, "a": 1}
        total, items = _collect(*args, x + 2, **kw, c=3)
        return total, items, _collect()

    check(fn, (X,))


def test_closures_and_nonlocal(check):
    def fn(x):
        count = 0

        def bump(t):
            nonlocal count
            count += 1
            return t + count

        y = bump(x)
        y = bump(y)
        return y, count

    check(fn, (X,))


def test_closure_over_outer_function_cells(check):
    factor = 3.0

    def fn(x):
        return x * factor

    check(fn, (X,))


def test_nested_function_returning_lambda(check):
    def make(k):
        return lambda t: t * k

    def fn(x):
        double = make(2)
        return double(x), make(3)(x)

    check(fn, (X,))


def test_recursion_is_inlined(check):
    def power(t, n):
        return t if n == 1 else t * power(t, n - 1)

    def fn(x):
        return power(x, 4)

    check(fn, (X,))


class _Base:
    scale = 2.0

    def __init__(self, bias):
        self.bias = bias

    def apply(self, x):
        return x * self.scale + self.bias

    @staticmethod
    def twice(x):
        return x * 2

    @classmethod
    def make(cls, bias):
        return cls(bias)

    @property
    def negative_bias(self):
        return -self.bias


class _Child(_Base):
    scale = 3.0

    def apply(self, x):
        return super().apply(x) + 1


def test_methods_bound_static_class_and_properties(check):
    obj = _Child(0.5)

    def fn(x, o):
        return o.apply(x), o.twice(x), _Base.twice(x), o.negative_bias, _Base.apply(o, x)

    check(fn, (X, obj))


def test_constructing_plain_instances_with_super_and_classmethod(check):
    def fn(x):
        a = _Child.make(1.0)
        b = _Base(2.0)
        return a.apply(x), b.apply(x), a.bias

    check(fn, (X,))


@dataclasses.dataclass
class _Pair:
    first: torch.Tensor
    second: float = 1.0
    tags: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        self.total = self.second * 2


@dataclasses.dataclass(frozen=True)
class _Frozen:
    a: torch.Tensor
    b: int


_Point = collections.namedtuple("_Point", ["x", "y"])


class _Typed(typing.NamedTuple):
    value: torch.Tensor
    count: int = 0


def test_dataclasses_and_namedtuples_constructed_and_returned(check):
    def fn(x):
        p = _Pair(x, 3.0)
        f = _Frozen(x + 1, 2)
        pt = _Point(x, y=2)
        t = _Typed(x * 2)
        return p, f, pt, t, pt.x + pt[1], t.count, p.total, pt._replace(y=5) if False else pt

    check(fn, (X,))


def test_dataclass_inputs_are_read(check):
    def fn(p):
        return p.first * p.second

    check(fn, (_Pair(X, 2.0),))


def test_attribute_writes_on_existing_objects_are_replayed():
    class State:
        pass

    state = State()
    state.calls = 0
    state.last = None

    def fn(x, s):
        s.calls = s.calls + 1
        s.last = x * 2
        return s.last + s.calls

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    out = compiled(X, state)
    assert state.calls == 1
    torch.testing.assert_close(state.last, X * 2)
    torch.testing.assert_close(out, X * 2 + 1)
    out = compiled(X, state)  # calls is guarded: 1 != 0 recompiles, result stays right
    assert state.calls == 2
    torch.testing.assert_close(out, X * 2 + 2)


def test_methods_of_containers_unbound(check):
    def fn(x):
        d = {"a": 1}
        return dict.get(d, "a"), list.__len__([1, 2]) if False else 2, str.upper("a"), x

    check(fn, (X,))


def test_generators_are_consumed(check):
    def gen(x, n):
        for i in range(n):
            yield x * i

    def fn(x):
        return list(gen(x, 3)), tuple(t + 1 for t in gen(x, 2))

    check(fn, (X,))


def test_yield_from_in_generators(check):
    def inner(n):
        yield from range(n)
        yield -1

    def fn(x):
        return [x * i for i in inner(3)]

    check(fn, (X,))


def test_calling_an_unknown_builtin_is_refused():
    import os

    def fn(x):
        return x * len(os.getcwd())

    with pytest.raises(Unsupported, match="getcwd"):
        sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)(X)


@functools.lru_cache(maxsize=8)
def _memoised(n):
    return n * 2


class _Scale:
    def __init__(self, k):
        self.k = k

    def __call__(self, t):
        return t * self.k


def test_memoised_functions_and_callable_objects(check):
    def fn(x, s):
        return x * _memoised(3), s(x), _Scale(2)(x)

    check(fn, (X, _Scale(3)))


def test_logging_calls_run_once_while_tracing_under_fullgraph(backend, caplog):
    # (without fullgraph, logging breaks the graph and runs on every call: test_graph_breaks)
    import logging

    log = logging.getLogger("sapwood.test")

    def fn(x):
        log.warning("shape %s", tuple(x.shape))
        return x * 2

    compiled = sapwood_tracer.compile(fn, fullgraph=True, backend=backend)
    with caplog.at_level(logging.WARNING, logger="sapwood.test"):
        torch.testing.assert_close(compiled(X), X * 2)
        torch.testing.assert_close(compiled(X), X * 2)
    assert caplog.text.count("shape (3, 4)") == 1
    assert backend.count == 1


def test_generators_interleave_with_their_consumer(check):
    def fn(x):
        seen = []

        def gen():
            for i in range(3):
                seen.append(i)
                yield i

        sizes = [x * len(seen) for _ in gen()]
        chunks = []

        def grow():
            acc = []
            for i in range(3):
                acc.append(i)
                yield acc

        for a in grow():
            chunks.append(len(a))
        first = next(iter(gen()))
        return sizes, chunks, first, len(seen)

    check(fn, (X,))


def test_generator_with_its_own_state(check):
    def gen(x):
        acc = []
        for i in range(3):
            acc.append(i)
            yield x * len(acc)

    def fn(x):
        return list(gen(x))

    check(fn, (X,))
