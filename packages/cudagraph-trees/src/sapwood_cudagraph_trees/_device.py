"""The small interface between the tree runtime and one device's memory.

The runtime never calls an allocator function itself: it talks to a :class:`DeviceLayer`.
Two layers honour it. ``_allocator.CudaDeviceLayer`` wraps the CUDA caching allocator's private
pool and checkpoint functions (the only module that touches allocator internals), and
``_simulated.SimulatedDeviceLayer`` emulates a pool, graphs and checkpoints on the CPU so the tree
logic is tested without a GPU.

Contract every layer keeps:

* All memory the runtime manages lives in one pool per device. Storages the layer hands back
  from :meth:`run_in_pool` and :meth:`capture` are *owned*: freeing them returns their block to
  the pool. Storages built by :meth:`storage_at` are *borrowed*: they free nothing.
* :meth:`checkpoint` describes the pool's allocated blocks right now (pointer to size);
  :meth:`restore` puts the pool back into that state, turns the listed borrowed storages into
  owned ones and frees the listed pointers, so afterwards the allocated blocks are exactly the
  blocks of live storages.
* A replay writes only into memory that was free in the pool when the graph was captured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch


@dataclass(frozen=True)
class PoolCheckpoint:
    """The allocator's state of one pool, plus the blocks it holds (data pointer to bytes)."""

    state: Any
    blocks: dict[int, int]


class DeviceLayer(Protocol):
    device: torch.device

    def accepts(self, tensor: torch.Tensor) -> bool:
        """Whether a tensor is a dense tensor of this device that a graph can read."""
        ...

    def allocate(self, sizes: Sequence[int]) -> list[torch.Tensor]:
        """Owned flat ``uint8`` tensors of the given byte sizes, allocated in the pool."""
        ...

    def run_in_pool(self, fn: Callable[[list[Any]], Any], inputs: list[Any]) -> Any:
        """Run ``fn`` eagerly with its allocations in the pool (a warm-up).

        ``fn`` gets the list ``inputs`` itself, not a copy, and holds the only other
        reference to it: a boxed function may clear it and free each input once done."""
        ...

    def capture(self, fn: Callable[[list[Any]], Any], inputs: list[Any]) -> tuple[Any, Any]:
        """Capture ``fn`` into a new graph that allocates from the pool; (graph, outputs)."""
        ...

    def replay(self, graph: Any) -> None: ...

    def replayer(self, graph: Any) -> Callable[[], None]:
        """A callable that replays ``graph`` (bound once, called on every replay)."""
        ...

    def release_graph(self, graph: Any) -> None: ...

    def checkpoint(self) -> PoolCheckpoint: ...

    def restore(
        self, checkpoint: PoolCheckpoint, adopt: Sequence[int], free: Sequence[int]
    ) -> None:
        """Restore ``checkpoint``; ``adopt`` are storage handles (weak-ref cdata) of borrowed
        storages to turn into owners of their block; ``free`` are block pointers to release."""
        ...

    def storage_at(self, ptr: int, nbytes: int) -> torch.UntypedStorage: ...

    def tensor_at(
        self,
        storage: torch.UntypedStorage,
        dtype: torch.dtype,
        offset: int,
        size: Sequence[int],
        stride: Sequence[int],
    ) -> torch.Tensor: ...

    def owns(self, storage_handle: int) -> bool:
        """Whether the storage behind a weak-ref handle frees its block when it dies."""
        ...

    def invalidate(self, storage_handle: int, message: str) -> None:
        """Release the storage's block if it owns one and make every later access raise."""
        ...

    def live_blocks(self) -> set[int]:
        """Pointers of the blocks allocated in the pool right now."""
        ...

    def pool_ranges(self) -> list[tuple[int, int]]:
        """Address ranges ``[start, end)`` of the pool's memory."""
        ...

    def reserved_bytes(self) -> int:
        """Bytes the pool holds from the device (allocated or cached)."""
        ...

    def release_pool(self) -> None:
        """Give the pool's memory back; a later call starts a fresh pool."""
        ...

    def clear_workspaces(self) -> None:
        """Drop library workspaces a warm-up may have cached inside the pool."""
        ...
