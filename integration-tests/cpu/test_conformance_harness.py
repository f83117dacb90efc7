"""The conformance harness (``integration-tests/conformance``) classifies tests correctly.

The synthetic ``TestCase`` classes below are the harness's input, not tests of pytest's
(``__test__ = False``). Engines that lie (compile to something else, hang, raise their own
error) check the classifier's decisions without depending on a compiler bug; the real
sapwood and TorchDynamo engines check passed and fallback, and that both go through the
same calls. Process isolation is checked with a worker that segfaults.
"""

from __future__ import annotations

import os
import signal
import sys
import unittest
from pathlib import Path
from typing import Any

import pytest
from conformance.assertions import WRAPPED_METHODS, assertions_run_eagerly
from conformance.classify import Outcome, categorize, classify_test
from conformance.engines import Engine, make_engine
from conformance.report import markdown, text_table
from conformance.runner import main as conformance_main
from conformance.runner import run_worker


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
