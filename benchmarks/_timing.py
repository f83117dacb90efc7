"""Timing and table helpers shared by the benchmark programs.

Every figure is the median of several repeats, each repeat timing many calls; figures are
printed next to the reference measured in the same process, with their ratio.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def per_call_seconds(
    fn: Callable[[], Any],
    *,
    calls: int,
    repeats: int = 5,
    sync: Callable[[], None] | None = None,
) -> float:
    """Median over ``repeats`` of the mean wall time of one of ``calls`` back-to-back calls."""
    samples = []
    for _ in range(repeats):
        if sync:
            sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        if sync:
            sync()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def once_seconds(fn: Callable[[], Any], sync: Callable[[], None] | None = None) -> float:
    if sync:
        sync()
    start = time.perf_counter()
    fn()
    if sync:
        sync()
    return time.perf_counter() - start


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:8.2f} ms"
    return f"{seconds:8.2f} s "


def ratio(value: float | None, reference: float | None) -> str:
    if value is None or not reference:
        return "n/a"
    return f"{value / reference:6.2f}x"


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def write_json(out: Path, name: str, data: dict[str, Any]) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(data, indent=2, default=str))
    return data


def tree_functions(device_index: int = 0) -> list[str]:
    """One line per function of sapwood's CUDA graph tree on a device: warm-ups, recordings,
    replays, and its eager runs with their reasons."""
    import sapwood_cudagraph_trees

    info = sapwood_cudagraph_trees.tree_info(device_index)
    return [
        f"{f.name} ({f.mode}): {f.warmups} warm-ups, {f.recordings} recordings, "
        f"{f.replays} replays, eager runs {dict(f.fallbacks)}"
        + (f", eager because {f.eager_reason}" if f.eager_reason else "")
        for f in info.functions
    ]
