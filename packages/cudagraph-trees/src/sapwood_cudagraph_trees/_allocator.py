"""The CUDA device layer: the only module that calls the caching allocator's private functions.

Invariants kept here:

* One private pool per device, created lazily and kept alive by an empty *anchor* graph captured
  into it, so freeing every real graph does not give the pool's memory back behind our back.
* Warm-ups, input buffers and captures all allocate on one side stream of this layer: blocks of a
  CUDA caching-allocator pool are reused only by the stream that allocated them, so a single
  stream lets a recording reuse memory a warm-up or an earlier recording freed.
* :meth:`restore` follows the allocator's rules for ``_cuda_setCheckpointPoolState``: a storage
  may be given a deleter only if it has none, and every block of the checkpoint that no storage
  adopts must be freed by pointer, or it would stay allocated for ever.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from ._device import PoolCheckpoint

_C: Any = torch._C


def missing_private_apis() -> list[str]:
    """Names of the private allocator functions this torch build lacks (empty when usable)."""
    needed = [
        "_cuda_beginAllocateCurrentThreadToPool",
        "_cuda_endAllocateToPool",
        "_cuda_releasePool",
        "_cuda_getCheckpointState",
        "_cuda_setCheckpointPoolState",
        "_cuda_cudaCachingAllocator_raw_delete",
        "_construct_storage_from_data_pointer",
        "_has_Standard_Deleter",
        "_free_And_Remove_DeleterFn",
        "_set_storage_data_ptr_access_error_msg",
    ]
    return [name for name in needed if not hasattr(_C, name)]


class CudaDeviceLayer:
    """Pool, graphs and checkpoints of one CUDA device."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.device = torch.device("cuda", index)
        self._pool: tuple[int, int] | None = None
        self._anchor: torch.cuda.CUDAGraph | None = None
        self._stream: torch.cuda.Stream | None = None
        self._build_tensor = getattr(_C, "_construct_CUDA_Tensor_From_Storage_And_Metadata", None)

    # ------------------------------------------------------------------ pool lifetime
    def _ensure_pool(self) -> tuple[int, int]:
        if self._pool is None:
            with torch.cuda.device(self.index):
                self._stream = torch.cuda.Stream(self.index)
                pool: Any = torch.cuda.graph_pool_handle()
                anchor = self._empty_capture(pool)
            self._pool, self._anchor = pool, anchor
        return self._pool

    def _empty_capture(self, pool: Any) -> torch.cuda.CUDAGraph:
        """Capture nothing into the pool: the anchor that keeps the pool alive."""
        graph = torch.cuda.CUDAGraph()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The CUDA Graph is empty")
            with torch.cuda.graph(
                graph, pool=pool, stream=self._stream, capture_error_mode="thread_local"
            ):
                pass
        return graph

    def _reset_generator_after_failed_capture(self) -> None:
        """A capture that fails ends before the default generator leaves its capture mode, and
        every later random op would then fail; give the generator a fresh state object with
        the same seed and offset (a clone starts outside capture)."""
        with contextlib.suppress(Exception):
            generator = torch.cuda.default_generators[self.index]
            generator.graphsafe_set_state(generator.clone_state())

    def release_pool(self) -> None:
        if self._anchor is not None:
            torch.cuda.synchronize(self.index)
            self._anchor.reset()
        self._pool = None
        self._anchor = None

    @property
    def stream(self) -> torch.cuda.Stream:
        self._ensure_pool()
        assert self._stream is not None
        return self._stream

    # ------------------------------------------------------------------ running in the pool
    def accepts(self, tensor: torch.Tensor) -> bool:
        return (
            tensor.device == self.device
            and tensor.layout == torch.strided
            and not tensor.is_quantized
            and not tensor.is_nested
        )

    @contextlib.contextmanager
    def pool_allocation(self) -> Iterator[None]:
        pool = self._ensure_pool()
        stream = self.stream
        torch.cuda.synchronize(self.index)
        stream.wait_stream(torch.cuda.current_stream(self.index))
        with torch.cuda.device(self.index), torch.cuda.stream(stream):
            _C._cuda_beginAllocateCurrentThreadToPool(self.index, pool)
            try:
                yield
            finally:
                _C._cuda_endAllocateToPool(self.index, pool)
                _C._cuda_releasePool(self.index, pool)
        torch.cuda.current_stream(self.index).wait_stream(stream)

    def allocate(self, sizes: Sequence[int]) -> list[torch.Tensor]:
        with self.pool_allocation():
            return [torch.empty((n,), dtype=torch.uint8, device=self.device) for n in sizes]

    def run_in_pool(self, fn: Callable[[list[Any]], Any], inputs: list[Any]) -> Any:
        # ``inputs`` itself, no copy: a boxed function (Inductor's) clears the list and frees
        # each input once it is done with it, as a backward does with saved activations
        with self.pool_allocation():
            return fn(inputs)

    def capture(self, fn: Callable[[list[Any]], Any], inputs: list[Any]) -> tuple[Any, Any]:
        pool: Any = self._ensure_pool()
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize(self.index)
        try:
            with (
                torch.cuda.device(self.index),
                torch.cuda.graph(
                    graph, pool=pool, stream=self.stream, capture_error_mode="thread_local"
                ),
            ):
                outputs = fn(list(inputs))
        except BaseException:
            del graph
            self._reset_generator_after_failed_capture()
            raise
        torch.cuda.synchronize(self.index)
        return graph, outputs

    def replay(self, graph: Any) -> None:
        graph.replay()

    def replayer(self, graph: Any) -> Callable[[], None]:
        replay: Callable[[], None] = graph.replay
        return replay

    def release_graph(self, graph: Any) -> None:
        graph.reset()

    def clear_workspaces(self) -> None:
        clear = getattr(_C, "_cuda_clearCublasWorkspaces", None)
        if clear is not None:
            clear()

    # ------------------------------------------------------------------ checkpoints
    def _segments(self) -> list[dict[str, Any]]:
        pool = self._pool
        if pool is None:
            return []
        return [s for s in torch.cuda.memory_snapshot() if tuple(s["segment_pool_id"]) == pool]

    def live_blocks(self) -> set[int]:
        return set(self._blocks(("active_allocated",)))

    def _blocks(self, states: tuple[str, ...]) -> dict[int, int]:
        blocks: dict[int, int] = {}
        for segment in self._segments():
            address = segment["address"]
            for block in segment["blocks"]:
                if block["state"] in states:
                    blocks[address] = block["size"]
                address += block["size"]
        return blocks

    def pool_ranges(self) -> list[tuple[int, int]]:
        return [(s["address"], s["address"] + s["total_size"]) for s in self._segments()]

    def reserved_bytes(self) -> int:
        return sum(s["total_size"] for s in self._segments())

    def _flush_deferred_frees(self) -> None:
        """Frees deferred during a capture are carried out at the next allocation: make one."""
        with self.pool_allocation():
            torch.empty((1,), dtype=torch.uint8, device=self.device)

    def checkpoint(self) -> PoolCheckpoint:
        pool = self._ensure_pool()
        self._flush_deferred_frees()
        torch.cuda.synchronize(self.index)
        state = _C._cuda_getCheckpointState(self.index, pool)
        # a block freed during capture may still wait for its stream ("pending free"); it is
        # allocated in the checkpoint's state, so it must be listed to be freed on restore
        blocks = self._blocks(("active_allocated", "active_pending_free"))
        return PoolCheckpoint(state=state, blocks=blocks)

    def restore(
        self, checkpoint: PoolCheckpoint, adopt: Sequence[int], free: Sequence[int]
    ) -> None:
        self._flush_deferred_frees()
        torch.cuda.synchronize(self.index)
        _C._cuda_setCheckpointPoolState(self.index, checkpoint.state, [], list(adopt))
        for ptr in free:
            _C._cuda_cudaCachingAllocator_raw_delete(ptr)

    # ------------------------------------------------------------------ storages over static memory
    def storage_at(self, ptr: int, nbytes: int) -> torch.UntypedStorage:
        return _C._construct_storage_from_data_pointer(ptr, self.device, nbytes)

    def tensor_at(
        self,
        storage: torch.UntypedStorage,
        dtype: torch.dtype,
        offset: int,
        size: Sequence[int],
        stride: Sequence[int],
    ) -> torch.Tensor:
        build = self._build_tensor
        if build is not None:  # one C++ call, where an empty tensor and set_ take two
            return build(  # type: ignore[no-any-return]
                {"size": size, "stride": stride, "storage_offset": offset, "dtype": dtype},
                storage,
            )
        return torch.empty((0,), dtype=dtype, device=self.device).set_(
            storage, offset, size, stride
        )

    def owns(self, storage_handle: int) -> bool:
        return bool(_C._has_Standard_Deleter(storage_handle))

    def invalidate(self, storage_handle: int, message: str) -> None:
        if _C._has_Standard_Deleter(storage_handle):
            _C._free_And_Remove_DeleterFn(storage_handle)
        _C._set_storage_data_ptr_access_error_msg(storage_handle, message)
