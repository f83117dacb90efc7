"""A recompile's reason names the guard that failed and what the call held there."""

from __future__ import annotations

import warnings

import torch

import sapwood_tracer
from sapwood_tracer.api import events


def _reasons(fn, calls):
    sapwood_tracer.reset()
    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward, dynamic=False)
    seen = []

    def listen(kind, data):
        if kind == "recompile":
            seen.append(data["guard"])

    stop = events.listen(listen)
    try:
        for args in calls:
            compiled(*args)
    finally:
        stop()
    return seen


def test_a_tensor_guard_names_what_differs() -> None:
    def fn(x):
        return x * 2

    reasons = _reasons(
        fn, [(torch.ones(8),), (torch.ones(8, dtype=torch.float64),), (torch.ones(2, 9),)]
    )
    assert reasons[0].endswith("; seen: dtype float64 (expected float32)")
    assert reasons[1].endswith("; seen: 2 dims (expected 1)")


def test_a_constant_guard_shows_the_value() -> None:
    def fn(x, n):
        return x * n

    reasons = _reasons(fn, [(torch.ones(2), 2), (torch.ones(2), 3)])
    assert reasons == ["L['n'] == 2; seen: 3"]


def test_the_limit_warning_carries_the_value_seen() -> None:
    def fn(x, n):
        return x * n

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward, dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(10):
            compiled(torch.ones(2), n)
    limit = [w for w in caught if issubclass(w.category, sapwood_tracer.RecompileLimitWarning)]
    assert len(limit) == 1 and "; seen: " in str(limit[0].message)
