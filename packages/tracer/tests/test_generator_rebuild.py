"""A generator made in the trace outlives the graph: live at a graph break or returned, it is
rebuilt as a real generator in the same state (suspended at its yield, with its locals and
the stack below the yield; not started; finished), and a later trace that meets it again
runs it as a generator. Each case is compared with the uncompiled function."""

from __future__ import annotations

import contextlib
import inspect

import pytest
import torch

import sapwood_tracer

X = torch.arange(4.0)


def _eager(gm, example_inputs):
    return gm.forward


def _compile(fn):
    return sapwood_tracer.compile(fn, backend=_eager)


def _breaks(fn, *args):
    """The graph breaks of a compiled run, and the functions that ran eagerly as a whole."""
    report = sapwood_tracer.explain(fn, backend=_eager)(*args)
    return [b.reason for b in report.breaks], report.eager_functions


def _resource(log):
    try:
        log.append("enter")
        yield len(log)
        log.append("after")
    finally:
        log.append("finally")


def test_a_generator_live_at_a_break_resumes_where_it_was():
    def fn(x):
        log = []
        gen = _resource(log)
        first = next(gen)
        sapwood_tracer.graph_break()
        rest = list(gen)
        return x + first, rest, log

    expected = fn(X)
    compiled = _compile(fn)
    got = compiled(X)
    assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:]
    reasons, eager = _breaks(fn, X)
    assert reasons == ["sapwood.graph_break()"] and eager == []


@contextlib.contextmanager
def _managed(log):
    log.append("open")
    try:
        yield "thing"
    finally:
        log.append("closed")


def test_a_contextmanager_generator_open_across_a_break_is_closed_by_the_trace():
    def fn(x):
        log = []
        with _managed(log) as thing:
            sapwood_tracer.graph_break()
            log.append(thing)
        return x * 2, log

    expected = fn(X)
    got = _compile(fn)(X)
    assert torch.equal(got[0], expected[0]) and got[1] == expected[1]
    reasons, eager = _breaks(fn, X)
    # (no "next item of a real generator" break: the rebuilt generator is traced again)
    assert reasons == ["sapwood.graph_break()"] and eager == []


def test_a_returned_suspended_generator_keeps_its_names_state_and_handlers():
    def fn(x, log):
        gen = _resource(log)
        next(gen)
        return x + 1, gen

    eager_log, compiled_log = [], []
    _, expected = fn(X, eager_log)
    _, got = _compile(fn)(X, compiled_log)
    assert (got.__name__, got.__qualname__) == (expected.__name__, expected.__qualname__)
    assert inspect.getgeneratorstate(got) == inspect.getgeneratorstate(expected)
    assert got.gi_frame.f_lineno == expected.gi_frame.f_lineno
    # throw() lands inside the try at the yield: the finally runs, as on the original
    with pytest.raises(KeyError):
        expected.throw(KeyError("k"))
    with pytest.raises(KeyError):
        got.throw(KeyError("k"))
    assert compiled_log == eager_log == ["enter", "finally"]
    assert _breaks(fn, X, []) == ([], [])  # (the generator was rebuilt, not run eagerly)


def test_a_returned_generator_closes_like_the_original():
    def fn(x, log):
        gen = _resource(log)
        next(gen)
        return x, gen

    eager_log, compiled_log = [], []
    _compile(fn)(X, compiled_log)[1].close()
    fn(X, eager_log)[1].close()
    assert compiled_log == eager_log == ["enter", "finally"]


def _numbers(n, log):
    for i in range(n):
        log.append(i)
        yield i * 10
    log.append("end")


def test_a_generator_suspended_in_a_loop_keeps_its_iterator():
    def fn(x, log):
        gen = _numbers(4, log)
        next(gen)
        next(gen)
        return x, gen

    eager_log, compiled_log = [], []
    got = list(_compile(fn)(X, compiled_log)[1])
    assert got == list(fn(X, eager_log)[1])
    assert compiled_log == eager_log
    assert _breaks(fn, X, []) == ([], [])


def test_not_started_and_finished_generators_are_rebuilt_so():
    def fn(x, log):
        fresh = _numbers(2, log)
        done = _numbers(1, log)
        list(done)
        return x, fresh, done

    eager_log, compiled_log = [], []
    _, fresh, done = _compile(fn)(X, compiled_log)
    _, fresh_e, done_e = fn(X, eager_log)
    assert inspect.getgeneratorstate(fresh) == inspect.getgeneratorstate(fresh_e)
    assert inspect.getgeneratorstate(done) == inspect.getgeneratorstate(done_e)
    assert list(done) == list(done_e) == []
    assert list(fresh) == list(fresh_e)
    assert compiled_log == eager_log
    assert _breaks(fn, X, []) == ([], [])


def test_a_rebuilt_generator_advanced_by_a_later_trace_is_put_where_the_trace_left_it():
    def make(x, log):
        gen = _resource(log)
        next(gen)
        return gen

    def advance(gen):
        return next(gen, "exhausted")

    log = []
    gen = _compile(make)(X, log)
    assert _compile(advance)(gen) == "exhausted"
    assert log == ["enter", "after", "finally"]
    assert inspect.getgeneratorstate(gen) == inspect.GEN_CLOSED
    reasons, eager = _breaks(advance, _compile(make)(X, []))
    assert reasons == [] and eager == []


def _counter(log):
    i = 0
    while True:
        log.append(i)
        yield i
        i += 1


def test_a_rebuilt_generator_advanced_eagerly_in_between_is_read_as_it_is_now():
    def make(x, log):
        gen = _counter(log)
        next(gen)
        return gen

    def advance(gen):
        return next(gen) * 100

    log = []
    compiled_advance = _compile(advance)
    gen = _compile(make)(X, log)
    assert compiled_advance(gen) == 100
    assert next(gen) == 2  # eagerly, to the same yield with other locals
    assert compiled_advance(gen) == 300
    assert compiled_advance(gen) == 400
    assert next(gen) == 5
    assert log == [0, 1, 2, 3, 4, 5]
    assert _breaks(advance, gen) == ([], [])


def test_a_generator_over_a_constant_that_is_not_iterable_raises_typeerror_where_made():
    def fn(x):
        a = 1
        try:
            g = (a for d in a)
            next(g)
        except TypeError as exc:
            return x + 1, str(exc)
        return x, None

    expected = fn(X)
    got = _compile(fn)(X)
    assert torch.equal(got[0], expected[0]) and got[1] == expected[1]
    assert _breaks(fn, X) == ([], [])


def test_a_generator_in_a_loop_over_a_range_is_traced_again_with_its_numbers():
    def fn(x):
        g = ([i for i in range(3)] for _ in range(1))
        first = next(g)
        sapwood_tracer.graph_break()
        try:
            next(g)
        except StopIteration:
            return x + 1, first
        return x, first

    expected = fn(X)
    got = _compile(fn)(X)
    assert torch.equal(got[0], expected[0]) and got[1] == expected[1]
    assert _breaks(fn, X) == (["sapwood.graph_break()"], [])


def test_a_loop_generator_advanced_eagerly_in_between_is_not_read_from_its_stale_box():
    def make(x):
        return x, (i * 2 for i in range(4))

    def advance(g):
        return next(g)

    compiled_advance = _compile(advance)
    gen = _compile(make)(X)[1]
    assert next(gen) == 0  # (eagerly: the rebuilt generator was not started)
    assert compiled_advance(gen) == 2
    assert next(gen) == 4  # eagerly, back at the loop's yield by running
    assert compiled_advance(gen) == 6  # (its stack is unknown now: taken eagerly, correct)
    assert next(gen, "end") == "end"

    def make_started(x):
        g = (i * 2 for i in range(4))
        next(g)
        return x, g

    again = _compile(make_started)(X)[1]  # rebuilt at its yield: the box knows its stack
    assert _breaks(advance, again) == ([], [])  # (takes 2)
    assert compiled_advance(again) == 4  # put there by the entry: still known
    assert _breaks(advance, again) == ([], [])  # (takes 6)
    assert list(again) == []


def _renamed():
    yield 1


_renamed.__name__, _renamed.__qualname__ = "other", "Elsewhere.other"


def test_a_rebuilt_generator_has_the_names_of_its_function():
    def fn(x):
        return x, _renamed(), _numbers(1, [])

    got, expected = _compile(fn)(X), fn(X)
    for rebuilt, original in zip(got[1:], expected[1:]):
        assert (rebuilt.__name__, rebuilt.__qualname__) == (
            original.__name__,
            original.__qualname__,
        )
    assert _breaks(fn, X) == ([], [])


def test_a_closure_generator_rebuilt_at_a_break_shares_its_cells_with_the_function():
    def fn(x):
        state = []
        count = 0

        def woohoo():
            nonlocal count
            state.append(1)
            yield 42
            count += 10
            state.append(999)

        with contextlib.contextmanager(woohoo)() as got:
            sapwood_tracer.graph_break()
            state.append(got)
        count += 1
        return x + 1, state, count

    expected = fn(X)
    got = _compile(fn)(X)
    assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:]
    assert _breaks(fn, X) == (["sapwood.graph_break()"], [])
