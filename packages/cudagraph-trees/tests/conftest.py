"""Fixtures: a simulated device (CPU) and the real CUDA device, each reset after a test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import sapwood_cudagraph_trees as trees
from sapwood_cudagraph_trees import _api
from sapwood_cudagraph_trees._simulated import SimulatedDeviceLayer

SIM_INDEX = 7  # a device index no real machine uses here


@pytest.fixture
def sim() -> Iterator[SimulatedDeviceLayer]:
    layer = SimulatedDeviceLayer()
    _api._install_layer(SIM_INDEX, lambda: layer)
    try:
        yield layer
    finally:
        _api._uninstall_layer(SIM_INDEX)


@pytest.fixture
def cuda() -> Iterator[int]:
    torch.cuda.synchronize()
    try:
        yield 0
    finally:
        trees.reset()
        torch.cuda.synchronize()
