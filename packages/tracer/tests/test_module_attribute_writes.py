"""Attribute writes on ``sys`` in compiled code: later reads in the trace see them, and they
reach the real module after the graph, before any code that runs eagerly; attributes the
interpreter reads itself (``sys.stdout``, ...) are written where Python writes them (a graph
break), and other modules' attributes are not written by the trace."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

import sapwood_tracer


def _eager(gm: Any, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


@pytest.fixture(autouse=True)
def _fresh():
    hook = sys.breakpointhook
    yield
    sys.breakpointhook = hook
    for name in ("sapwood_test_spam",):
        if hasattr(sys, name):
            delattr(sys, name)


def test_a_sys_attribute_written_is_read_back_and_replayed():
    def f() -> Any:
        setattr(sys, "sapwood_test_spam", 1)  # noqa: B010 (the builtin is what is traced)
        first = sys.sapwood_test_spam
        sys.sapwood_test_spam = first + 1
        return first, sys.sapwood_test_spam, getattr(sys, "sapwood_test_spam")  # noqa: B009

    report = sapwood_tracer.explain(f)()
    assert report.breaks == [] and report.eager_functions == []
    del sys.sapwood_test_spam
    assert _compiled(f)() == (1, 2, 2)
    assert sys.sapwood_test_spam == 2
    sys.sapwood_test_spam = 10  # (a later call writes again, whatever was there)
    assert _compiled(f)() == (1, 2, 2) and sys.sapwood_test_spam == 2


@sapwood_tracer.disable
def _call_breakpoint(*args: Any) -> Any:
    return breakpoint(*args)


def test_code_running_eagerly_after_the_write_sees_it():
    def hook(*args: Any) -> Any:
        return ("hooked", args)

    def f() -> Any:
        sys.breakpointhook = hook
        return _call_breakpoint(1, 2)

    report = sapwood_tracer.explain(f)()
    assert [b.reason for b in report.breaks] == [
        "a call to _call_breakpoint, which sapwood must not trace"
    ]
    sys.breakpointhook = sys.__breakpointhook__
    assert _compiled(f)() == ("hooked", (1, 2))
    assert sys.breakpointhook is hook


def test_attributes_the_interpreter_reads_are_written_where_python_writes_them():
    def f(stream: Any) -> Any:
        saved = sys.stderr
        sys.stderr = stream
        try:
            print("to the stream", file=sys.stderr)
        finally:
            sys.stderr = saved
        return 1

    report = sapwood_tracer.explain(f)(types.SimpleNamespace(write=lambda s: None))
    assert any("which the interpreter reads itself" in b.reason for b in report.breaks)
    written: list[str] = []
    assert _compiled(f)(types.SimpleNamespace(write=written.append)) == 1
    assert "".join(written) == "to the stream\n"


def test_other_modules_attributes_are_not_written_by_the_trace():
    module = types.ModuleType("sapwood_test_module")

    def f(m: Any) -> Any:
        m.value = 3
        return m.value

    report = sapwood_tracer.explain(f)(module)
    assert report.breaks or report.eager_functions
    assert _compiled(f)(module) == 3 and module.value == 3


def test_a_sys_attribute_deleted_is_gone_in_the_trace_and_after():
    def f() -> Any:
        sys.sapwood_test_spam = 1
        delattr(sys, "sapwood_test_spam")
        try:
            del sys.sapwood_test_spam
        except AttributeError as exc:
            message = str(exc)
        return hasattr(sys, "sapwood_test_spam"), message

    expected = f()
    report = sapwood_tracer.explain(f)()
    assert report.breaks == [] and report.eager_functions == []
    sys.sapwood_test_spam = 5
    assert _compiled(f)() == expected and not hasattr(sys, "sapwood_test_spam")


def test_an_attribute_sys_had_before_the_call_written_and_deleted_is_gone_in_the_trace():
    def f() -> Any:
        sys.sapwood_test_spam = 1
        del sys.sapwood_test_spam
        return hasattr(sys, "sapwood_test_spam")

    compiled = _compiled(f)
    for _ in range(2):
        sys.sapwood_test_spam = 5
        assert compiled() is False and not hasattr(sys, "sapwood_test_spam")


def test_deleting_an_attribute_sys_had_at_the_call_is_guarded_on_it():
    def f() -> Any:
        try:
            delattr(sys, "sapwood_test_spam")
        except AttributeError:
            return "missing"
        return "deleted"

    compiled = _compiled(f)
    sys.sapwood_test_spam = 1
    assert compiled() == "deleted" and not hasattr(sys, "sapwood_test_spam")
    assert compiled() == "missing"
    sys.sapwood_test_spam = 1
    assert compiled() == "deleted" and not hasattr(sys, "sapwood_test_spam")


def test_delattr_and_setattr_refuse_names_that_are_not_strings_as_python_does():
    def f(name: Any) -> Any:
        out = []
        for call in (lambda: setattr(sys, name, 1), lambda: delattr(sys, name), delattr):
            try:
                call()
            except TypeError as exc:
                out.append(str(exc))
        return out

    assert sapwood_tracer.explain(f)(1).breaks == []
    assert _compiled(f)(1) == f(1) and len(f(1)) == 3
