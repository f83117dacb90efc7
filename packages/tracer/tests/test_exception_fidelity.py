"""Exceptions as CPython's own tests see them (test_exceptions, test_raise, test_generators):
sapwood's own errors never show in ``sys.exc_info()``, builtin exception classes keep the
fields their C ``__init__`` fills, and code reading frames or tracebacks runs in the frames
Python would give it. Each program is compiled and compared with eager."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import torch

import sapwood_tracer
from sapwood_tracer.api import events


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


@sapwood_tracer.disable
def _opaque(value: Any) -> Any:
    return value


def _gen():
    yield 1
    yield 2


def test_a_fallback_does_not_leave_sapwood_errors_in_exc_info():
    # a live generator across a break makes the frame run eagerly; the eager run must not
    # happen inside sapwood's own exception handler
    def fn():
        it = _gen()
        first = next(it)
        return first, sys.exc_info()

    assert _compiled(fn)() == fn() == (1, (None, None, None))


def test_an_error_raised_by_the_eager_fallback_has_no_sapwood_context():
    def fn():
        it = _gen()
        next(it)
        raise KeyError("k")

    with pytest.raises(KeyError) as info:
        _compiled(fn)()
    assert info.value.__context__ is None


@pytest.mark.parametrize("end", [2, 5])
def test_str_of_a_unicode_error_follows_its_changed_fields(end):
    def fn():
        u = UnicodeEncodeError("baz", "xxxxx", 1, 5, "foo")
        before = str(u)
        u.end = end
        u.reason = 0x345
        return before, str(u), u.start, u.end

    assert _compiled(fn)() == fn()


@pytest.mark.parametrize("args", [("bad.py", 1, 2, "abcdefg", 1, 100), ("bad.py", 1, 2, "abc")])
def test_syntax_error_fields_in_the_trace_and_across_a_break(args):
    def fn():
        e = SyntaxError("bad bad", args)
        inside = (e.filename, e.lineno, e.offset, e.text, e.msg)
        e = _opaque(e)  # rebuilt for the eager call: its fields must survive
        return inside, (e.filename, e.lineno, e.offset, e.text, e.end_lineno, e.end_offset)

    assert _compiled(fn)() == fn()


def test_a_builtin_exception_constructor_refusing_its_arguments_raises_as_in_python():
    def fn():
        try:
            UnicodeEncodeError("x")
        except TypeError as error:
            return error.args
        return None

    assert _compiled(fn)() == fn()


def test_code_reading_a_traceback_runs_eagerly_in_its_own_frame():
    def raiser():
        raise ValueError("v")

    def fn():
        try:
            raiser()
        except ValueError as exc:
            tb = exc.__traceback__
        return tb.tb_frame is sys._getframe(), tb.tb_next.tb_next is None

    skipped = []
    stop = events.listen(lambda kind, data: kind == "skip" and skipped.append(data["reason"]))
    try:
        assert _compiled(fn)() == fn() == (True, True)
    finally:
        stop()
    assert any("tracebacks" in reason for reason in skipped)


def test_a_callee_reading_frames_runs_eagerly_and_the_caller_still_compiles():
    def where():
        return sys._getframe().f_code.co_name

    def fn(x):
        y = x + 1
        return y * 2, where()

    x = torch.randn(3)
    out, name = _compiled(fn)(x)
    assert name == "where"
    assert torch.equal(out, (x + 1) * 2)
    assert sapwood_tracer.explain(fn)(x).graph_count >= 1
