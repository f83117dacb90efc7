"""A simulated device layer: a CPU arena that behaves like one CUDA graph pool.

It exists so that the tree logic (warm-up, recording, replay, checkpoints, liveness, fallbacks)
runs and is tested on machines without a GPU. It honours the contract of ``_device.DeviceLayer``
strictly enough to expose the mistakes the real allocator would punish:

* The arena is a single CPU byte tensor; blocks are carved from it first-fit, so freed memory
  is reused and a graph replayed at the wrong moment really overwrites live data.
* A simulated graph owns an *intermediate* block while it is captured (freed afterwards, like a
  CUDA graph's temporaries). Each replay first scribbles ``0xFF`` (NaN for floats) over that block
  and over its outputs, then writes the outputs: a replay that clobbers a live tensor shows up
  as wrong values in a differential test.
* Owned storages free their block when they die (checked lazily, before every allocator
  operation). :meth:`restore` raises, as the CUDA allocator does, when a block with a living
  owner is missing from the checkpoint, or when a storage that already owns a block is adopted.
* Graphs hold no reference to the tensors they read: inputs are re-viewed by address on each
  replay, so liveness in the simulation is the same as on a device.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ._device import PoolCheckpoint
from ._liveness import weak_handle

_ALIGN = 64
_C: Any = torch._C


def _round(nbytes: int) -> int:
    return max(_ALIGN, (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN)


@dataclass
class _TensorView:
    ptr: int
    nbytes: int
    dtype: torch.dtype
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]


class SimulatedGraph:
    """A recorded function: re-run on replay, results written into its arena blocks."""

    def __init__(
        self,
        fn: Callable[[list[Any]], Any],
        inputs: list[Any],
        output_blocks: list[int | None],
        scratch: tuple[int, int],
    ) -> None:
        self.fn = fn
        self.inputs: list[_TensorView | Any] = [
            _view_of(x) if isinstance(x, torch.Tensor) else x for x in inputs
        ]
        self.output_blocks = output_blocks
        self.scratch = scratch
        self.released = False


def _storage_pointers(values: Sequence[Any]) -> set[int]:
    return {x.untyped_storage().data_ptr() for x in values if isinstance(x, torch.Tensor)}


def _view_of(t: torch.Tensor) -> _TensorView:
    s = t.untyped_storage()
    return _TensorView(
        s.data_ptr(),
        s.nbytes(),
        t.dtype,
        int(t.storage_offset()),
        tuple(t.shape),
        tuple(t.stride()),
    )


class _Invalidated(dict):  # type: ignore[type-arg]
    """Messages of invalidated storages by handle, forgetting storages that died since (a new
    storage may be made at a dead one's address, and must not look invalidated)."""

    def __init__(self) -> None:
        super().__init__()
        self._weak: dict[int, int] = {}

    def record(self, storage: torch.UntypedStorage, message: str) -> None:
        handle = storage._cdata
        if handle in self._weak:
            torch.UntypedStorage._free_weak_ref(self._weak[handle])
        self._weak[handle] = storage._weak_ref()
        self[handle] = message

    def _forget_dead(self) -> None:
        for handle, weak in list(self._weak.items()):
            if torch.UntypedStorage._expired(weak):
                torch.UntypedStorage._free_weak_ref(weak)
                del self._weak[handle]
                super().pop(handle, None)

    def __contains__(self, handle: object) -> bool:
        self._forget_dead()
        return super().__contains__(handle)

    def __getitem__(self, handle: int) -> str:
        self._forget_dead()
        return str(super().__getitem__(handle))


class SimulatedDeviceLayer:
    """One simulated pool on the CPU (see the module docstring for what it checks)."""

    def __init__(self, arena_bytes: int = 1 << 22) -> None:
        self.device = torch.device("cpu")
        self._arena = torch.zeros((arena_bytes,), dtype=torch.uint8)
        self._base = self._arena.data_ptr()
        self._blocks: dict[int, int] = {}
        self._owner_of: dict[int, int] = {}  # block pointer -> weak handle of its owning storage
        self._high_water = 0
        self.invalidated = _Invalidated()
        self.replays = 0
        self.captures = 0

    # ------------------------------------------------------------------ blocks
    def _sweep(self) -> None:
        for ptr, handle in list(self._owner_of.items()):
            if torch.UntypedStorage._expired(handle):
                torch.UntypedStorage._free_weak_ref(handle)
                del self._owner_of[ptr]
                self._blocks.pop(ptr, None)

    def _alloc(self, nbytes: int) -> int:
        self._sweep()
        size = _round(nbytes)
        cursor = self._base
        for ptr in sorted(self._blocks):
            if ptr - cursor >= size:
                break
            cursor = max(cursor, ptr + self._blocks[ptr])
        if cursor + size > self._base + self._arena.numel():
            raise MemoryError("simulated pool is full")
        self._blocks[cursor] = size
        self._high_water = max(self._high_water, cursor + size - self._base)
        return cursor

    def _free(self, ptr: int) -> None:
        if ptr not in self._blocks:
            raise AssertionError(f"simulated allocator: free of unknown block {ptr:#x}")
        del self._blocks[ptr]
        handle = self._owner_of.pop(ptr, None)
        if handle is not None:
            torch.UntypedStorage._free_weak_ref(handle)

    def _owned_storage(self, nbytes: int) -> torch.UntypedStorage:
        ptr = self._alloc(nbytes)
        storage = self.storage_at(ptr, nbytes)
        self._owner_of[ptr] = weak_handle(storage)
        return storage

    def in_arena(self, ptr: int) -> bool:
        return self._base <= ptr < self._base + self._arena.numel()

    # ------------------------------------------------------------------ running
    def accepts(self, tensor: torch.Tensor) -> bool:
        return tensor.device.type == "cpu" and tensor.layout == torch.strided

    def allocate(self, sizes: Sequence[int]) -> list[torch.Tensor]:
        out = []
        for n in sizes:
            storage = self._owned_storage(n)
            out.append(self.tensor_at(storage, torch.uint8, 0, (n,), (1,)))
        return out

    def _move_outputs(self, outputs: Any, keep: set[int]) -> tuple[list[Any], list[int | None]]:
        """Copy every output storage not read from an input (``keep``: the inputs' storage
        pointers) into a fresh owned arena block."""
        moved: dict[int, torch.UntypedStorage] = {}
        result: list[Any] = []
        blocks: list[int | None] = []
        for out in outputs:
            if not isinstance(out, torch.Tensor) or out.layout != torch.strided:
                # (a sparse output has no plain storage: it stays where the function made it,
                # as on a device, where only a graph's capture would fail on it)
                result.append(out)
                blocks.append(None)
                continue
            src = out.untyped_storage()
            if src.data_ptr() in keep:
                result.append(out)
                blocks.append(None)
                continue
            if src.data_ptr() not in moved:
                dst = self._owned_storage(src.nbytes())
                dst.copy_(src)
                moved[src.data_ptr()] = dst
            dst = moved[src.data_ptr()]
            result.append(
                self.tensor_at(dst, out.dtype, int(out.storage_offset()), out.shape, out.stride())
            )
            blocks.append(dst.data_ptr())
        return result, blocks

    def run_in_pool(self, fn: Callable[[list[Any]], Any], inputs: list[Any]) -> Any:
        keep = _storage_pointers(inputs)
        # ``inputs`` itself, as on a device: a boxed function may clear it to free its inputs
        outputs, _ = self._move_outputs(fn(inputs), keep)
        return outputs

    def capture(self, fn: Callable[[list[Any]], Any], inputs: list[Any]) -> tuple[Any, Any]:
        outputs, blocks = self._move_outputs(fn(list(inputs)), _storage_pointers(inputs))
        scratch_bytes = sum(self._blocks[b] for b in set(blocks) if b is not None)
        scratch = self._alloc(max(_ALIGN, scratch_bytes))
        scratch_size = self._blocks[scratch]
        self._free(scratch)
        for ptr in set(blocks):
            if ptr is not None:
                self._poison(ptr, self._blocks[ptr])
        self.captures += 1
        return SimulatedGraph(fn, inputs, blocks, (scratch, scratch_size)), outputs

    def _poison(self, ptr: int, nbytes: int) -> None:
        start = ptr - self._base
        self._arena[start : start + nbytes].fill_(0xFF)

    def replay(self, graph: Any) -> None:
        assert isinstance(graph, SimulatedGraph) and not graph.released
        self.replays += 1
        self._poison(*graph.scratch)
        inputs = [
            self.tensor_at(self.storage_at(v.ptr, v.nbytes), v.dtype, v.offset, v.size, v.stride)
            if isinstance(v, _TensorView)
            else v
            for v in graph.inputs
        ]
        results = graph.fn(inputs)
        written: set[int] = set()
        for res, block in zip(results, graph.output_blocks):
            if block is None or block in written:
                continue
            written.add(block)
            src = res.untyped_storage()
            start = block - self._base
            self._arena[start : start + src.nbytes()].copy_(
                torch.empty((0,), dtype=torch.uint8).set_(src)
            )

    def replayer(self, graph: Any) -> Callable[[], None]:
        return functools.partial(self.replay, graph)

    def release_graph(self, graph: Any) -> None:
        graph.released = True

    def clear_workspaces(self) -> None:
        return None

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self) -> PoolCheckpoint:
        self._sweep()
        return PoolCheckpoint(state=dict(self._blocks), blocks=dict(self._blocks))

    def restore(
        self, checkpoint: PoolCheckpoint, adopt: Sequence[int], free: Sequence[int]
    ) -> None:
        self._sweep()
        for ptr in self._owner_of:
            if ptr not in checkpoint.blocks:
                raise AssertionError(
                    f"simulated allocator: restoring drops block {ptr:#x} that a live storage owns"
                )
        self._blocks = dict(checkpoint.state)
        for handle in adopt:
            if handle in self._owner_of.values():
                raise AssertionError("simulated allocator: adopting a storage that owns a block")
            storage = torch.UntypedStorage._new_with_weak_ptr(handle)
            ptr = storage.data_ptr()
            if ptr not in self._blocks:
                raise AssertionError(f"simulated allocator: adopted {ptr:#x} is not a block")
            self._owner_of[ptr] = weak_handle(storage)
        for ptr in free:
            if ptr in self._owner_of:
                raise AssertionError(f"simulated allocator: freeing owned block {ptr:#x}")
            self._free(ptr)

    def unowned_blocks(self) -> set[int]:
        """Allocated blocks that nothing will ever free (a leak when not empty)."""
        self._sweep()
        return set(self._blocks) - set(self._owner_of)

    # ------------------------------------------------------------------ storages
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
        return torch.empty((0,), dtype=dtype).set_(storage, offset, size, stride)

    def owns(self, storage_handle: int) -> bool:
        return storage_handle in self._owner_of.values()

    def invalidate(self, storage_handle: int, message: str) -> None:
        storage = torch.UntypedStorage._new_with_weak_ptr(storage_handle)
        if storage is None:
            return
        for ptr, handle in list(self._owner_of.items()):
            if handle == storage_handle:
                self._free(ptr)
        torch.empty((0,), dtype=torch.uint8).set_(storage).fill_(0xFF)
        self.invalidated.record(storage, message)

    def live_blocks(self) -> set[int]:
        self._sweep()
        return set(self._blocks)

    def pool_ranges(self) -> list[tuple[int, int]]:
        return [(self._base, self._base + self._arena.numel())]

    def reserved_bytes(self) -> int:
        return self._high_water

    def release_pool(self) -> None:
        self._sweep()
        for handle in self._owner_of.values():
            torch.UntypedStorage._free_weak_ref(handle)
        self._owner_of.clear()
        self._blocks.clear()
        self._high_water = 0
