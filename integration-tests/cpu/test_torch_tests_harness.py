"""The harness that runs PyTorch's Dynamo tests (``integration-tests/torch_tests``) classifies
tests correctly.

The synthetic ``TestCase`` classes below are the harness's input, not tests of pytest's
(``__test__ = False``). They stand for upstream tests: each "compiles" by counting a request
the way the shim does, then checks a value or a count. Everything runs in this process
without routing ``torch.compile`` anywhere (that would change it for every other test of the
process), except the last test, which runs the worker in a process of its own on a small
file, through the real shim and sapwood.
"""

from __future__ import annotations

import json
import sys
import time
import unittest
from pathlib import Path

from conformance.engines import Engine
from torch_tests.corpus import internals_reason
from torch_tests.outcome import run_test
from torch_tests.report import common_reasons, markdown, text_table
from torch_tests.runner import merge_internals, read_results
from torch_tests.shim import USAGE, DynamoOnly


class _Counter:
    frame_count = 1
    op_count = 2


def _compile() -> _Counter:
    """What a routed ``torch.compile`` call leaves behind: one request."""
    USAGE.requests += 1
    return _Counter()


class Synthetic(unittest.TestCase):
    __test__ = False

    def test_passes(self) -> None:
        cnt = _compile()
        self.assertEqual(2 + 2, 4)
        self.assertEqual(cnt.frame_count, 1)

    def test_wrong_value(self) -> None:
        _compile()
        result, expected = [1.0, 2.0], [1.0, 2.5]
        self.assertEqual(result, expected)

    def test_wrong_count(self) -> None:
        cnt = _compile()
        self.assertEqual(2 + 2, 4)
        self.assertEqual(
            cnt.frame_count,
            2,
        )

    def test_reads_counters(self) -> None:
        counters = {"graph_break": {}}
        self.assertEqual(len(counters["graph_break"]), 0)

    def test_never_compiles(self) -> None:
        self.assertEqual(1, 1)

    def test_dynamo_only_entry(self) -> None:
        _compile()
        raise DynamoOnly("torch._dynamo.export")

    def test_own_error(self) -> None:
        _compile()
        raise _EngineBug("traced badly")

    def test_refused(self) -> None:
        _compile()
        raise Unsupported("a construct")

    def test_slow(self) -> None:
        _compile()
        time.sleep(5)

    @unittest.skip("requires CUDA")
    def test_skipped(self) -> None:
        _compile()


class _EngineBug(Exception):
    pass


class Unsupported(Exception):
    """Named as sapwood's refusal is, for the classifier's check by qualified name."""


Unsupported.__module__ = "sapwood_tracer.errors"


class _LyingEngine(Engine):
    name = "sapwood"

    def own_exception(self, exc: BaseException) -> bool:
        return isinstance(exc, (_EngineBug, Unsupported))


def _run(name: str, timeout: float = 5.0) -> tuple[str, str]:
    result = run_test(Synthetic, name, _LyingEngine(), timeout)
    return result.category, result.reason


def test_a_test_that_compiled_and_held_its_assertions_passed() -> None:
    assert _run("test_passes") == ("passed", "")


def test_a_failed_comparison_of_values_is_wrong() -> None:
    category, reason = _run("test_wrong_value")
    assert category == "wrong"
    assert "self.assertEqual(result, expected)" in reason


def test_a_failed_assertion_on_a_count_is_count_even_over_several_lines() -> None:
    category, reason = _run("test_wrong_count")
    assert category == "count"
    assert reason.startswith("frame_count differs")


def test_a_test_reading_dynamo_counters_is_internals_and_not_run() -> None:
    assert internals_reason(Synthetic, "test_reads_counters") is not None
    assert internals_reason(Synthetic, "test_passes") is None


def test_a_test_that_never_compiles_is_no_compile() -> None:
    assert _run("test_never_compiles")[0] == "no-compile"


def test_an_entry_point_only_dynamo_has_is_internals() -> None:
    assert _run("test_dynamo_only_entry")[0] == "internals"


def test_the_engines_own_error_is_a_crash_and_its_refusal_unsupported() -> None:
    assert _run("test_own_error")[0] == "crash"
    assert _run("test_refused")[0] == "unsupported"


def test_a_test_past_its_time_is_a_crash() -> None:
    assert _run("test_slow", timeout=0.2) == ("crash", "timed out after 0.2 s")


def test_a_skipped_test_is_skip() -> None:
    assert _run("test_skipped") == ("skip", "requires CUDA")


def test_internals_found_in_one_engines_run_hold_for_both() -> None:
    results = [
        dict(engine="sapwood", file="f", test="T.a", category="internals", reason="uses export"),
        dict(engine="dynamo", file="f", test="T.a", category="passed", reason=""),
        dict(engine="dynamo", file="f", test="T.b", category="passed", reason=""),
    ]
    merged = merge_internals(results)
    assert [r["category"] for r in merged] == ["internals", "internals", "passed"]
    assert merged[1]["ran_as"] == "passed"


def test_a_worker_that_died_leaves_the_running_test_and_the_rest_as_crash() -> None:
    lines = [
        json.dumps({"tests": ["T.a", "T.b", "T.c"]}),
        json.dumps({"test": "T.a", "category": "passed", "reason": ""}),
    ]
    results = read_results("sapwood", "f", lines, "the worker died of SIGSEGV")
    assert [(r["test"], r["category"]) for r in results] == [
        ("T.a", "passed"),
        ("T.b", "crash"),
        ("T.c", "crash"),
    ]
    assert "while running T.b" in results[1]["reason"]


def test_the_report_ranks_sapwoods_reasons_on_tests_dynamo_passes() -> None:
    results = [
        dict(
            engine="sapwood",
            file="f",
            test="T.a",
            category="count",
            reason="x",
            eager=["graph break at /a/b.py:3: branching on a tensor's value"],
        ),
        dict(
            engine="sapwood",
            file="f",
            test="T.b",
            category="count",
            reason="y",
            eager=["graph break at /a/b.py:9: branching on a tensor's value"],
        ),
        dict(engine="sapwood", file="f", test="T.c", category="wrong", reason="z"),
        dict(engine="dynamo", file="f", test="T.a", category="passed", reason=""),
        dict(engine="dynamo", file="f", test="T.b", category="passed", reason=""),
        dict(engine="dynamo", file="f", test="T.c", category="wrong", reason="z"),
    ]
    reasons = common_reasons(results)
    assert reasons[0][:2] == ("count: graph break: branching on a tensor's value", 2)
    assert len(reasons) == 1  # T.c: Dynamo fails it too
    page = markdown(results, {"command": "python -m torch_tests"})
    assert "Generated by `python -m torch_tests`" in page and "## sapwood wrong (1)" in page
    assert text_table(results).splitlines()[-1].startswith("total")


_SMALL_FILE = """
import unittest

import torch
import torch._dynamo.testing


class Small(unittest.TestCase):
    def test_compiles_through_torch_compile(self):
        cnt = torch._dynamo.testing.CompileCounter()
        fn = torch.compile(lambda x: x.sin() + 1, backend=cnt, fullgraph=True)
        x = torch.randn(3)
        self.assertTrue(torch.allclose(fn(x), x.sin() + 1))
        self.assertEqual(cnt.frame_count, 1)
        self.assertEqual(type(torch.compile.__self__).__name__, "_SapwoodRoutes")
"""


def test_the_worker_routes_torch_compile_to_sapwood(tmp_path: Path) -> None:
    import subprocess

    source = tmp_path / "test_small.py"
    source.write_text(_SMALL_FILE)
    out = tmp_path / "out.jsonl"
    here = Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-m", "torch_tests.worker", "sapwood", str(source), str(out)],
        check=True,
        cwd=here,
        env={"PYTHONPATH": str(here), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0] == {"tests": ["Small.test_compiles_through_torch_compile"]}
    assert records[1]["category"] == "passed"
    assert records[1]["requests"] == 1 and records[1]["traced"] >= 1
