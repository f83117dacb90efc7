"""Exceptions raised and caught inside traced code.

A raise the trace decides (``raise``, a missing dict key, ``next()`` of an exhausted iterator,
a failed ``getattr``) goes to the handler CPython would run, symbolically, so the whole
function stays one graph; an exception no traced handler catches is a graph break that raises
for real. Every case is compared with eager, results and exceptions alike.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

import sapwood_tracer

X = torch.arange(6.0).reshape(2, 3)


def _one_graph(fn, *args, backend, same):
    compiled = sapwood_tracer.compile(fn, backend=backend)
    for _ in range(2):
        same(compiled(*args), fn(*args))
    report = sapwood_tracer.explain(fn)(*args)
    assert report.break_count == 0 and report.eager_functions == [], str(report)
    assert report.graph_count == 1, str(report)


class _CodedError(ValueError):
    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def test_a_missing_dict_key_caught_as_key_error(backend, same):
    def fn(x, d):
        try:
            scale = d["scale"]
        except KeyError as e:
            scale = len(e.args)
        return x * scale

    _one_graph(fn, X, {"other": 1}, backend=backend, same=same)


def test_raise_and_catch_a_user_exception_with_attributes(backend, same):
    def fn(x):
        try:
            raise _CodedError("bad", 3)
        except ValueError as e:
            return x * e.code, e.args, str(e), isinstance(e, _CodedError)

    _one_graph(fn, X, backend=backend, same=same)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_matching_by_class_hierarchy_and_tuples(which, backend, same):
    def fn(x):
        try:
            if which == 0:
                raise KeyError("k")
            if which == 1:
                raise IndexError("i")
            raise ZeroDivisionError("z")
        except (IndexError, ZeroDivisionError):
            return x + 1
        except LookupError:  # KeyError's base
            return x + 2

    _one_graph(fn, X, backend=backend, same=same)


def test_else_and_finally_run_as_in_python(backend, same):
    def fn(x, fail):
        trail = []
        try:
            if fail:
                raise RuntimeError("r")
            trail.append("body")
        except RuntimeError:
            trail.append("except")
        else:
            trail.append("else")
        finally:
            trail.append("finally")
        return x * len(trail), trail

    _one_graph(fn, X, True, backend=backend, same=same)
    _one_graph(fn, X, False, backend=backend, same=same)


def test_raise_from_and_re_raise(backend, same):
    def fn(x):
        try:
            try:
                raise KeyError("inner")
            except KeyError as e:
                raise ValueError("outer") from e
        except ValueError as e:
            cause = e.__cause__
            return x * 2, type(cause).__name__, cause.args, e.__suppress_context__

    _one_graph(fn, X, backend=backend, same=same)

    def bare(x):
        try:
            try:
                raise KeyError("again")
            except KeyError:
                raise
        except KeyError as e:
            return x + len(e.args)

    _one_graph(bare, X, backend=backend, same=same)


def test_context_is_the_exception_being_handled(backend, same):
    def fn(x):
        try:
            try:
                raise KeyError("first")
            except KeyError:
                raise ValueError("second")  # noqa: B904 - the implicit chaining is the point
        except ValueError as e:
            return x * 3, type(e.__context__).__name__

    _one_graph(fn, X, backend=backend, same=same)


def test_with_blocks_see_the_exception_and_restore_grad_mode(backend, same):
    class Suppress:
        def __init__(self):
            self.seen = None

        def __enter__(self):
            return self

        def __exit__(self, cls, exc, tb):
            self.seen = cls
            return cls is KeyError

    def fn(x):
        s = Suppress()
        with s:
            raise KeyError("swallowed")
        try:
            with torch.no_grad():
                raise IndexError("passes through")
        except IndexError:
            pass
        return x * 2, s.seen is KeyError, torch.is_grad_enabled()

    _one_graph(fn, X, backend=backend, same=same)


def test_hasattr_and_getattr_with_a_default_over_a_raising_getattr(backend, same):
    class Config:
        def __init__(self):
            self.known = 2

        def __getattr__(self, name):
            if name.startswith("alias_"):
                return self.known
            raise AttributeError(name)

    def fn(x):
        c = Config()
        return x * c.alias_k, hasattr(c, "nope"), getattr(c, "nope", 7), hasattr(c, "alias_y")

    _one_graph(fn, X, backend=backend, same=same)


def test_next_of_an_exhausted_iterator_raises_stop_iteration(backend, same):
    def fn(x, xs):
        it = iter(xs)
        total = x
        while True:
            try:
                total = total + next(it)
            except StopIteration:
                break
        return total, next(iter([]), "default")

    _one_graph(fn, X, [1, 2, 3], backend=backend, same=same)


def test_errors_python_raises_for_builtins_are_catchable(backend, same):
    def fn(x):
        caught = []
        for attempt in (lambda: int("x"), lambda: 1 // 0, lambda: [1][5], lambda: (1, 2)[9]):
            try:
                attempt()
            except (ValueError, ZeroDivisionError, IndexError) as e:
                caught.append(type(e).__name__)
        try:
            a, b = [1, 2, 3]  # noqa: F841 - the unpacking raises
        except ValueError as e:
            caught.append(str(e))
        return x * len(caught), caught

    _one_graph(fn, X, backend=backend, same=same)


def test_an_uncaught_exception_raises_for_real_with_its_message(backend):
    def fn(x, d):
        y = x * 2
        return y + d["missing"]

    compiled = sapwood_tracer.compile(fn, backend=backend)
    with pytest.raises(KeyError, match="missing"):
        compiled(X, {})


def test_fullgraph_names_an_uncaught_exception(backend):
    def fn(x):
        raise ValueError("no")

    with pytest.raises(sapwood_tracer.Unsupported, match="ValueError"):
        sapwood_tracer.compile(fn, backend=backend, fullgraph=True)(X)


def test_a_graph_break_inside_a_handler_raises_at_the_raise_and_handles_eagerly(backend, same):
    def fn(x, d):
        y = x + 1
        try:
            y = y * d["k"]
        except KeyError:
            print("missing k")  # a break while handling: the handler runs eagerly
            y = y - 1
        return y

    buffer = []
    with contextlib.redirect_stdout(_Collect(buffer)):
        compiled = sapwood_tracer.compile(fn, backend=backend)
        same(compiled(X, {}), fn(X, {}))
    assert buffer.count("missing k") == 2  # once compiled, once eagerly: each ran once
    report = sapwood_tracer.explain(fn)(X, {})
    assert report.eager_functions == []


class _Collect:
    def __init__(self, lines):
        self.lines = lines

    def write(self, text):
        if text.strip():
            self.lines.append(text.strip())

    def flush(self):
        pass


def test_a_user_iterator_ends_with_its_stop_iteration(backend, same):
    class Countdown:
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return self

        def __next__(self):
            if self.n == 0:
                raise StopIteration
            self.n -= 1
            return self.n

    def fn(x):
        return [x * k for k in Countdown(3)], sum(Countdown(4))

    _one_graph(fn, X, backend=backend, same=same)


# (made from source: pytest rewrites the assert statements of test modules)
_ASSERTING = """
def _asserting(x, v):
    try:
        assert v, "msg"
    except AssertionError as exc:
        return x + 1, exc.args, type(exc).__name__
    try:
        assert v > 5
    except AssertionError as exc:
        return x + 2, exc.args, None
    return x, None, None
"""
_namespace: dict = {}
exec(compile(_ASSERTING, "<asserting>", "exec"), _namespace)
_asserting = _namespace["_asserting"]


@pytest.mark.parametrize("v", [0, 3, 9])
def test_a_failing_assert_statement_raises_assertionerror_in_the_graph(v):
    x = torch.ones(1)
    got = sapwood_tracer.compile(_asserting, backend=lambda gm, ex: gm.forward)(x, v)
    want = _asserting(x, v)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    report = sapwood_tracer.explain(_asserting)(x, v)
    assert not report.breaks, str(report)


_SHADOWING = """
def _shadowing(x):
    global AssertionError
    AssertionError = TypeError
    try:
        assert False, "hello"
    except BaseException as exc:
        del AssertionError
        return x + 1, str(exc), type(exc).__name__, AssertionError.__name__
"""
exec(compile(_SHADOWING, "<shadowing>", "exec"), _namespace)
_shadowing = _namespace["_shadowing"]


def test_a_global_assigned_then_deleted_in_the_trace_lets_the_builtin_show():
    x = torch.ones(1)
    got = sapwood_tracer.compile(_shadowing, backend=lambda gm, ex: gm.forward)(x)
    assert "AssertionError" not in _namespace
    want = _shadowing(x)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:] == (
        "hello",
        "AssertionError",
        "AssertionError",
    )
    assert "AssertionError" not in _namespace
