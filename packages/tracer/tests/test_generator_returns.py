"""A generator's ``return value`` reaches its consumer as Python hands it on: the
StopIteration that ends it carries the value (the first time only), and ``yield from``
evaluates to it. Each case is compared with the uncompiled function, with no graph break."""

from __future__ import annotations

import sapwood_tracer


def _eager(gm, example_inputs):
    return gm.forward


def _same_without_breaks(fn, *args):
    assert sapwood_tracer.compile(fn, backend=_eager)(*args) == fn(*args)
    report = sapwood_tracer.explain(fn, backend=_eager)(*args)
    assert (report.breaks, report.eager_functions) == ([], [])


def _gives(value):
    yield 1
    return value


def _returns_nothing():
    yield 1


def test_the_stopiteration_that_ends_a_generator_carries_its_return_value():
    def fn(x):
        it = _gives(x + 4)
        next(it)
        try:
            next(it)
        except StopIteration as stop:
            return stop.value, stop.args

    _same_without_breaks(fn, 1)


def test_only_the_first_stopiteration_carries_the_value():
    def fn(x):
        it = _gives(x)
        assert list(it) == [1]  # (the loop's StopIteration took the value)
        try:
            next(it)
        except StopIteration as stop:
            first = stop.args
        it = _gives(x)
        next(it)
        try:
            it.__next__()
        except StopIteration as stop:
            second = stop.args
        try:
            it.__next__()
        except StopIteration as stop:
            return first, second, stop.args

    _same_without_breaks(fn, 3)


def test_a_generator_that_returns_none_raises_stopiteration_without_args():
    def fn(x):
        it = _returns_nothing()
        next(it)
        try:
            next(it)
        except StopIteration as stop:
            return x, stop.args, stop.value

    _same_without_breaks(fn, 1)


def test_yield_from_evaluates_to_the_return_value_of_the_generator():
    def outer(x):
        got = yield from _gives((x, "done"))
        yield got

    def fn(x):
        return list(outer(x)), next(_gives(x), "default")

    _same_without_breaks(fn, 2)
