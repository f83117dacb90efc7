"""``torch._dynamo.config`` values a user changed: obeyed where sapwood has the control,
otherwise refused in words (one warning per value); every call compared with eager."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo
import torch._dynamo.config as dynamo_config

import sapwood_tracer
from sapwood_tracer import TorchConfigWarning

X = torch.arange(6.0)


def _scale(x, n):
    return x * n


def _run(compiled, sizes, same):
    for size in sizes:
        x = torch.randn(size)
        same(compiled(x, 2), x * 2)


@pytest.mark.parametrize(
    ("setting", "expected_graphs"),
    [
        ({}, 2),  # static, then symbolic after the first size change
        ({"automatic_dynamic_shapes": False}, 4),  # one graph per size
        ({"assume_static_by_default": False}, 1),  # symbolic from the first call
    ],
)
def test_torchs_shape_switches_set_the_default_policy(backend, same, setting, expected_graphs):
    compiled = sapwood_tracer.compile(_scale, backend=backend)
    with dynamo_config.patch(setting), warnings.catch_warnings():
        warnings.simplefilter("error", TorchConfigWarning)  # obeyed: nothing to warn about
        _run(compiled, [3, 4, 5, 6], same)
    assert backend.count == expected_graphs


def test_an_explicit_dynamic_comes_before_torchs_switches(backend, same):
    compiled = sapwood_tracer.compile(_scale, backend=backend, dynamic=False)
    with dynamo_config.patch(assume_static_by_default=False):
        _run(compiled, [3, 4], same)
    assert backend.count == 2


def test_error_on_recompile_raises_torchs_recompile_error(backend, same):
    compiled = sapwood_tracer.compile(_scale, backend=backend, dynamic=False)
    with dynamo_config.patch(error_on_recompile=True):
        same(compiled(X, 2), X * 2)  # the first trace is no recompile
        with pytest.raises(torch._dynamo.exc.RecompileError, match=r"L\['n'\] == 2; seen: 3"):
            compiled(X, 3)
    same(compiled(X, 3), X * 3)


def test_a_setting_sapwood_does_not_implement_warns_once_at_the_users_line(backend, same):
    def fn(x):
        return x.relu()

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=False)
    with dynamo_config.patch(specialize_float=True), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for size in (2, 3, 4):
            x = torch.randn(size)
            same(compiled(x), x.relu())
    (warning,) = [x for x in w if issubclass(x.category, TorchConfigWarning)]
    assert "torch._dynamo.config.specialize_float = True" in str(warning.message)
    assert warning.filename == __file__


def test_optimize_ddp_false_turns_the_bucket_split_off(monkeypatch):
    from sapwood_tracer.api import torch_config

    assert torch_config.ddp_split(True) is True
    with dynamo_config.patch(optimize_ddp=False):
        assert torch_config.ddp_split(True) is False
    assert torch_config.ddp_split(False) is False
