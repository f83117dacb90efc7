"""Runs many generated programs through the oracle on worker processes and reports.

``python -m fuzz --count 10000 --seed 0`` (from ``integration-tests/``, or through
``nox -s fuzz``) runs the programs of seeds ``seed * 1_000_000 + i`` for ``i < count``,
prints progress and the counts, and writes every mismatch and crash to ``--out``: the
program's source, a stand-alone reproducer and the verdict. ``--only SEED [SEED ...]`` runs
those programs alone and prints their source and verdict in full.

Workers are separate processes (``spawn``); each program runs with an alarm (``--timeout``),
and a worker that dies or hangs past twice that is replaced, its program counted as a crash.
The exit status is 1 when any program mismatched or crashed (or the harness failed), else 0.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import queue
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import oracle
from .generator import Program, generate

__all__ = ["ERROR", "Summary", "main", "program_seeds", "run_many"]

ERROR = "error"  # the harness itself failed (generator, comparison, eager side hung)
KINDS = (oracle.MATCH, oracle.MISMATCH, oracle.CRASH, oracle.BOTH_RAISE, ERROR)
FAILURES = (oracle.MISMATCH, oracle.CRASH, ERROR)
SEED_STRIDE = 1_000_000


def program_seeds(seed: int, count: int) -> list[int]:
    """The seeds of a run: ``seed * 1_000_000 + i``, so each program reproduces alone."""
    if count > SEED_STRIDE:
        raise ValueError(f"at most {SEED_STRIDE} programs per run seed")
    return [seed * SEED_STRIDE + i for i in range(count)]


@dataclass
class Result:
    seed: int
    kind: str
    reason: str = ""
    detail: str = ""
    signature: str = ""
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # of the worker process (the host may be shared)
    features: list[str] = field(default_factory=list)


@dataclass
class Summary:
    counts: dict[str, int]
    results: list[Result]
    seconds: float

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if r.kind in FAILURES]


# ------------------------------------------------------------------ in a worker


class ProgramTimeout(BaseException):
    """Raised by the alarm in a worker (a BaseException: programs catch Exception)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise ProgramTimeout


def run_one(seed: int, timeout: float = 0) -> Result:
    """Generate and check the program of ``seed``; never raises."""
    started = time.perf_counter()
    cpu_started = time.process_time()
    features: list[str] = []
    try:
        program = generate(seed)
        features = sorted(program.features)
        if timeout:
            signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            verdict = oracle.run_program(program)
        finally:
            if timeout:
                signal.setitimer(signal.ITIMER_REAL, 0)
        result = Result(seed, verdict.kind, verdict.reason, verdict.detail, verdict.signature)
    except ProgramTimeout as exc:
        frames = traceback.format_exception(exc)
        if oracle.current_phase() == "compiled":
            result = Result(
                seed,
                oracle.CRASH,
                f"the compiled program ran past {timeout} s",
                "".join(frames),
                "crash timeout",
            )
        else:
            result = Result(
                seed, ERROR, f"the eager program ran past {timeout} s", "".join(frames), "timeout"
            )
    except Exception as exc:
        result = Result(
            seed,
            ERROR,
            f"harness error: {type(exc).__name__}: {exc}"[:300],
            "".join(traceback.format_exception(exc)),
            f"harness {type(exc).__name__}",
        )
    result.seconds = time.perf_counter() - started
    result.cpu_seconds = time.process_time() - cpu_started
    result.features = features
    return result


def _quiet() -> None:
    """Workers print nothing of their own: programs' output is captured by the oracle."""
    warnings.simplefilter("ignore")
    import logging

    logging.disable(logging.CRITICAL)


def _worker(tasks: Any, results: Any, timeout: float) -> None:
    _quiet()
    while True:
        seed = tasks.get()
        if seed is None:
            return
        results.put(("start", os.getpid(), seed))
        results.put(("done", os.getpid(), asdict(run_one(seed, timeout))))


# ------------------------------------------------------------------ in the parent


def run_many(
    seeds: Iterable[int],
    workers: int = 2,
    timeout: float = 60,
    progress: Any = None,
) -> Summary:
    """Run the programs of ``seeds`` on ``workers`` processes. ``progress(result, done,
    counts, seconds)`` is called after each program."""
    seeds = list(seeds)
    started = time.perf_counter()
    counts = {kind: 0 for kind in KINDS}
    results: list[Result] = []

    def record(result: Result) -> None:
        results.append(result)
        counts[result.kind] += 1
        if progress is not None:
            progress(result, len(results), counts, time.perf_counter() - started)

    if workers <= 1:
        _quiet()
        for seed in seeds:
            record(run_one(seed, timeout))
        return Summary(counts, results, time.perf_counter() - started)

    context = multiprocessing.get_context("spawn")
    tasks = context.Queue()
    done_queue = context.Queue()
    for seed in seeds:
        tasks.put(seed)
    procs: dict[int, Any] = {}
    running: dict[int, tuple[int, float]] = {}  # pid -> (seed, started)

    def spawn() -> None:
        proc = context.Process(target=_worker, args=(tasks, done_queue, timeout), daemon=True)
        proc.start()
        procs[proc.pid] = proc

    for _ in range(min(workers, len(seeds))):
        spawn()
    try:
        while len(results) < len(seeds):
            try:
                message = done_queue.get(timeout=1.0)
            except queue.Empty:
                message = None
            if message is not None:
                if message[0] == "start":
                    running[message[1]] = (message[2], time.perf_counter())
                else:
                    running.pop(message[1], None)
                    record(Result(**message[2]))
                continue
            for pid, proc in list(procs.items()):
                seed_started = running.get(pid)
                hung = (
                    seed_started is not None
                    and timeout
                    and time.perf_counter() - seed_started[1] > 2 * timeout + 30
                )
                if proc.is_alive() and not hung:
                    continue
                if hung:
                    proc.kill()
                    proc.join()
                del procs[pid]
                if seed_started is not None:
                    running.pop(pid)
                    why = "hung" if hung else f"died with exit code {proc.exitcode}"
                    record(
                        Result(
                            seed_started[0],
                            oracle.CRASH,
                            f"the worker {why}",
                            "",
                            f"crash worker {why.split()[0]}",
                        )
                    )
                    spawn()
    finally:
        for _ in procs:
            tasks.put(None)
        for proc in procs.values():
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
    results.sort(key=lambda r: r.seed)
    return Summary(counts, results, time.perf_counter() - started)


# ------------------------------------------------------------------ reporting


def _reproducer(program: Program, result: Result) -> str:
    fuzz_parent = str(Path(__file__).resolve().parent.parent)
    return f'''"""Reproduces sapwood fuzz program {program.seed} ({result.kind}).

{result.reason}

Runs the program eagerly and through sapwood.compile(backend="eager") and prints the verdict.
"""

import sys

sys.path.insert(0, {fuzz_parent!r})

from fuzz.generator import CallSpec, Program
from fuzz.oracle import run_program

SOURCE = {program.source!r}

PROGRAM = Program(
    seed={program.seed},
    source=SOURCE,
    entry={program.entry!r},
    calls={program.calls!r},
    features=frozenset(),
)

if __name__ == "__main__":
    verdict = run_program(PROGRAM)
    print(verdict.kind, verdict.reason)
    print(verdict.detail)
    sys.exit(0 if verdict.kind in ("match", "both-raise") else 1)
'''


def write_failure(out: Path, result: Result) -> Path:
    program = generate(result.seed)
    folder = out / f"{result.kind}-{result.seed}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "program.py").write_text(program.source)
    (folder / "repro.py").write_text(_reproducer(program, result))
    (folder / "verdict.txt").write_text(
        f"{result.kind}: {result.reason}\nsignature: {result.signature}\n"
        f"calls: {program.calls}\n\n{result.detail}\n"
    )
    return folder


def format_counts(counts: dict[str, int]) -> str:
    return "  ".join(f"{kind} {counts[kind]}" for kind in KINDS if counts[kind] or kind != ERROR)


def report(summary: Summary, out: Path | None, file: Any = sys.stdout) -> None:
    """Print the counts, failure groups, feature coverage; name ``out`` if failures went there."""
    n = len(summary.results)
    cpu = sum(r.cpu_seconds for r in summary.results)
    print(
        f"\nsapwood fuzz: {n} programs in {summary.seconds:.0f} s "
        f"({cpu:.0f} CPU-seconds in the workers, {cpu / max(n, 1):.2f} per program)",
        file=file,
    )
    for kind in KINDS:
        print(f"  {kind:<11} {summary.counts[kind]:>6}", file=file)
    groups: dict[str, list[Result]] = collections.defaultdict(list)
    for result in summary.failures:
        groups[result.signature].append(result)
    if groups:
        print("\nfailure groups (count, signature, first seeds):", file=file)
        for signature, members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            seeds = ", ".join(str(r.seed) for r in members[:4])
            print(f"  {len(members):>5}  {signature}  [{seeds}]", file=file)
    features: collections.Counter[str] = collections.Counter()
    for result in summary.results:
        features.update(result.features)
    if features:
        print("\nprograms using each feature:", file=file)
        for name, count in sorted(features.items()):
            print(f"  {name:<28} {count:>6}", file=file)
    slowest = sorted(summary.results, key=lambda r: -r.seconds)[:3]
    print(
        "\nslowest programs: " + ", ".join(f"{r.seed} ({r.seconds:.1f} s)" for r in slowest),
        file=file,
    )
    if out is not None and summary.failures:
        print(f"failing programs and reproducers written to {out}/", file=file)


def _only(seeds: list[int], timeout: float) -> int:
    _quiet()
    failed = 0
    for seed in seeds:
        program = generate(seed)
        print(f"# ---- program {seed} ({program.entry} entry), calls {program.calls}")
        print(program.source)
        result = run_one(seed, timeout)
        print(f"# verdict: {result.kind} {result.reason}")
        if result.detail:
            print(result.detail)
        failed += result.kind in FAILURES
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=10_000, help="programs to run")
    parser.add_argument("--seed", type=int, default=0, help="run seed (programs seed*10^6+i)")
    parser.add_argument("--only", type=int, nargs="+", help="run these program seeds alone")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60, help="seconds per program")
    parser.add_argument("--out", type=Path, default=Path("fuzz-results"))
    parser.add_argument("--json", type=Path, help="also write the summary as JSON here")
    args = parser.parse_args(argv)
    if args.only:
        return _only(args.only, args.timeout)

    seeds = program_seeds(args.seed, args.count)
    step = max(1, min(500, args.count // 10))

    def progress(result: Result, done: int, counts: dict[str, int], seconds: float) -> None:
        if result.kind in FAILURES:
            write_failure(args.out, result)  # at once: a long run can be read while it goes
        if done % step == 0 or done == len(seeds):
            rate = done / seconds if seconds else 0.0
            print(
                f"  {done:>6}/{len(seeds)}  {format_counts(counts)}  ({seconds:.0f} s, {rate:.1f}/s)",
                flush=True,
            )

    print(
        f"sapwood fuzz: {args.count} programs, seed {args.seed}, {args.workers} workers", flush=True
    )
    summary = run_many(seeds, args.workers, args.timeout, progress)
    report(summary, args.out)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "seed": args.seed,
                    "count": args.count,
                    "seconds": summary.seconds,
                    "counts": summary.counts,
                    "failures": [
                        {k: v for k, v in asdict(r).items() if k != "detail"}
                        for r in summary.failures
                    ],
                },
                indent=1,
            )
        )
    return 1 if any(summary.counts[k] for k in FAILURES) else 0
