"""One test, run eagerly and compiled, and its category.

A run's *outcome* is ``ok``, ``skip``, ``timeout``, or the name of the exception the test
raised (an ``AssertionError`` is a failed assertion). Each run uses a fresh ``TestCase``
instance; ``setUp``, ``tearDown`` and the cleanups always run eagerly, only the bound test
method is compiled. The categories, for the compiled run against the eager one:

- ``skip``: the eager run skipped (or timed out, so the compiled run is not tried);
- ``passed``: both ``ok``, and the engine reported nothing that ran eagerly;
- ``fallback``: the same outcome, ``ok``, but part of the body ran eagerly;
- ``failed-both``: the same outcome, not ``ok``;
- ``crash``: the outcomes differ and the compiled run's exception is the compiler's own
  (its exception class, or raised in its package's code), or the compiled run timed out;
- ``wrong``: the outcomes differ otherwise: the compiled program behaved differently.

Every category but ``passed`` keeps a one-line reason.
"""

from __future__ import annotations

import signal
import unittest
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .assertions import assertions_run_eagerly
from .engines import Engine

__all__ = [
    "CATEGORIES",
    "Outcome",
    "TestTimeout",
    "categorize",
    "classify_test",
    "exception_line",
    "run_case",
]

CATEGORIES = ("passed", "fallback", "failed-both", "wrong", "crash", "skip")


class TestTimeout(BaseException):
    """Raised by the alarm when a test runs past its time (a BaseException, so that no
    ``except Exception`` in the test or the compiler swallows it)."""


@dataclass(frozen=True)
class Outcome:
    status: str  # ok, skip, timeout, or an exception class name
    detail: str = ""  # the exception's line, or the skip reason
    compiler_error: bool = False  # raised by the engine itself


def exception_line(exc: BaseException) -> str:
    """The exception's class and the first line of its message (an assertion's message can
    run over many lines; notes and hints after it are left out)."""
    cls = type(exc)
    name = (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )
    try:
        lines = [line for line in str(exc).splitlines() if line.strip()]
    except Exception:  # a __str__ that raises
        lines = []
    return (f"{name}: {lines[0].strip()}" if lines else name)[:300]


def _on_alarm(signum: int, frame: Any) -> None:
    raise TestTimeout


def run_case(
    cls: type[unittest.TestCase],
    name: str,
    call: Callable[[Callable[[], Any]], Any],
    engine: Engine,
    timeout: float,
) -> Outcome:
    """Run test ``name`` of ``cls`` in a new instance; ``call(method)`` runs the body."""
    case = cls(name)
    method = getattr(case, name)
    for holder in (cls, method):
        if getattr(holder, "__unittest_skip__", False):
            return Outcome("skip", getattr(holder, "__unittest_skip_why__", ""))
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        try:
            case.setUp()
            try:
                call(method)
            finally:
                case.tearDown()
        finally:
            case.doCleanups()
    except unittest.SkipTest as exc:
        return Outcome("skip", str(exc)[:300])
    except TestTimeout:
        return Outcome("timeout", f"timed out after {timeout:g} s")
    except BaseException as exc:
        return Outcome(type(exc).__name__, exception_line(exc), engine.is_own_error(exc))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return Outcome("ok")


def categorize(eager: Outcome, compiled: Outcome | None, eager_parts: list[str]) -> tuple[str, str]:
    """The category and reason of a test from its two outcomes and what ran eagerly."""
    if eager.status == "skip":
        return "skip", eager.detail
    if eager.status == "timeout" or compiled is None:
        return "skip", f"the eager run: {eager.detail}"
    if compiled.status == eager.status:
        if eager.status != "ok":
            return "failed-both", eager.detail
        if eager_parts:
            return "fallback", eager_parts[0]
        return "passed", ""
    if compiled.status == "timeout":
        return "crash", compiled.detail
    described = compiled.detail or compiled.status
    if compiled.compiler_error:
        return "crash", described
    if compiled.status == "ok":
        return "wrong", f"eager raised {eager.detail or eager.status}; compiled passed"
    return "wrong", f"eager: {eager.detail or eager.status}; compiled: {described}"


def _eagerly(method: Callable[[], Any]) -> Any:
    return method()


def classify_test(
    cls: type[unittest.TestCase], name: str, engine: Engine, timeout: float
) -> tuple[str, str]:
    """Run one test eagerly and under ``engine``; its category and reason."""
    eager = run_case(cls, name, _eagerly, Engine(), timeout)
    if eager.status in ("skip", "timeout"):
        return categorize(eager, None, [])
    engine.reset()
    watch = engine.watch()

    def compiled_call(method: Callable[[], Any]) -> Any:
        with assertions_run_eagerly(engine.disable), watch:
            return engine.compile(method)()

    compiled = run_case(cls, name, compiled_call, engine, timeout)
    engine.reset()
    return categorize(eager, compiled, watch.reasons)
