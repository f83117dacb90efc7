"""One upstream test run under an engine, and its category.

The upstream tests check themselves: each compares the compiled result with the eager one
(``same(...)``, ``assertEqual``) and counts what was compiled (``cnt.frame_count``,
``op_count``, the graphs a backend recorded). So a test runs once, through unittest's own
``TestCase.run`` (fixtures, cleanups, subtests, expected failures as unittest handles them),
with the compile entry points routed to the engine (:mod:`torch_tests.shim`). The
categories:

- ``passed``: the test ran to its end and asked the engine to compile at least once;
- ``no-compile``: the test asked for no compilation (whatever its outcome);
- ``count``: only an assertion on a count failed: frames, ops, graphs, the text of a
  recorded graph. A graph break the reference compiler does not make shows up here; it is
  not a wrong answer;
- ``wrong``: any other assertion failed: a value compared with eager, or an expected
  exception that was not raised;
- ``unsupported``: the engine refused to compile where a whole graph was asked for
  (``fullgraph=True``): sapwood's or Dynamo's ``Unsupported``;
- ``crash``: the engine's own code raised (its exception classes, or an exception raised in
  its packages), or the test ran past its time;
- ``failed``: the test raised something else (its own code, on what the engine returned);
- ``skip``: unittest skipped it (e.g. it needs CUDA), or it is an expected failure upstream;
- ``internals``: it reads Dynamo's internals (:mod:`torch_tests.corpus`) or used an entry
  point only Dynamo has; not run, or stopped there.

An assertion is a count when the statement that called it (the innermost frame outside
unittest and torch's comparison helpers, its whole statement read from the source) names a
count.
"""

from __future__ import annotations

import ast
import linecache
import re
import signal
import types
import unittest
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from conformance.classify import TestTimeout, exception_line
from conformance.engines import Engine, Watch

from .shim import USAGE, DynamoOnly

__all__ = ["CATEGORIES", "Result", "assertion_kind", "categorize", "run_test"]

CATEGORIES = (
    "passed",
    "count",
    "wrong",
    "unsupported",
    "crash",
    "failed",
    "skip",
    "internals",
    "no-compile",
)

ExcInfo = tuple[type[BaseException], BaseException, types.TracebackType | None]

# What an assertion statement names when it checks a count, not a value.
_COUNT = re.compile(
    r"frame_count|op_count|graph_count|compile_count|call_count|\bgraphs\b|num_graphs"
    r"|assertExpectedInline|normalize_gm|print_readable|\.code\b|_count\b|count_ops"
)
# Frames that belong to the assertion machinery, not to the test.
_MACHINERY = re.compile(
    r"/unittest/|/torch/testing/_internal/common_utils\.py$|/torch/testing/_comparison\.py$"
    r"|/torch/_dynamo/test_case\.py$|/expecttest/"
)


@dataclass
class Result:
    category: str
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)


class _Recorder(unittest.TestResult):
    """Keeps the first exception of the test, traceback and all, and whether it skipped."""

    def __init__(self) -> None:
        super().__init__()
        self.error: ExcInfo | None = None
        self.skipped_why: str | None = None

    def _keep(self, err: Any) -> None:
        if self.error is None:
            self.error = err

    def addError(self, test: Any, err: Any) -> None:
        self._keep(err)

    def addFailure(self, test: Any, err: Any) -> None:
        self._keep(err)

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
        if err is not None:
            self._keep(err)

    def addSkip(self, test: Any, reason: str) -> None:
        self.skipped_why = reason or "skipped"

    def addExpectedFailure(self, test: Any, err: Any) -> None:
        self.skipped_why = "an expected failure upstream (it failed)"

    def addUnexpectedSuccess(self, test: Any) -> None:
        self.skipped_why = "an expected failure upstream (it passed)"


def _on_alarm(signum: int, frame: Any) -> None:
    raise TestTimeout


def run_test(
    cls: type[unittest.TestCase],
    name: str,
    engine: Engine,
    timeout: float,
    watch: Watch | None = None,
) -> Result:
    """Run test ``name`` of ``cls`` once, under the engine the shim routes to; ``watch``
    collects what ran eagerly (graph breaks), kept as ``details["eager"]``."""
    USAGE.clear()
    recorder = _Recorder()
    watch = watch or Watch()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with watch:
            cls(name).run(recorder)
    except TestTimeout:  # in a part unittest does not guard (class fixtures are not run here)
        recorder._keep((TestTimeout, TestTimeout(), None))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    result = categorize(recorder.error, recorder.skipped_why, engine, timeout)
    result.details.update(requests=USAGE.requests, traced=USAGE.traced)
    if watch.reasons:
        result.details["eager"] = list(dict.fromkeys(watch.reasons))[:5]
    return result


def categorize(
    error: ExcInfo | None, skipped_why: str | None, engine: Engine, timeout: float
) -> Result:
    """The category of a run from its first exception (None: it passed) and its usage."""
    if skipped_why is not None:
        return Result("skip", skipped_why[:300])
    if engine.name == "sapwood" and USAGE.dynamo_frames:
        return Result(
            "internals",
            "Dynamo compiled a frame in the sapwood run (an entry point only Dynamo has)",
        )
    if error is None:
        return Result("passed" if USAGE.requests else "no-compile")
    exc = error[1]
    if isinstance(exc, TestTimeout):
        return Result("crash", f"timed out after {timeout:g} s")
    if isinstance(exc, DynamoOnly):
        return Result("internals", f"uses {exc}")
    line = exception_line(exc)
    if not USAGE.requests:
        return Result("no-compile", f"failed without compiling: {line}")
    if _refused(exc, engine):
        return Result("unsupported", line)
    if engine.is_own_error(exc) and not isinstance(exc, AssertionError):
        return Result("crash", line)
    if isinstance(exc, AssertionError):
        kind, statement = assertion_kind(error[2])
        if kind == "count":
            counted = _COUNT.search(statement)
            line = f"{counted.group(0) if counted else 'a count'} differs: {_expected(exc) or line}"
        return Result(kind, f"{line} [{statement}]"[:400])
    return Result("failed", line)


def _expected(exc: BaseException) -> str:
    """torch's "Expected 2 but got 1." line of a failed assertEqual, if there is one."""
    found = re.search(r"Expected .* but got .*", str(exc))
    return found.group(0)[:120] if found else ""


def _refused(exc: BaseException, engine: Engine) -> bool:
    """The engine's "cannot compile this as one graph" (not a bug of the engine: sapwood
    marks its own internal errors as bugs in the hint)."""
    names = {f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__}
    refusal = {"sapwood_tracer.errors.Unsupported", "torch._dynamo.exc.Unsupported"}
    return bool(names & refusal) and "sapwood bug" not in str(getattr(exc, "hint", ""))


def assertion_kind(tb: types.TracebackType | None) -> tuple[str, str]:
    """``count`` or ``wrong``, and the statement that made the failing assertion."""
    caller = None
    while tb is not None:
        if not _MACHINERY.search(tb.tb_frame.f_code.co_filename):
            caller = tb
        tb = tb.tb_next
    if caller is None:
        return "wrong", "?"
    statement = _statement(caller.tb_frame.f_code.co_filename, caller.tb_lineno)
    return ("count" if _COUNT.search(statement) else "wrong"), " ".join(statement.split())[:200]


def _statement(filename: str, lineno: int) -> str:
    """The whole statement of ``filename`` that spans ``lineno`` (the innermost one)."""
    for start, end in _statement_spans(filename):
        if start <= lineno <= end:
            return "".join(linecache.getline(filename, n) for n in range(start, end + 1))
    return linecache.getline(filename, lineno)


@cache
def _statement_spans(filename: str) -> list[tuple[int, int]]:
    """Line spans of the simple statements of a file, the shortest first."""
    try:
        with open(filename, encoding="utf-8") as file:
            tree = ast.parse(file.read())
    except (OSError, SyntaxError, ValueError):
        return []
    spans = [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Expr, ast.Assert, ast.Assign, ast.Return, ast.AugAssign))
    ]
    return sorted(spans, key=lambda span: span[1] - span[0])
