"""Capture regimes: tensors whose meaning depends on whether their producer was captured.

Some kernels behave differently inside a CUDA graph capture. Flash and memory-efficient
attention hand out their dropout seed and offset as CPU tensors when they run, and as device
tensors when they are captured; their backward kernels read them by the same rule (on the host
when not capturing, as device addresses when capturing). A backward captured with CPU seeds
reads host addresses on the device; one run eagerly with device seeds dereferences device
addresses on the host. Both crash the process.

So the runtime keeps two sets:

* ``capture_only``: outputs of recordings that are on the device only because they were
  captured (found by comparing the recording's outputs with the warm-up's). A function given
  one records instead of warming up, and an eager run gets host copies of them.
* ``eager_only``: CPU outputs of forwards that ran eagerly (warm-ups, fallbacks). A recording
  given one runs that call eagerly instead.

Invariant: both are empty unless some graph has such outputs, so the checks cost nothing for
every other function; none of them is on the replay path.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["CaptureRegimes", "capture_key", "drifted_outputs", "output_devices"]


def output_devices(outputs: Sequence[Any]) -> tuple[Any, ...]:
    """The device of each tensor among ``outputs`` (None for other values); inputs too."""
    return tuple(out.device if isinstance(out, torch.Tensor) else None for out in outputs)


def drifted_outputs(eager: tuple[Any, ...] | None, captured: Sequence[Any]) -> list[int]:
    """Outputs that live on another device when captured than when run.

    Flash and memory-efficient attention hand out their dropout seed and offset as CPU tensors
    when they run and as device tensors when they are captured, and their backward kernels
    read them by the same rule: on the host when not capturing, on the device when capturing.
    Such outputs must reach only code that runs the same way as their producer did.
    """
    if eager is None:
        return []
    return [
        i
        for i, (before, out) in enumerate(zip(eager, output_devices(captured)))
        if before is not None and out is not None and before != out
    ]


def capture_key(x: torch.Tensor) -> tuple[int, torch.dtype, tuple[int, ...]]:
    """What identifies a capture-only tensor (its address, checked with its dtype and shape
    since the address may be reused once it dies)."""
    return (x.untyped_storage().data_ptr(), x.dtype, tuple(x.shape))


class CaptureRegimes:
    """The ``capture_only`` and ``eager_only`` tensors of one device (module docstring)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        #: outputs of recordings that are on the device only because they were captured
        #: (``drifted_outputs``): consumers must capture with them, or run on host copies
        self.capture_only: set[tuple[int, torch.dtype, tuple[int, ...]]] = set()
        #: CPU outputs of forwards that ran eagerly: a graph captured with one would read a
        #: host address on the device (attention's dropout seed), so their consumers run eagerly
        self.eager_only: dict[int, weakref.ref[torch.Tensor]] = {}

    def mark_eager_outputs(self, outputs: Sequence[Any], mode: str) -> None:
        """Remember the CPU outputs of a function of ``mode`` that ran eagerly, unless it is a
        backward (gradients feed no graph; see ``eager_only``)."""
        if mode == "backward" or self.device.type == "cpu":
            return
        for out in outputs:
            if isinstance(out, torch.Tensor) and out.device.type == "cpu":
                key = id(out)
                self.eager_only[key] = weakref.ref(
                    out, lambda _, k=key: self.eager_only.pop(k, None)
                )

    def eager_only_input(self, inputs: Sequence[Any]) -> int | None:
        """The index of an input that a capture must not take (see ``eager_only``), or None."""
        if not self.eager_only:
            return None
        for i, x in enumerate(inputs):
            ref = self.eager_only.get(id(x))
            if ref is not None and ref() is x:
                return i
        return None

    def _is_capture_only(self, x: Any) -> bool:
        # seeds and offsets have at most one dimension: the cheap test first
        return isinstance(x, torch.Tensor) and x.dim() <= 1 and capture_key(x) in self.capture_only

    def host_copies(self, inputs: list[Any]) -> list[Any]:
        """Inputs for an eager run: capture-only tensors replaced by host copies of them."""
        if not self.capture_only:
            return inputs
        return [x.cpu() if self._is_capture_only(x) else x for x in inputs]

    def has_capture_only(self, inputs: Sequence[Any]) -> bool:
        return bool(self.capture_only) and any(self._is_capture_only(x) for x in inputs)
