"""One upstream test file under one engine, in the process that runs it.

``python -m torch_tests.worker ENGINE FILE RESULTS [--timeout S] [-k SUBSTRING]`` routes
the compile entry points to the engine (:func:`torch_tests.shim.install`) *before* it
imports the file, collects its ``TestCase`` methods as CPython's conformance harness does
(:func:`conformance.worker.collect`), and runs each (:func:`torch_tests.outcome.run_test`)
unless it reads Dynamo's internals (:func:`torch_tests.corpus.internals_reason`).

It writes the same JSON lines as the conformance worker, flushed after each: first
``{"tests": [ids]}``, then one ``{"test", "category", "reason", ...}`` per test, so the
runner knows which test was running when a worker died. ``setUpModule``/``setUpClass`` and
their tear-downs run around the tests they serve, outside any test's time; when one
raises, its tests are ``skip``.
"""

from __future__ import annotations

import argparse
import json
import sys
import unittest
import warnings
from typing import IO, Any

from conformance.classify import exception_line
from conformance.engines import Engine, Watch, make_engine
from conformance.worker import collect, import_tests, test_id

from . import shim
from .corpus import UPSTREAM, internals_reason, provide_removed_names, resolve
from .outcome import Result, run_test

__all__ = ["main", "run_file"]


def _fixture(fn: Any) -> str | None:
    """Run a module or class fixture; the reason its tests are skipped, if it raised."""
    if fn is None:
        return None
    try:
        fn()
    except BaseException as exc:
        if isinstance(exc, unittest.SkipTest):
            return str(exc)[:300]
        return f"fixture raised {exception_line(exc)}"[:300]
    return None


def _watch(engine: Engine) -> Watch | None:
    # Dynamo's watch in the conformance harness changes which frames Dynamo traces: the
    # upstream tests run under Dynamo as they are, so only sapwood's runs are watched.
    return engine.watch() if engine.name == "sapwood" else None


def run_file(
    file: str, engine_name: str, out: IO[str], timeout: float, keyword: str | None = None
) -> None:
    """Run every selected test of ``file`` under the engine; JSON lines to ``out``."""
    shim.install(engine_name)
    provide_removed_names()
    engine = make_engine(engine_name)
    engine.is_own_error(None)  # its package folders, worked out before any test runs
    if str(UPSTREAM) not in sys.path:
        sys.path.insert(0, str(UPSTREAM))  # a test file may import a sibling
    try:
        module = import_tests(str(resolve(file)))
        tests = [t for t in collect(module) if isinstance(t, tuple)]
    except BaseException as exc:
        out.write(json.dumps({"error": exception_line(exc)}) + "\n")
        out.flush()
        return
    ids = {id(t): test_id(t) for t in tests}
    tests = [t for t in tests if keyword is None or keyword in ids[id(t)]]
    out.write(json.dumps({"tests": [ids[id(t)] for t in tests]}) + "\n")
    out.flush()

    module_error = _fixture(getattr(module, "setUpModule", None))
    open_class: type[unittest.TestCase] | None = None
    class_error: str | None = None
    for index, test in enumerate(tests):
        cls, name = test
        reason = internals_reason(cls, name)
        if reason is not None:
            result = Result("internals", reason)
        else:
            if cls is not open_class:
                open_class = cls
                class_error = module_error or _fixture(cls.setUpClass)
            if class_error is not None:
                result = Result("skip", class_error)
            else:
                result = run_test(cls, name, engine, timeout, _watch(engine))
        record = {"test": ids[id(test)], "category": result.category}
        record.update(reason=result.reason, **result.details)
        out.write(json.dumps(record) + "\n")
        out.flush()
        following = tests[index + 1][0] if index + 1 < len(tests) else None
        if open_class is cls and following is not cls:
            if class_error is None:
                _fixture(cls.tearDownClass)
            open_class = None
    if module_error is None:
        _fixture(getattr(module, "tearDownModule", None))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_tests.worker")
    parser.add_argument("engine", choices=["sapwood", "dynamo"])
    parser.add_argument("file")
    parser.add_argument("results")
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("-k", dest="keyword", default=None)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # the logs are for crashes, not for torch's warnings
    with open(args.results, "w", encoding="utf-8") as out:
        run_file(args.file, args.engine, out, args.timeout, args.keyword)
    return 0


if __name__ == "__main__":
    sys.exit(main())
