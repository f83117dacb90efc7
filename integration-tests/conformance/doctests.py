"""A doctest, run eagerly and compiled, and its category.

One ``DocTest`` (the examples of one docstring, or of one ``__test__`` entry, as
``doctest.DocTestSuite`` collects them) is one test. Its examples share its globals, as
at the interactive prompt, so they run in order, each time in a fresh copy of them.

Each example is made a function (:mod:`conformance.wrapping`) and run by doctest's own
``DocTestRunner``: the runner sees a call in place of the example's source, so its
output capture, option flags (``ELLIPSIS``, ``IGNORE_EXCEPTION_DETAIL``, ``SKIP``, ...)
and checking of output and exceptions are the doctest module's own. The runs:

1. *reference*: every example as doctest runs it (``"single"`` mode), uncompiled;
2. *eager*: the wrapped functions called uncompiled. An example whose result differs from
   the reference (wrapping shows, e.g., in ``locals()``) runs as doctest runs it from then
   on, in every run, and the eager run is made again; the reference of the test is then
   this run, the same wrapped functions the compiled run compiles;
3. *compiled*: each wrapped function compiled by the engine and called, within its own
   ``watch``; expression values other than the last one are shown through a function
   the engine leaves eager (a harness break, like unittest's assertions).

An example that cannot be wrapped (a syntax error the test expects, a top-level
``yield``, ...) runs as doctest runs it in every run, for every engine. The per-test time
limit applies to each example. The categories are those of :mod:`conformance.classify`,
from the examples' results compared one by one; the reason names the first example that
decided it.
"""

from __future__ import annotations

import builtins
import doctest
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import engines
from .classify import Outcome, TestTimeout, categorize, exception_line
from .engines import Engine
from .wrapping import WrappedExample, future_flags, wrap_example

__all__ = ["DocTestItem", "ExampleResult", "classify_doctest", "doctest_items", "run_doctest"]

_RUN = "__doctest_run__"
_LIMITATION_ROUNDS = 4


def show_expression_value(value: object) -> None:
    """Show an expression statement's value as the interactive prompt does."""
    sys.displayhook(value)


engines.HARNESS_QUALNAMES.add(show_expression_value.__qualname__)


@dataclass(frozen=True)
class DocTestItem:
    """A doctest and how ``DocTestSuite`` set it up to run."""

    test: doctest.DocTest
    optionflags: int = 0
    checker: doctest.OutputChecker | None = None
    set_up: Callable[[doctest.DocTest], Any] | None = None
    tear_down: Callable[[doctest.DocTest], Any] | None = None

    @property
    def name(self) -> str:
        return self.test.name


def doctest_items(case: doctest.DocTestCase) -> DocTestItem:
    """The doctest of a ``DocTestCase`` from ``DocTestSuite``."""
    return DocTestItem(
        case._dt_test, case._dt_optionflags, case._dt_checker, case._dt_setUp, case._dt_tearDown
    )


@dataclass(frozen=True)
class ExampleResult:
    """One example's result: ``ok`` (doctest's check passed), ``skip`` (doctest's
    ``SKIP``), ``failed`` (other output), ``timeout``, ``not run`` (after a timeout), or
    the class name of the exception raised where none or another was expected."""

    status: str
    detail: str = ""
    compiler_error: bool = False
    wrapped: bool = False
    eager_parts: tuple[str, ...] = ()


class _NotRun(Exception):
    """An example after one that timed out: the rest of the doctest is not run."""


@dataclass
class _Session:
    """One run of a doctest: the function behind each example's call."""

    item: DocTestItem
    globs: dict[str, Any]
    plain: frozenset[int]
    engine: Engine
    compiled: bool
    timeout: float
    judged: dict[int, tuple[bool, str]] = field(default_factory=dict)
    raised: dict[int, BaseException] = field(default_factory=dict)
    wrapped: set[int] = field(default_factory=set)
    parts: dict[int, list[str]] = field(default_factory=dict)
    timed_out: bool = False

    def run_example(self, index: int) -> None:
        if self.timed_out:
            raise _NotRun("not run: an example before it timed out")
        example = self.item.test.examples[index]
        filename = f"<doctest {self.item.name}[{index}]>"
        wrapped = (
            None if index in self.plain else wrap_example(example.source, filename, self.globs)
        )
        signal.setitimer(signal.ITIMER_REAL, self.timeout)
        try:
            if wrapped is None:
                code = compile(example.source, filename, "single", future_flags(self.globs), True)
                exec(code, self.globs)
            else:
                self.wrapped.add(index)
                self._call(index, wrapped)
        except TestTimeout:
            self.timed_out = True
            self.raised[index] = TestTimeout(f"timed out after {self.timeout:g} s")
            raise
        except BaseException as exc:
            self.raised[index] = exc
            raise
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _call(self, index: int, wrapped: WrappedExample) -> None:
        if not self.compiled:
            wrapped.run(lambda fn, *args: fn(*args), show_expression_value)
            return
        display = self.engine.disable(show_expression_value)
        watch = self.engine.watch()
        try:
            with watch:
                wrapped.run(lambda fn, *args: self.engine.compile(fn)(*args), display)
        finally:
            if watch.reasons:
                self.parts[index] = list(watch.reasons)

    def result(self, index: int) -> ExampleResult:
        wrapped, parts = index in self.wrapped, tuple(self.parts.get(index, ()))
        if index not in self.judged:
            return ExampleResult("skip", "doctest's SKIP", wrapped=wrapped)
        success, got = self.judged[index]
        if success:
            return ExampleResult("ok", wrapped=wrapped, eager_parts=parts)
        exc = self.raised.get(index)
        if exc is None:
            shown = got.strip().splitlines()[0][:200] if got.strip() else "nothing"
            return ExampleResult("failed", f"printed {shown}", wrapped=wrapped, eager_parts=parts)
        status = {TestTimeout: "timeout", _NotRun: "not run"}.get(type(exc), type(exc).__name__)
        detail = str(exc) if status in ("timeout", "not run") else exception_line(exc)
        own = self.compiled and self.engine.is_own_error(exc)
        return ExampleResult(status, detail, own, wrapped, parts)


class _Recorder(doctest.DocTestRunner):
    """doctest's runner, recording each example's result instead of printing it."""

    def __init__(self, session: _Session, indices: dict[int, int]) -> None:
        item = session.item
        super().__init__(checker=item.checker, verbose=False, optionflags=item.optionflags)
        self._session, self._indices = session, indices

    def _judge(self, example: doctest.Example, success: bool, got: str) -> None:
        self._session.judged[self._indices[id(example)]] = (success, got)

    def report_start(self, out: Any, test: Any, example: Any) -> None:
        pass

    def report_success(self, out: Any, test: Any, example: Any, got: str) -> None:
        self._judge(example, True, got)

    def report_failure(self, out: Any, test: Any, example: Any, got: str) -> None:
        self._judge(example, False, got)

    def report_unexpected_exception(self, out: Any, test: Any, example: Any, exc: Any) -> None:
        self._judge(example, False, "")


def _on_alarm(signum: int, frame: Any) -> None:
    raise TestTimeout


def run_doctest(
    item: DocTestItem,
    engine: Engine,
    timeout: float,
    plain: frozenset[int] | None = None,
    compiled: bool = False,
) -> list[ExampleResult]:
    """Run the doctest once in a copy of its globals; the result of each example.

    ``plain``: the examples run as doctest runs them (all of them when ``None``); the
    others are wrapped, and compiled by ``engine`` when ``compiled``."""
    test = item.test
    every = frozenset(range(len(test.examples)))
    globs = dict(test.globs)
    globs.setdefault("__builtins__", vars(builtins))  # (as the first exec() would add it)
    session = _Session(item, globs, every if plain is None else plain, engine, compiled, timeout)
    calls = [
        doctest.Example(f"{_RUN}({i})\n", e.want, e.exc_msg, e.lineno, e.indent, e.options)
        for i, e in enumerate(test.examples)
    ]
    copy = doctest.DocTest(calls, globs, test.name, test.filename, test.lineno, test.docstring)
    runner = _Recorder(session, {id(call): i for i, call in enumerate(calls)})
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    setattr(builtins, _RUN, session.run_example)
    try:
        if item.set_up is not None:
            item.set_up(copy)
        try:
            runner.run(copy, out=lambda text: None, clear_globs=False)
        finally:
            if item.tear_down is not None:
                item.tear_down(copy)
    finally:
        delattr(builtins, _RUN)
        signal.signal(signal.SIGALRM, previous)
        globs.clear()
    return [session.result(i) for i in range(len(test.examples))]


def _where(item: DocTestItem, index: int) -> str:
    example = item.test.examples[index]
    first = example.source.strip().splitlines()[0][:60]
    return f"example {index + 1} (docstring line {example.lineno + 1}, {first!r})"


def _differences(a: list[ExampleResult], b: list[ExampleResult]) -> Iterator[int]:
    return (i for i, (x, y) in enumerate(zip(a, b)) if x.status != y.status)


def classify_doctest(
    item: DocTestItem, engine: Engine, timeout: float
) -> tuple[str, str, dict[str, Any]]:
    """Run one doctest as doctest does, wrapped eagerly, and compiled by ``engine``; its
    category, reason, and how its examples ran: ``{"note": how many were compiled,
    "partly_eager": how many of those ran partly eagerly}`` (empty when it was skipped)."""
    eager_engine = Engine()
    reference = run_doctest(item, eager_engine, timeout)
    stopped = next((i for i, r in enumerate(reference) if r.status == "timeout"), None)
    if stopped is not None:
        return "skip", f"the eager run: {_where(item, stopped)} timed out", {}
    plain: frozenset[int] = frozenset()
    for _ in range(_LIMITATION_ROUNDS):
        eager = run_doctest(item, eager_engine, timeout, plain)
        differing = set(_differences(reference, eager))
        if not differing:
            break
        unwrapped = differing - {i for i, r in enumerate(eager) if r.wrapped}
        if unwrapped:
            first = min(unwrapped)
            reason = f"harness limitation: {_where(item, first)} differs after wrapped examples"
            return "skip", reason, {}
        plain |= differing
    else:
        return "skip", "harness limitation: wrapped examples keep differing", {}
    engine.reset()
    try:
        compiled = run_doctest(item, engine, timeout, plain, compiled=True)
    finally:
        engine.reset()
    category, reason = _categorize(item, eager, compiled)
    partly_eager = sum(bool(r.eager_parts) for r in compiled)
    return category, reason, {"note": _note(item, eager, plain), "partly_eager": partly_eager}


def _note(item: DocTestItem, eager: list[ExampleResult], differing: frozenset[int]) -> str:
    total = len(eager)
    compiled = sum(r.wrapped for r in eager)
    note = f"{total} example{'' if total == 1 else 's'}, {compiled} compiled"
    cannot = total - compiled - len(differing) - sum(r.status == "skip" for r in eager)
    if cannot:
        note += f"; {cannot} cannot be wrapped (run uncompiled)"
    if differing:
        lines = ", ".join(str(item.test.examples[i].lineno + 1) for i in sorted(differing))
        note += f"; {len(differing)} differ wrapped (run uncompiled; docstring lines {lines})"
    return note


def _categorize(
    item: DocTestItem, eager: list[ExampleResult], compiled: list[ExampleResult]
) -> tuple[str, str]:
    for index in _differences(eager, compiled):
        e, c = eager[index], compiled[index]
        category, reason = categorize(
            Outcome(e.status, e.detail), Outcome(c.status, c.detail, c.compiler_error), []
        )
        return category, f"{_where(item, index)}: {reason}"
    failing = next((i for i, r in enumerate(eager) if r.status not in ("ok", "skip")), None)
    if failing is not None:
        result = eager[failing]
        return "failed-both", f"{_where(item, failing)}: {result.detail or result.status}"
    parts = [(i, r.eager_parts[0]) for i, r in enumerate(compiled) if r.eager_parts]
    if parts:
        index, first = parts[0]
        counted = f"{len(parts)} of {sum(r.wrapped for r in compiled)} compiled examples"
        return "fallback", f"{counted} ran partly eagerly; {_where(item, index)}: {first}"
    return "passed", ""
