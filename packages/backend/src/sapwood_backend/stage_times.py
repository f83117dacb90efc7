"""The seconds each stage of a backend's compile took, noted on the graph for the front end
(``gm.meta[sapwood_graph.STAGE_TIMES_META_KEY]``): ``aot_autograd`` (tracing the forward and
backward, partitioning) and ``inductor`` (generating and compiling code, or loading it from
Inductor's caches).

Inductor's share is read from torch's own per-phase timers (``compilation_time_metrics``:
``compile_fx_inner``, and ``AOTAutogradCache.inductor_load`` on a cache hit), the difference
before and after the compile; AOT autograd's is the rest of the compile. Where torch's timers
are missing (another torch), only the whole is known and it counts as AOT autograd's.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator

import torch

from sapwood_graph import STAGE_TIMES_META_KEY

__all__ = ["timed_stages"]

_INDUCTOR_PHASES = ("compile_fx_inner", "AOTAutogradCache.inductor_load")


def _inductor_seconds() -> float:
    utils = sys.modules.get("torch._dynamo.utils")
    metrics = getattr(utils, "compilation_time_metrics", None)
    if not isinstance(metrics, dict):
        return 0.0
    return float(sum(sum(metrics.get(phase, ())) for phase in _INDUCTOR_PHASES))


@contextlib.contextmanager
def timed_stages(gm: torch.fx.GraphModule) -> Iterator[None]:
    """Note on ``gm`` how long the compile inside the block spent in AOT autograd and in
    Inductor (added to what is there: a backend may compile one graph in pieces)."""
    before = _inductor_seconds()
    start = time.perf_counter()
    try:
        yield
    finally:
        total = time.perf_counter() - start
        inductor = max(0.0, _inductor_seconds() - before)
        times = gm.meta.setdefault(STAGE_TIMES_META_KEY, {})
        times["aot_autograd"] = times.get("aot_autograd", 0.0) + max(0.0, total - inductor)
        if inductor:
            times["inductor"] = times.get("inductor", 0.0) + inductor
