"""One test file under one engine, in the process that runs it.

``python -m conformance.worker ENGINE FILE RESULTS [--timeout S] [--match REGEX]``
imports ``test.FILE`` (or a dotted module name, or a ``.py`` file's path), collects its tests with
``unittest.TestLoader().loadTestsFromModule`` (so ``load_tests`` is honoured): the
``TestCase`` methods, and the doctests that ``load_tests`` added with ``DocTestSuite``,
each ``DocTest`` one test (:mod:`conformance.doctests`), named after it
(``doctest:__test__.doctests``). unittest's placeholders for tests that failed to load are left
out.

It writes JSON lines to RESULTS as it goes, flushed after each: first
``{"tests": [ids]}``, then one ``{"test", "category", "reason"}`` per test (a doctest's
has ``note`` and ``partly_eager`` too: how many of its examples were compiled, and how
many of those ran partly eagerly). When the
process dies (a segfault) or is killed (the file's time ran out), the runner reads the
lines that made it and knows which test was running.

``setUpModule``/``setUpClass`` and their tear-downs run eagerly around the tests they
serve; when one raises, the tests it serves are ``skip`` with its exception as the reason.
"""

from __future__ import annotations

import argparse
import builtins
import doctest
import importlib
import importlib.util
import json
import re
import sys
import types
import unittest
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .classify import classify_test
from .doctests import DocTestItem, classify_doctest, doctest_items
from .engines import ENGINES, make_engine

__all__ = ["collect", "import_tests", "main", "module_name", "run_file"]


def module_name(file: str) -> str:
    """``test_dict`` is CPython's ``test.test_dict``; a dotted name is taken as it is."""
    return file if "." in file else f"test.{file}"


def import_tests(file: str) -> types.ModuleType:
    """The module of ``file``: a CPython test name, a dotted name, or a ``.py`` path."""
    if not file.endswith(".py"):
        return importlib.import_module(module_name(file))
    path = Path(file)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def _cases(suite: unittest.TestSuite) -> Iterator[unittest.TestCase]:
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _cases(item)
        elif isinstance(item, unittest.TestCase):
            yield item


Test = tuple[type[unittest.TestCase], str] | DocTestItem


def collect(module: types.ModuleType) -> list[Test]:
    """Every test of ``module`` in loader order: the (class, method name) of a TestCase
    method, or a doctest."""
    suite = unittest.TestLoader().loadTestsFromModule(module)
    tests: list[Test] = []
    for case in _cases(suite):
        cls = type(case)
        if isinstance(case, doctest.DocTestCase):
            if case._dt_test.examples:
                tests.append(doctest_items(case))
            continue
        if isinstance(case, unittest.FunctionTestCase):
            continue
        if cls.__module__.startswith("unittest"):
            continue  # _FailedTest and other loader placeholders
        tests.append((cls, case._testMethodName))
    return tests


def test_id(test: Test, module: str = "") -> str:
    """``Class.method``, or ``doctest:`` and a doctest's name without its module's
    (``doctest:__test__.doctests``; ``--match '^doctest:'`` selects the doctests)."""
    if isinstance(test, DocTestItem):
        return "doctest:" + (test.name.removeprefix(f"{module}.") if module else test.name)
    cls, name = test
    return f"{cls.__qualname__}.{name}"


def _fixture_error(exc: BaseException) -> str:
    if isinstance(exc, unittest.SkipTest):
        return str(exc)[:300]
    return f"fixture raised {type(exc).__name__}: {exc}"[:300]


def run_file(
    file: str, engine_name: str, out: IO[str], timeout: float, match: str | None = None
) -> None:
    """Run every selected test of ``file`` under the engine; JSON lines to ``out``."""
    engine = make_engine(engine_name)
    engine.is_own_error(None)  # its package folders, before a test can patch what they need
    try:
        module = import_tests(file)
        tests = collect(module)
    except BaseException as exc:
        out.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]}) + "\n")
        out.flush()
        return
    pattern = re.compile(match) if match else None
    ids = {id(t): test_id(t, module.__name__) for t in tests}
    tests = [t for t in tests if pattern is None or pattern.search(ids[id(t)])]
    out.write(json.dumps({"tests": [ids[id(t)] for t in tests]}) + "\n")
    out.flush()

    def emit(test: str, category: str, reason: str, details: dict[str, Any]) -> None:
        record = {"test": test, "category": category, "reason": reason, **details}
        out.write(json.dumps(record) + "\n")
        out.flush()

    module_error = _fixture(getattr(module, "setUpModule", None))
    current: type | None = None
    class_error: str | None = None
    for index, test in enumerate(tests):
        cls = None if isinstance(test, DocTestItem) else test[0]
        if cls is not current:
            current = cls
            class_error = module_error or (_fixture(cls.setUpClass) if cls else None)
        details: dict[str, Any] = {}
        error = class_error
        if error is None:
            # a test that replaces builtins (``len``) and is cut short before its own
            # ``finally`` restores them would break every later test and the worker itself
            saved_builtins = dict(vars(builtins))
            try:
                if isinstance(test, DocTestItem):
                    category, reason, details = classify_doctest(test, engine, timeout)
                else:
                    category, reason = classify_test(*test, engine, timeout)
            finally:
                _restore(vars(builtins), saved_builtins)
        else:
            category, reason = "skip", error
        emit(ids[id(test)], category, reason, details)
        following = tests[index + 1] if index + 1 < len(tests) else None
        last_of_class = (
            following is None or isinstance(following, DocTestItem) or following[0] is not cls
        )
        if cls is not None and last_of_class and class_error is None:
            _fixture(cls.tearDownClass)
    if module_error is None:
        _fixture(getattr(module, "tearDownModule", None))


def _restore(namespace: dict[str, object], saved: dict[str, object]) -> None:
    """Put ``namespace`` back to ``saved``: names added since removed, changed ones reset."""
    for name in [n for n in namespace if n not in saved]:
        del namespace[name]
    for name, value in saved.items():
        if namespace.get(name, _MISSING) is not value:
            namespace[name] = value


_MISSING = object()


def _fixture(fn: object) -> str | None:
    """Run a module or class fixture eagerly; the reason its tests are skipped, if any."""
    if fn is None:
        return None
    try:
        fn()  # type: ignore[operator]
    except BaseException as exc:
        return _fixture_error(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.worker")
    parser.add_argument("engine", choices=sorted(ENGINES))
    parser.add_argument("file")
    parser.add_argument("results")
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--match", default=None)
    args = parser.parse_args(argv)
    with open(args.results, "w", encoding="utf-8") as out:
        run_file(args.file, args.engine, out, args.timeout, args.match)
    return 0


if __name__ == "__main__":
    sys.exit(main())
