"""The conformance harness (``integration-tests/conformance``) classifies tests correctly.

The synthetic ``TestCase`` classes below are the harness's input, not tests of pytest's
(``__test__ = False``). Engines that lie (compile to something else, hang, raise their own
error) check the classifier's decisions without depending on a compiler bug; the real
sapwood and TorchDynamo engines check passed and fallback, and that both go through the
same calls. Process isolation is checked with a worker that segfaults.
"""

from __future__ import annotations

import doctest
import os
import signal
import sys
import unittest
from pathlib import Path
from typing import Any

import pytest
from conformance.assertions import WRAPPED_METHODS, assertions_run_eagerly
from conformance.classify import Outcome, categorize, classify_test
from conformance.doctests import DocTestItem, classify_doctest, run_doctest
from conformance.engines import Engine, make_engine
from conformance.report import markdown, text_table
from conformance.runner import main as conformance_main
from conformance.runner import run_worker
from conformance.wrapping import wrap_example


class Plain(unittest.TestCase):
    __test__ = False

    def test_sums(self) -> None:
        values = [1, 2, 3]
        self.assertEqual(sum(values), 6)
        with self.assertRaises(KeyError):
            {}["missing"]

    def test_adds(self) -> None:
        values = [1, 2, 3]
        self.assertEqual(sum(values), 6)
        self.assertEqual(len(values), 3)

    def test_fails(self) -> None:
        self.assertEqual(1, 2)

    def test_defines_class(self) -> None:
        class Local:  # a class statement breaks the graph in both compilers
            value = 3

        self.assertEqual(Local.value + 1, 4)

    def test_class_after_an_assertion(self) -> None:
        self.assertEqual(1 + 1, 2)  # (a harness break: what follows is a resume function)

        class Local:  # Dynamo would skip the tensor-free resume function, uncounted
            value = 3

        self.assertEqual(Local.value, 3)

    def test_loop_with_assertions(self) -> None:
        for item in (1, 2, 3):  # each item taken eagerly after the assertion's break
            self.assertGreater(item, 0)

    @unittest.skip("not today")
    def test_skipped(self) -> None:
        raise AssertionError("runs although skipped")


class Hangs(unittest.TestCase):
    __test__ = False

    def test_forever(self) -> None:
        while True:
            pass


class Segfaults(unittest.TestCase):
    __test__ = False

    def test_a_segfault(self) -> None:
        os.kill(os.getpid(), signal.SIGSEGV)

    def test_b_after(self) -> None:
        pass


class CompilesToNothing(Engine):
    """A compiler whose compiled function does nothing: a failing test passes."""

    name = "nothing"

    def compile(self, fn: Any) -> Any:
        return lambda: None


class OwnError(Exception):
    pass


class RaisesOwnError(Engine):
    name = "raising"

    def compile(self, fn: Any) -> Any:
        def compiled() -> None:
            raise OwnError("the compiler gave up")

        return compiled

    def own_exception(self, exc: BaseException) -> bool:
        return isinstance(exc, OwnError)


class HangsWhenCompiled(Engine):
    name = "hanging"

    def compile(self, fn: Any) -> Any:
        def compiled() -> None:
            while True:
                pass

        return compiled


class Spy(Engine):
    """Records what the harness asks of the engine it wraps."""

    def __init__(self, inner: Engine) -> None:
        self.inner, self.calls = inner, []

    def compile(self, fn: Any) -> Any:
        self.calls.append("compile")
        return self.inner.compile(fn)

    def disable(self, fn: Any) -> Any:
        self.calls.append(f"disable {fn.__name__}")
        return self.inner.disable(fn)

    def reset(self) -> None:
        self.calls.append("reset")
        self.inner.reset()

    def watch(self) -> Any:
        self.calls.append("watch")
        return self.inner.watch()


COMPILERS = ["sapwood", "dynamo"]


@pytest.mark.parametrize("engine", COMPILERS)
def test_a_test_compiled_without_break_is_passed(engine: str) -> None:
    assert classify_test(Plain, "test_adds", make_engine(engine), 20) == ("passed", "")


def test_an_assertion_context_is_left_out_of_what_sapwood_ran_eagerly() -> None:
    # (Dynamo runs the frame that enters it eagerly: a fallback, counted as such)
    assert classify_test(Plain, "test_sums", make_engine("sapwood"), 20) == ("passed", "")
    category, reason = classify_test(Plain, "test_sums", make_engine("dynamo"), 20)
    assert category == "fallback" and "context manager" in reason


@pytest.mark.parametrize("engine", COMPILERS)
def test_a_graph_break_in_the_body_is_a_fallback_with_its_reason(engine: str) -> None:
    category, reason = classify_test(Plain, "test_defines_class", make_engine(engine), 20)
    assert category == "fallback"
    assert "class" in reason


@pytest.mark.parametrize("engine", COMPILERS)
def test_a_break_after_an_assertion_is_counted_for_both_engines(engine: str) -> None:
    category, reason = classify_test(
        Plain, "test_class_after_an_assertion", make_engine(engine), 20
    )
    assert category == "fallback"
    assert "class" in reason


@pytest.mark.parametrize("engine", COMPILERS)
def test_a_loop_whose_only_breaks_are_assertions_is_passed(engine: str) -> None:
    category, reason = classify_test(Plain, "test_loop_with_assertions", make_engine(engine), 20)
    assert (category, reason) == ("passed", "")


@pytest.mark.parametrize("engine", COMPILERS)
def test_the_same_failure_both_ways_is_failed_both(engine: str) -> None:
    category, reason = classify_test(Plain, "test_fails", make_engine(engine), 20)
    assert (category, reason) == ("failed-both", "AssertionError: 1 != 2")


def test_a_test_skipped_eagerly_is_skip() -> None:
    assert classify_test(Plain, "test_skipped", Engine(), 20) == ("skip", "not today")


def test_a_different_outcome_not_raised_by_the_compiler_is_wrong() -> None:
    category, reason = classify_test(Plain, "test_fails", CompilesToNothing(), 20)
    assert category == "wrong"
    assert reason == "eager raised AssertionError: 1 != 2; compiled passed"


def test_an_error_of_the_compiler_itself_is_a_crash() -> None:
    category, reason = classify_test(Plain, "test_sums", RaisesOwnError(), 20)
    assert category == "crash"
    assert reason.endswith("OwnError: the compiler gave up")


def test_an_error_raised_inside_the_compiler_package_is_a_crash() -> None:
    here = str(Path(__file__).parent) + "/"

    class RaisesInPackage(RaisesOwnError):
        def own_exception(self, exc: BaseException) -> bool:
            return False

        def package_dirs(self) -> list[str]:
            return [here]  # the compiled function above is "inside the compiler"

    assert classify_test(Plain, "test_sums", RaisesInPackage(), 20)[0] == "crash"


def test_a_compiled_run_past_the_timeout_is_a_crash_named_timeout() -> None:
    assert classify_test(Plain, "test_sums", HangsWhenCompiled(), 0.2) == (
        "crash",
        "timed out after 0.2 s",
    )


def test_a_test_that_hangs_eagerly_is_not_run_compiled() -> None:
    engine = Spy(Engine())
    assert classify_test(Hangs, "test_forever", engine, 0.2)[0] == "skip"
    assert "compile" not in engine.calls


def test_outcomes_that_agree_but_are_not_ok_stay_failed_both_despite_breaks() -> None:
    failure = Outcome("KeyError", "KeyError: 1")
    assert categorize(failure, failure, ["graph break"]) == ("failed-both", "KeyError: 1")


def test_sapwood_and_dynamo_are_driven_through_the_same_calls() -> None:
    seen = {}
    for name in COMPILERS:
        spy = Spy(make_engine(name))
        classify_test(Plain, "test_defines_class", spy, 20)
        seen[name] = spy.calls
    assert seen["sapwood"] == seen["dynamo"]
    assert seen["sapwood"][:2] == ["reset", "watch"]
    disabled = [c.removeprefix("disable ") for c in seen["sapwood"] if "disable" in c]
    assert len(disabled) == len(WRAPPED_METHODS) + 2  # and the context's enter and exit
    assert {"enter", "exit", "assertEqual", "assertRaises", "subTest"} <= set(disabled)


def test_assertion_methods_are_disabled_during_the_run_and_restored_after() -> None:
    original = unittest.TestCase.assertEqual
    marked = []

    def disable(fn: Any) -> Any:
        marked.append(fn.__qualname__)
        return fn

    with assertions_run_eagerly(disable):
        assert unittest.TestCase.assertEqual is not original
        assert "TestCase.assertRaises" in marked and "TestCase.subTest" in marked
    assert unittest.TestCase.assertEqual is original


def test_a_segfault_in_a_worker_marks_the_rest_of_its_file_as_crash(tmp_path: Path) -> None:
    results = run_worker("eager", __file__, tmp_path, 20, 60, match="Segfaults")
    assert [(r["test"], r["category"]) for r in results] == [
        ("Segfaults.test_a_segfault", "crash"),
        ("Segfaults.test_b_after", "crash"),
    ]
    assert "SIGSEGV while running Segfaults.test_a_segfault" in results[0]["reason"]
    assert results[1]["reason"].startswith("not run:")


def test_the_eager_engine_finds_nothing_wrong_in_a_cpython_file(tmp_path: Path) -> None:
    results = run_worker("eager", "test_augassign", tmp_path, 20, 120)
    assert len(results) >= 5
    assert {r["category"] for r in results} <= {"passed", "failed-both", "skip"}


def test_the_exit_status_gates_on_sapwood_wrong_or_crash(tmp_path: Path) -> None:
    argv = ["--engine", "eager", "--files", __file__, "--match", "Plain", "--out", str(tmp_path)]
    assert conformance_main(argv) == 0  # the eager engine is never wrong
    assert (tmp_path / "results.json").exists()


def _doctest(text: str, name: str = "sample", **options: Any) -> DocTestItem:
    test = doctest.DocTestParser().get_doctest(text, {}, name, "<sample>", 0)
    return DocTestItem(test, **options)


def _shown(source: str, globs: dict[str, Any], call: Any = None) -> str:
    """What running the wrapped example prints, as the prompt would show it."""
    wrapped = wrap_example(source, "<example>", globs)
    assert wrapped is not None
    printed: list[str] = []
    saved = sys.displayhook
    sys.displayhook = lambda value: value is None or printed.append(repr(value))
    try:
        wrapped.run(call or (lambda fn, *args: fn(*args)), sys.displayhook)
    finally:
        sys.displayhook = saved
    return " ".join(printed)


def test_a_wrapped_example_binds_its_names_in_the_doctest_globals() -> None:
    globs: dict[str, Any] = {}
    assert _shown("x = 20", globs) == ""
    assert _shown("[x for x in range(3)]", globs) == "[0, 1, 2]"
    assert _shown("y = sum(x * x for x in range(4)); x + y", globs) == "34"
    assert (globs["x"], globs["y"]) == (20, 14)
    _shown("del y", globs)
    assert "y" not in globs


def test_a_wrapped_example_shows_each_expression_statement_as_the_prompt_does() -> None:
    # in "single" mode, every expression statement outside a def or class is shown
    source = "for i in range(3):\n    i * 10\n    if i == 1: 'one'\n"
    assert _shown(source, {}) == "0 10 'one' 20"
    assert _shown("def f():\n    'not shown'\n", {}) == ""
    assert _shown("None", {}) == ""


def test_a_wrapped_example_keeps_the_qualified_names_of_the_prompt() -> None:
    globs: dict[str, Any] = {}
    _shown("def f(n):\n    return (i for i in range(n))\n", globs)
    _shown("class C:\n    def m(self): pass\n", globs)
    _shown("g = (i for i in ()); h = lambda: 0", globs)
    assert globs["f"].__qualname__ == "f" and globs["f"](1).__qualname__ == "f.<locals>.<genexpr>"
    assert globs["C"].__qualname__ == "C" and globs["C"].m.__qualname__ == "C.m"
    assert globs["g"].__qualname__ == "<genexpr>" and globs["h"].__qualname__ == "<lambda>"


@pytest.mark.parametrize(
    "source",
    [
        "*a = range(3)",  # a syntax error the test expects: it must stay one
        "yield 1",
        "return 1",
        "from os.path import *",
        "x: int = 1",
        "a = 1\nb = 2\n",  # two statements: not one prompt
    ],
)
def test_an_example_that_cannot_be_a_function_is_not_wrapped(source: str) -> None:
    assert wrap_example(source, "<example>", {}) is None


def test_the_eager_runs_give_the_results_of_doctests_own_runner() -> None:
    text = """
    >>> import sys
    >>> x = [1, 2]
    >>> x.append(3); x
    [1, 2, 3]
    >>> print(len(x)); len(x) * 2
    3
    6
    >>> x  # doctest: +SKIP
    not checked
    >>> object()  # doctest: +ELLIPSIS
    <object object at ...>
    >>> x.pop(7)
    Traceback (most recent call last):
    IndexError: pop index out of range
    >>> x.pop(7)  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    IndexError: another message
    >>> x
    [1, 2, 3]
    >>> {}[1]
    Traceback (most recent call last):
    ValueError: 1
    >>> undefined
    """
    item = _doctest(text)
    expected = doctest.DocTestRunner(verbose=False).run(_doctest(text).test, out=lambda s: None)
    statuses = {}
    for plain in (None, frozenset()):
        results = run_doctest(item, Engine(), 20, plain)
        statuses[plain] = [r.status for r in results]
        assert sum(s not in ("ok", "skip") for s in statuses[plain]) == expected.failed
    assert statuses[None] == statuses[frozenset()]
    assert statuses[None] == [
        *["ok"] * 4,
        "skip",
        *["ok"] * 4,
        "KeyError",  # where a ValueError was expected
        "NameError",
    ]


def test_a_doctest_is_classified_like_a_test_method() -> None:
    item = _doctest(">>> values = [1, 2]\n>>> sum(values)\n3\n")
    assert classify_doctest(item, Engine(), 20) == (
        "passed",
        "",
        {"note": "2 examples, 2 compiled", "partly_eager": 0},
    )
    category, reason, _ = classify_doctest(item, CompilesToNothing(), 20)
    assert category == "wrong"
    assert (
        reason
        == "example 2 (docstring line 2, 'sum(values)'): eager: ok; compiled: printed nothing"
    )
    category, reason, _ = classify_doctest(item, RaisesOwnError(), 20)
    assert category == "crash" and reason.endswith("OwnError: the compiler gave up")
    assert classify_doctest(item, HangsWhenCompiled(), 0.2)[:2] == (
        "crash",
        "example 1 (docstring line 1, 'values = [1, 2]'): timed out after 0.2 s",
    )
    failing = _doctest(">>> 1 + 1\n3\n")
    assert classify_doctest(failing, Engine(), 20)[0] == "failed-both"


def test_an_example_that_differs_when_wrapped_runs_as_doctest_runs_it() -> None:
    item = _doctest(">>> locals() is globals()\nTrue\n>>> 1 + 1\n2\n")
    category, reason, details = classify_doctest(item, Engine(), 20)
    assert (category, reason) == ("passed", "")
    note = "2 examples, 1 compiled; 1 differ wrapped (run uncompiled; docstring lines 1)"
    assert details["note"] == note


def test_an_example_that_cannot_be_wrapped_runs_uncompiled_for_every_engine() -> None:
    item = _doctest(
        ">>> *a = range(3)  # doctest: +IGNORE_EXCEPTION_DETAIL\n"
        "Traceback (most recent call last):\nSyntaxError: x\n>>> 2\n2\n"
    )
    assert classify_doctest(item, CompilesToNothing(), 20)[0] == "wrong"  # 2 is compiled
    assert classify_doctest(item, Engine(), 20)[2]["note"] == (
        "2 examples, 1 compiled; 1 cannot be wrapped (run uncompiled)"
    )


@pytest.mark.parametrize("engine", COMPILERS)
def test_a_doctest_compiled_without_break_is_passed(engine: str) -> None:
    text = ">>> values = [1, 2, 3]\n>>> def double(x):\n...     return 2 * x\n"
    text += ">>> total = double(sum(values))\n>>> total, values[0]\n(12, 1)\n"
    assert classify_doctest(_doctest(text), make_engine(engine), 20)[:2] == ("passed", "")


def test_a_value_shown_inside_a_loop_is_a_harness_break_left_out() -> None:
    # (Dynamo runs this frame eagerly: its resume function in the loop does not find the
    # global ``v`` it stored before the break)
    text = ">>> values = [1, 2, 3]\n>>> for v in values:\n...     v * 10\n10\n20\n30\n"
    assert classify_doctest(_doctest(text), make_engine("sapwood"), 20)[:2] == ("passed", "")


@pytest.mark.parametrize("engine", COMPILERS)
def test_a_graph_break_in_an_example_is_a_fallback_naming_the_example(engine: str) -> None:
    item = _doctest(">>> x = 1\n>>> class Point:\n...     x = 3\n>>> Point.x + x\n4\n")
    category, reason, details = classify_doctest(item, make_engine(engine), 20)
    assert category == "fallback" and details["partly_eager"] == 1
    assert reason.startswith("1 of 3 compiled examples ran partly eagerly; example 2 ")
    assert "class" in reason.split("'class Point:'):")[1]


def test_the_worker_collects_the_doctests_that_load_tests_adds(tmp_path: Path) -> None:
    sample = str(Path(__file__).with_name("conformance_doctest_sample.py"))
    results = run_worker("eager", sample, tmp_path, 20, 120)
    assert [(r["test"], r["category"]) for r in results] == [
        ("doctest:__test__.examples", "passed"),
        ("doctest:__test__.with_class", "passed"),
    ]
    assert results[0]["note"] == "6 examples, 6 compiled"


SAMPLE = [
    dict(engine="sapwood", file="test_x", test="A.test_1", category="passed", reason=""),
    dict(engine="sapwood", file="test_x", test="A.test_2", category="wrong", reason="x | y"),
    dict(engine="dynamo", file="test_x", test="A.test_1", category="fallback", reason="b"),
    dict(engine="dynamo", file="test_x", test="A.test_2", category="passed", reason=""),
]
META = {"date": "2026-11-24", "python": "3.11", "torch": "2.13", "command": "python -m c"}


def test_the_docs_page_has_a_row_per_file_the_totals_and_sapwood_wrong_tests() -> None:
    page = markdown(SAMPLE, {**META, "files": ["test_x", "test_y"]})
    assert "| test_x | 1 | 0 | 0 | 1 | 0 | 0 | 1 | 1 | 0 | 0 | 0 | 0 |" in page
    assert "| **total** | 1 | 0 | 0 | 1 | 0 | 0 | 1 | 1 | 0 | 0 | 0 | 0 |" in page
    assert "- `test_x` `A.test_2`: x \\| y" in page
    assert "not run (time ran out): test_y" in page
    assert "Python 3.11, torch 2.13" in page


def test_the_docs_page_tells_a_file_without_tests_from_one_not_run() -> None:
    meta = {**META, "files": ["test_x", "test_y", "test_z"], "no_tests": ["test_y"]}
    page = markdown(SAMPLE, meta)
    assert "no test to run (none collected, or none matched): test_y" in page
    assert "not run (time ran out): test_z" in page


def test_the_docs_page_lists_each_doctest_with_its_examples_and_categories() -> None:
    note = "3 examples, 2 compiled"
    results = [
        dict(engine=e, file="test_g", test="doctest:d", category=c, reason="", note=note)
        for e, c in (("sapwood", "passed"), ("dynamo", "fallback"))
    ]
    results[1]["partly_eager"] = 1
    page = markdown(results, {**META, "files": ["test_g"]})
    row = "| test_g | `doctest:d` | 3 examples, 2 compiled | passed | fallback (partly eager: 1 examples)"
    assert row in page


def test_the_docs_page_counts_the_files_where_sapwood_passes_at_least_as_many() -> None:
    page = markdown(SAMPLE, {**META, "files": ["test_x"]})
    assert "| test_x | 1 | 1 |" in page
    assert "at least Dynamo's on 1 of 1 files" in page


def test_the_printed_table_shows_the_engines_side_by_side() -> None:
    rows = text_table(SAMPLE).splitlines()
    assert rows[0].split() == ["sapwood", "|", "dynamo"]
    assert rows[2].split() == [
        "test_x",
        *["1", "0", "0", "1", "0", "0", "|", "1", "1", "0", "0", "0", "0"],
    ]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
