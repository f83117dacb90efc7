"""Test-wide settings shared by every package's tests and the integration tests.

* Tests marked ``gpu`` need a CUDA device. Elsewhere they are collected and skipped with a
  reason that says how to run them; with ``SAPWOOD_REQUIRE_GPU=1`` (set by ``nox -s gpu``) a
  missing device is an error instead, so the GPU suite can never pass by skipping everything.
* Inductor's caches of compiled graphs are off in each test (see the fixture below).
* Hypothesis profiles: ``ci`` (the default) keeps example counts small enough for two cores;
  ``thorough`` is for a developer hunting a bug.
"""

from __future__ import annotations

import os

import pytest

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is a test dependency; a bare runner still works
    settings = None

if settings is not None:
    settings.register_profile(
        "ci",
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        derandomize=True,
    )
    settings.register_profile("thorough", max_examples=500, deadline=None)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    if os.environ.get("SAPWOOD_REQUIRE_GPU") == "1":
        raise pytest.UsageError("SAPWOOD_REQUIRE_GPU=1 but torch sees no CUDA device")
    skip = pytest.mark.skip(
        reason="needs a CUDA device: runs on the GPU machine through `nox -s gpu`"
    )
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_compiled_graph_caches():
    """Inductor's on-disk caches of compiled graphs (AOT autograd's and the FX graph cache)
    off in every test, so each test compiles what it checks (the kernel code caches stay).
    Tests of the caches turn them on in a fresh cache directory of their own."""
    try:
        from torch._functorch import config as functorch_config
        from torch._inductor import config as inductor_config
    except ImportError:  # a bare runner without torch
        yield
        return
    with (
        inductor_config.patch(fx_graph_cache=False),
        functorch_config.patch(enable_autograd_cache=False),
    ):
        yield
