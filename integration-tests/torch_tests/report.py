"""Counts side by side, the commonest reasons, and the generated ``docs/torch-tests.md``.

A result is a dict ``{"engine", "file", "test", "category", "reason", ...}``; a results file
(``results.json``, written by the runner) is ``{"meta": {...}, "results": [...]}``.
``python -m torch_tests.report RESULTS.json --docs PATH`` renders the page again from a
results file, e.g. one left by a run that was cut short.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from typing import Any

from conformance.report import count, counts_table, escape, order_of, totals

from .outcome import CATEGORIES

__all__ = ["common_reasons", "count", "markdown", "text_table"]

_SHORT = {
    "passed": "pass",
    "count": "count",
    "wrong": "wrong",
    "unsupported": "unsup",
    "crash": "crash",
    "failed": "fail",
    "skip": "skip",
    "internals": "intern",
    "no-compile": "nocomp",
}


def _engines(results: list[dict[str, Any]]) -> list[str]:
    found = order_of(results, "engine")
    return [e for e in ("sapwood", "dynamo") if e in found] + [
        e for e in found if e not in ("sapwood", "dynamo")
    ]


def text_table(results: list[dict[str, Any]]) -> str:
    """Per-file counts of each engine side by side, and the totals."""
    return counts_table(results, _engines(results), CATEGORIES, _SHORT, 6)


def _normalize(reason: str) -> str:
    """A reason without what differs from test to test: paths, line numbers, the test's own
    local names, addresses, numbers."""
    text = re.sub(r"\[.*\]$", "", reason)  # the failing statement of an assertion
    text = re.sub(r"^sapwood_tracer\.errors\.Unsupported: sapwood cannot capture ", "", text)
    text = re.sub(r" With fullgraph=True this is an error.*", "", text)  # sapwood's boilerplate
    text = re.sub(r"(/[\w.\-]+)+\.py(:\d+)?", "FILE", text)
    text = re.sub(r",? (at|reached from) FILE", "", text)
    text = re.sub(r"(,? reached from /\S*| With f\w*)$", "", text)  # cut short at 300
    text = re.sub(r"\b\w+\.test_\w+\.<locals>\.", "", text)
    text = re.sub(r"0x[0-9a-f]+", "ADDR", text)
    text = re.sub(r"\b\d+(\.\d+)?\b", "N", text)
    text = re.sub(r"graph break at \S+: ", "graph break: ", text)
    return " ".join(text.split())[:160]


def failure_reason(result: dict[str, Any]) -> str:
    """What made a test fail: the first part that ran eagerly, for a count; else the error."""
    eager = result.get("eager") or []
    if result["category"] in ("count", "no-compile") and eager:
        return _normalize(eager[0])
    return _normalize(result.get("reason", "")) or result["category"]


def common_reasons(
    results: list[dict[str, Any]], engine: str = "sapwood", reference: str = "dynamo", top: int = 15
) -> list[tuple[str, int, list[str]]]:
    """The commonest reasons why ``engine`` did not pass a test that ``reference`` passed:
    (reason, how many tests, a few of them)."""
    passed = {
        (r["file"], r["test"])
        for r in results
        if r["engine"] == reference and r["category"] == "passed"
    }
    grouped: dict[str, list[str]] = {}
    for r in results:
        if r["engine"] != engine or (r["file"], r["test"]) not in passed:
            continue
        if r["category"] == "passed":
            continue
        key = f"{r['category']}: {failure_reason(r)}"
        grouped.setdefault(key, []).append(f"{r['file']}::{r['test']}")
    ranked = sorted(grouped.items(), key=lambda item: (-len(item[1]), item[0]))
    return [(reason, len(tests), tests[:3]) for reason, tests in ranked[:top]]


_METHOD = (
    "Each test method of the upstream files runs once per engine, in a worker process per "
    "file and engine, through unittest's own `TestCase.run`. The tests check themselves (they "
    "compare with eager and count frames and ops); what changes between the engines is where "
    "the compile entry points go: for *dynamo* they are Dynamo's own, for *sapwood* "
    "`torch.compile`, `torch._dynamo.optimize`/`optimize_assert`, `reset` and the markers "
    "(`disable`, `graph_break`, `allow_in_graph`, `mark_dynamic`) call sapwood's, with the "
    "same backend object (a `CompileCounter` sees sapwood's graphs); the tests' stand-in "
    "for code no compiler traces, `torch._dynamo.testing.unsupported` (a C function adding "
    "two tensors, which sapwood could run on fake tensors), is marked `disable`-d for "
    "sapwood, so the breaks the tests check happen. Categories: *passed*: "
    "the test ran to its end and asked for at least one compilation; *count*: only an "
    "assertion on a count failed (frames, ops, graphs, a graph's text: a graph break or a "
    "graph shaped differently, not a wrong answer); *wrong*: another assertion failed (a "
    "value compared with eager, an expected exception not raised); *unsupported*: the engine "
    "refused a construct where `fullgraph=True` asked for one graph; *crash*: the engine's "
    "own code raised, or the test ran past the per-test timeout; *failed*: the test raised "
    "something else; *skip*: skipped (needs CUDA, a missing package, an expected failure "
    "upstream); *internals*: the test reads Dynamo's internals (counters, config knobs, guard "
    "hooks, logs, `explain`, its exception classes, export) and is not counted as pass or "
    "fail, for either engine; *no-compile*: the test never asked for a compilation. Some "
    "upstream files are older than torch 2.13 and import test helpers it removed "
    "(`ifdyn`, `requires_numpy_pytorch_interop`, ...); the harness puts those names back "
    "before the import (`torch_tests.corpus.provide_removed_names`), for both engines."
)


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The page: how it was made, counts per file, reasons, sapwood's wrong and crash."""
    engines, files = _engines(results), order_of(results, "file")
    table = count(results)
    out = [
        "# PyTorch's Dynamo tests, run by sapwood and by Dynamo",
        "",
        "Generated by `python -m torch_tests` (`integration-tests/torch_tests`, "
        "`nox -s torch-tests`); do not edit by hand.",
        "",
        "The corpus is a set of PyTorch's own `test/dynamo/test_*.py` files, unchanged "
        "(`integration-tests/torch_tests/upstream/`, whose README names the commit of each). "
        + _METHOD,
        "",
        f"- date: {meta.get('date', '?')}",
        f"- Python {meta.get('python', '?')}, torch {meta.get('torch', '?')}, "
        f"sapwood-tracer {meta.get('sapwood', '?')}",
        f"- command: `{meta.get('command', '?')}`",
        f"- per-test timeout: {meta.get('timeout', '?')} s; wall time: "
        f"{meta.get('wall_seconds', '?')} s",
    ]
    missing = [f for f in meta.get("files", files) if f not in files]
    if missing:
        out.append(f"- **partial run**: not run: {', '.join(missing)}")
    for engine in engines:
        out += ["", f"## {engine}", ""]
        out += _table(table, files, engine)
    out += ["", "## Side by side: passed", ""]
    out.append("| file | " + " | ".join(engines) + " |")
    out.append("|" + "---|" * (1 + len(engines)))
    for f in [*files, "**total**"]:
        cells = [
            str((totals(table, e) if f == "**total**" else table.get((e, f), Counter()))["passed"])
            for e in engines
        ]
        out.append(f"| {f} | " + " | ".join(cells) + " |")
    if "sapwood" in engines and "dynamo" in engines:
        out += ["", "## Why sapwood did not pass tests Dynamo passes (commonest first)", ""]
        out += ["| tests | category: reason | e.g. |", "|---|---|---|"]
        for reason, n, tests in common_reasons(results):
            out.append(f"| {n} | {escape(reason)} | {escape(tests[0])} |")
    for category in ("wrong", "crash"):
        listed = [r for r in results if r["engine"] == "sapwood" and r["category"] == category]
        out += ["", f"## sapwood {category} ({len(listed)})", ""]
        if not listed:
            out.append("None.")
        for r in listed:
            out.append(f"- `{r['file']}` `{r['test']}`: {escape(r['reason'])}")
    return "\n".join(out) + "\n"


def _table(table: dict[tuple[str, str], Counter[str]], files: list[str], engine: str) -> list[str]:
    out = ["| file | " + " | ".join(CATEGORIES) + " |", "|" + "---|" * (1 + len(CATEGORIES))]
    for f in [*files, "**total**"]:
        counts = totals(table, engine) if f == "**total**" else table.get((engine, f), Counter())
        out.append(f"| {f} | " + " | ".join(str(counts[c]) for c in CATEGORIES) + " |")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_tests.report")
    parser.add_argument("results", help="a results.json written by python -m torch_tests")
    parser.add_argument("--docs", required=True, help="where the Markdown page goes")
    args = parser.parse_args(argv)
    with open(args.results, encoding="utf-8") as file:
        data = json.load(file)
    with open(args.docs, "w", encoding="utf-8") as file:
        file.write(markdown(data["results"], data["meta"]))
    print(text_table(data["results"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
