"""``python -m torch_tests``: PyTorch's own Dynamo tests, compiled by sapwood and by Dynamo.

    python -m torch_tests [--engine sapwood dynamo] [--files test_dicts ...] [-k SUBSTRING]
        [--jobs N] [--timeout S] [--file-timeout S] [--out DIR] [--docs PATH] [--no-fail]

Every (file, engine) pair runs in its own worker process (:mod:`torch_tests.worker`), so a
segfault or a hang costs that file only: the tests that got no result are ``crash``, the one
that was running named in the reason. ``--jobs`` workers run at once.

A test found to read Dynamo's internals in one engine's run (an entry point only Dynamo
has) is ``internals`` for every engine (its own outcome kept as ``ran_as``). Prints each
engine's counts per file side by side and the totals, writes ``DIR/results.json``
(rewritten after each file) and the workers' output in ``DIR/logs/``, and with ``--docs``
the Markdown page. Exits 1 when sapwood has a ``wrong`` or a ``crash``, unless ``--no-fail``.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from conformance.runner import run_meta, spawn_worker, write_results

from .corpus import DEFAULT_FILES
from .report import markdown, text_table

__all__ = ["main", "merge_internals", "read_results", "run_worker"]

HERE = Path(__file__).resolve().parent


def run_worker(
    engine: str,
    file: str,
    out_dir: Path,
    timeout: float,
    file_timeout: float,
    keyword: str | None = None,
) -> list[dict[str, Any]]:
    """Run one file under one engine in a new process; one result per test."""
    extra = ["-k", keyword] if keyword else []
    lines_path, returncode = spawn_worker(
        "torch_tests.worker", engine, file, out_dir, timeout, file_timeout, extra
    )
    lines = lines_path.read_text(encoding="utf-8").splitlines() if lines_path.exists() else []
    return read_results(engine, Path(file).stem, lines, _death(returncode, file_timeout))


def _death(returncode: int | None, file_timeout: float) -> str | None:
    if returncode == 0:
        return None
    if returncode is None:
        return f"the file ran past its {file_timeout:g} s"
    if returncode < 0:
        return f"the worker died of {signal.Signals(-returncode).name}"
    return f"the worker exited with status {returncode}"


def read_results(
    engine: str, file: str, lines: list[str], death: str | None
) -> list[dict[str, Any]]:
    """The results a worker's JSON lines hold; the tests it did not reach are ``crash``."""
    tests: list[str] = []
    results: list[dict[str, Any]] = []
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
    if len(results) < len(tests) or (death and not tests):
        death = death or "the worker stopped early"
        running = tests[len(results)] if len(results) < len(tests) else "<module>"
        for test in tests[len(results) :] or ["<module>"]:
            reason = f"{death} while running {running}"
            if test != running:
                reason = f"not run: {reason}"
            results.append(
                dict(engine=engine, file=file, test=test, category="crash", reason=reason)
            )
    return results


def merge_internals(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A test one engine's run found to read internals is ``internals`` for every engine."""
    found = {(r["file"], r["test"]): r for r in results if r["category"] == "internals"}
    merged = []
    for r in results:
        first = found.get((r["file"], r["test"]))
        if first is not None and r["category"] != "internals":
            r = dict(r, ran_as=r["category"], category="internals")
            r["reason"] = f"{first['reason']} (found in the {first['engine']} run)"
        merged.append(r)
    return merged


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m torch_tests", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--engine", nargs="+", default=["sapwood", "dynamo"], choices=["sapwood", "dynamo"]
    )
    parser.add_argument(
        "--files", nargs="+", default=list(DEFAULT_FILES), help="upstream files (test_dicts)"
    )
    parser.add_argument(
        "-k", dest="keyword", default=None, help="run the tests whose Class.method contains this"
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes at once")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per test")
    parser.add_argument("--file-timeout", type=float, default=1200.0, help="seconds per file")
    parser.add_argument("--out", type=Path, default=Path("torch-tests-results"))
    parser.add_argument("--docs", type=Path, default=None, help="write the Markdown page here")
    parser.add_argument(
        "--no-fail", action="store_true", help="exit 0 even with sapwood wrong/crash"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    meta = run_meta("torch_tests", argv, args)
    jobs = [(file, engine) for file in args.files for engine in args.engine]
    done: dict[tuple[str, str], list[dict[str, Any]]] = {}
    lock = threading.Lock()

    def one(job: tuple[str, str]) -> None:
        file, engine = job
        found = run_worker(engine, file, args.out, args.timeout, args.file_timeout, args.keyword)
        with lock:
            done[job] = found
            results = merge_internals([r for j in jobs if j in done for r in done[j]])
            write_results(args.out / "results.json", meta, results)
        counts = {c: sum(r["category"] == c for r in found) for c in ("passed", "wrong", "crash")}
        print(f"{engine:8s} {file}: {len(found)} tests, {counts}", flush=True)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, jobs))
    results = merge_internals([r for j in jobs for r in done[j]])
    meta["wall_seconds"] = round(time.monotonic() - started)
    write_results(args.out / "results.json", meta, results)
    print(text_table(results))
    if args.docs is not None:
        args.docs.write_text(markdown(results, meta), encoding="utf-8")
    bad = [r for r in results if r["engine"] == "sapwood" and r["category"] in ("wrong", "crash")]
    return 1 if bad and not args.no_fail else 0
