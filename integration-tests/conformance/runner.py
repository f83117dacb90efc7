"""``python -m conformance``: CPython's regression tests, eagerly and compiled.

    python -m conformance [--engine sapwood dynamo eager] [--files test_dict ...]
        [--match REGEX] [--jobs N] [--timeout S] [--file-timeout S] [--out DIR]
        [--docs PATH] [--no-fail]

Every (file, engine) pair runs in its own worker process (:mod:`conformance.worker`), so
a segfault or a hang costs that file only: the tests that got no result are ``crash``,
the one that was running named in the reason. ``--jobs`` workers run at once.

Prints each engine's counts per file side by side and the totals, writes
``DIR/results.json`` (rewritten after each file, so an interrupted run leaves what it
did) and the workers' output in ``DIR/logs/``, and with ``--docs`` the Markdown page.
Exits 1 when sapwood has a ``wrong`` or a ``crash``, unless ``--no-fail``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .report import markdown, text_table

__all__ = ["DEFAULT_FILES", "main", "run_worker"]

DEFAULT_FILES = [
    "test_dict",
    "test_list",
    "test_tuple",
    "test_set",
    "test_sort",
    "test_iter",
    "test_enumerate",
    "test_exceptions",
    "test_raise",
    "test_with",
    "test_contextlib",
    "test_generators",
    "test_genexps",
    "test_listcomps",
    "test_setcomps",
    "test_dictcomps",
    "test_scope",
    "test_unpack",
    "test_unpack_ex",
    "test_augassign",
    "test_keywordonlyarg",
    "test_class",
    "test_descr",
    "test_super",
    "test_property",
    "test_bool",
    "test_int",
    "test_float",
    "test_math",
    "test_operator",
    "test_functools",
    "test_itertools",
    "test_collections",
    "test_dataclasses",
    "test_enum",
    "test_string",
    "test_builtin",
    "test_grammar",
]
HERE = Path(__file__).resolve().parent


def _death(returncode: int | None, file_timeout: float) -> str:
    if returncode is None:
        return f"the file ran past its {file_timeout:g} s"
    if returncode < 0:
        return f"the worker died of {signal.Signals(-returncode).name}"
    return f"the worker exited with status {returncode}"


def run_worker(
    engine: str,
    file: str,
    out_dir: Path,
    timeout: float,
    file_timeout: float,
    match: str | None = None,
) -> list[dict[str, Any]]:
    """Run one file under one engine in a new process; one result per test."""
    extra = ["--match", match] if match else []
    lines_path, returncode = spawn_worker(
        "conformance.worker", engine, file, out_dir, timeout, file_timeout, extra
    )
    return _read_results(engine, file, lines_path, returncode, file_timeout)


def spawn_worker(
    module: str,
    engine: str,
    file: str,
    out_dir: Path,
    timeout: float,
    file_timeout: float,
    extra: list[str],
) -> tuple[Path, int | None]:
    """``python -m module engine file LINES --timeout T *extra`` in a new process group, its
    output in ``out_dir/logs``, killed after ``file_timeout`` seconds: the JSON lines file it
    wrote (one result per line) and its exit status (None: killed)."""
    logs = out_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    label = f"{engine}-{Path(file).stem}"
    lines_path = logs / f"{label}.jsonl"
    command = [sys.executable, "-m", module, engine, file, str(lines_path)]
    command += ["--timeout", str(timeout), *extra]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
    # one string hashing for every run (unless the caller chose one): a set of strings
    # iterates in an order its hashes decide, and whether a traced set can be rebuilt in that
    # order, hence "passed" or "fallback", would change from run to run
    env.setdefault("PYTHONHASHSEED", "0")
    lines_path.unlink(missing_ok=True)
    with open(logs / f"{label}.log", "wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            returncode: int | None = process.wait(timeout=file_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            returncode = None
    return lines_path, returncode


def _read_results(
    engine: str, file: str, path: Path, returncode: int | None, file_timeout: float
) -> list[dict[str, Any]]:
    tests: list[str] = []
    results: list[dict[str, Any]] = []
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            break  # the last line, cut short by the death of the worker
        if "error" in record:
            reason = f"the file did not import: {record['error']}"
            return [dict(engine=engine, file=file, test="<module>", category="skip", reason=reason)]
        if "tests" in record:
            tests = record["tests"]
        else:
            results.append(dict(engine=engine, file=file, **record))
    if len(results) < len(tests) or (returncode != 0 and not tests):
        death = _death(returncode, file_timeout)
        done = len(results)
        if not tests:
            tests = ["<module>"]
        running = tests[done] if done < len(tests) else tests[-1]
        for test in tests[done:]:
            reason = f"{death} while running {running}"
            if test != running:
                reason = f"not run: {reason}"
            results.append(
                dict(engine=engine, file=file, test=test, category="crash", reason=reason)
            )
    return results


def versions() -> dict[str, str]:
    import torch

    import sapwood_tracer

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "sapwood": sapwood_tracer.__version__,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m conformance", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--engine", nargs="+", default=["sapwood", "dynamo"], choices=["sapwood", "dynamo", "eager"]
    )
    parser.add_argument(
        "--files",
        nargs="+",
        default=list(DEFAULT_FILES),
        help="CPython test files (test_dict) or dotted module names",
    )
    parser.add_argument("--match", default=None, help="run the tests whose Class.method matches")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes at once")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per test run")
    parser.add_argument("--file-timeout", type=float, default=900.0, help="seconds per file")
    parser.add_argument("--out", type=Path, default=Path("conformance-results"))
    parser.add_argument("--docs", type=Path, default=None, help="write the Markdown page here")
    parser.add_argument(
        "--no-fail", action="store_true", help="exit 0 even with sapwood wrong/crash"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = run_meta("conformance", argv, args)
    jobs = [(file, engine) for file in args.files for engine in args.engine]
    done: dict[tuple[str, str], list[dict[str, Any]]] = {}
    lock = threading.Lock()

    def one(job: tuple[str, str]) -> None:
        file, engine = job
        found = run_worker(engine, file, args.out, args.timeout, args.file_timeout, args.match)
        with lock:
            done[job] = found
            if not found:  # the worker collected no test (none matched, or none there)
                meta["no_tests"] = sorted({*meta.get("no_tests", ()), file})
            results = [r for j in jobs if j in done for r in done[j]]
            write_results(args.out / "results.json", meta, results)
        counts = {c: sum(r["category"] == c for r in found) for c in ("passed", "wrong", "crash")}
        print(f"{engine:8s} {file}: {len(found)} tests, {counts}", flush=True)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, jobs))
    results = [r for j in jobs for r in done[j]]
    print(text_table(results))
    if args.docs is not None:
        args.docs.write_text(markdown(results, meta), encoding="utf-8")
    bad = [r for r in results if r["engine"] == "sapwood" and r["category"] in ("wrong", "crash")]
    return 1 if bad and not args.no_fail else 0


def run_meta(program: str, argv: list[str] | None, args: argparse.Namespace) -> dict[str, Any]:
    """What a run records about itself: when, the versions, the command, its settings."""
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        **versions(),
        "command": f"python -m {program} " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "timeout": args.timeout,
        "engines": args.engine,
        "files": args.files,
    }


def write_results(path: Path, meta: dict[str, Any], results: list[dict[str, Any]]) -> None:
    """``{"meta": ..., "results": ...}`` written to ``path`` whole (through a temporary file)."""
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps({"meta": meta, "results": results}, indent=1), encoding="utf-8")
    partial.replace(path)
