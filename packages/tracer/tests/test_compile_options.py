"""torch.compile's per-call options: ``recompile_limit``, ``isolate_recompiles`` and ``name``,
and torch's ``fail_on_recompile_limit_hit``; each compared with eager on every call."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import RecompileLimitExceeded, RecompileLimitWarning

X = torch.arange(4.0)


def _limit_warnings(caught):
    return [w for w in caught if issubclass(w.category, RecompileLimitWarning)]


def test_a_compiles_own_recompile_limit_is_obeyed(backend, same):
    def fn(x, n):
        return x * n

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=False, recompile_limit=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(6):
            same(compiled(X, n), X * n)
    assert backend.count == 3
    (warning,) = _limit_warnings(caught)
    assert "recompile limit (3 variants)" in str(warning.message)
    assert warning.filename == __file__


def test_the_compiles_limit_comes_before_torchs_config(backend, same):
    import torch._dynamo.config as dynamo_config

    def fn(x, n):
        return x + n

    old = dynamo_config.recompile_limit
    dynamo_config.recompile_limit = 5
    try:
        compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=False, recompile_limit=1)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            for n in range(4):
                same(compiled(X, n), X + n)
    finally:
        dynamo_config.recompile_limit = old
    assert backend.count == 1


def test_fullgraph_past_the_limit_raises_instead_of_running_eagerly(backend, same):
    def fn(x, n):
        return x - n

    compiled = sapwood_tracer.compile(
        fn, backend=backend, dynamic=False, fullgraph=True, recompile_limit=2
    )
    same(compiled(X, 1), X - 1)
    same(compiled(X, 2), X - 2)
    with pytest.raises(RecompileLimitExceeded, match=r"L\['n'\] == 2; seen: 3"):
        compiled(X, 3)
    same(compiled(X, 1), X - 1)  # the compiled variants still serve their calls


def test_torchs_fail_on_recompile_limit_hit_raises(backend, same):
    import torch._dynamo.config as dynamo_config

    def fn(x, n):
        return x * n + 1

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=False, recompile_limit=1)
    same(compiled(X, 1), X + 1)
    old = dynamo_config.fail_on_recompile_limit_hit
    dynamo_config.fail_on_recompile_limit_hit = True
    try:
        with pytest.raises(RecompileLimitExceeded):
            compiled(X, 2)
    finally:
        dynamo_config.fail_on_recompile_limit_hit = old


def test_compiles_share_variants_unless_isolated(backend, same):
    def fn(x):
        return x.sin()

    first = sapwood_tracer.compile(fn, backend=backend)
    second = sapwood_tracer.compile(fn, backend=backend)
    same(first(X), X.sin())
    same(second(X), X.sin())
    assert backend.count == 1  # the second compile used the first one's variant
    isolated = sapwood_tracer.compile(fn, backend=backend, isolate_recompiles=True)
    same(isolated(X), X.sin())
    assert backend.count == 2


def test_an_isolated_compile_has_a_limit_of_its_own(backend, same):
    def fn(x, n):
        return x * n - 1

    shared = sapwood_tracer.compile(fn, backend=backend, dynamic=False, recompile_limit=2)
    for n in range(2):
        same(shared(X, n), X * n - 1)
    isolated = sapwood_tracer.compile(
        fn, backend=backend, dynamic=False, recompile_limit=2, isolate_recompiles=True
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(2, 4):
            same(isolated(X, n), X * n - 1)
    assert backend.count == 4 and not _limit_warnings(caught)


def test_the_name_labels_the_compiles_captures_in_the_logs(backend, caplog):
    def fn(x):
        return x.cos()

    compiled = sapwood_tracer.compile(fn, backend=backend, name="decoder-step")
    sapwood_tracer.set_logs(guards=True)
    try:
        with caplog.at_level(logging.INFO, logger="sapwood"):
            compiled(X)
    finally:
        sapwood_tracer.set_logs()
    assert "fn [decoder-step]" in caplog.text


@pytest.mark.parametrize(
    "options",
    [{"recompile_limit": -1}, {"recompile_limit": 2.0}, {"recompile_limit": True}, {"name": 3}],
)
def test_bad_options_are_refused_before_anything_is_traced(backend, options):
    with pytest.raises(TypeError):
        sapwood_tracer.compile(lambda x: x, backend=backend, **options)
