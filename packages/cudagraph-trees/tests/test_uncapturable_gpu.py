"""A capture that fails (a host sync inside the function) falls back to eager with a reason.

In a file of its own that runs last: should recovery from a failed capture ever break, the
damage (a CUDA generator stuck in capture mode) cannot take other tests down with it.
"""

from __future__ import annotations

import pytest
import torch

import sapwood_cudagraph_trees as trees

pytestmark = pytest.mark.gpu
DEV = "cuda"


def test_uncapturable_function_runs_eagerly_with_a_reason(cuda):
    def syncs(xs):
        return [xs[0] * xs[0].sum().item()]

    f = trees.cudagraphify(syncs, [torch.ones(16, device=DEV)], device_index=0, mode="inference")
    for _ in range(3):
        x = torch.randn(16, device=DEV)
        torch.testing.assert_close(f([x])[0], x * x.sum().item())
    (info,) = [i for i in trees.tree_info(0).functions if i.name == "syncs"]
    assert info.eager_reason is not None and "capture failed" in info.eager_reason


def test_random_numbers_work_after_a_failed_capture(cuda):
    def syncs(xs):
        return [xs[0] * xs[0].sum().item()]

    f = trees.cudagraphify(syncs, [torch.ones(16, device=DEV)], device_index=0, mode="inference")
    for _ in range(3):
        f([torch.ones(16, device=DEV)])
    assert torch.randn(1024, device=DEV).std() > 0.5
