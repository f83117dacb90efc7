"""Keeping the allocator's view of the pool true before anything allocates in it.

Replays do not go through the allocator: after one, the allocator believes the replayed graph's
output blocks are free although callers hold tensors over them. Before a warm-up or a recording
allocates in the pool, :func:`sync_allocator` restores the checkpoint taken when the last replayed
graph was captured, hands the blocks of live borrowed storages to those storages (so they free the
block when they die) and frees every other block of the checkpoint.

Invariants: after a sync, the allocated blocks of the pool are exactly the blocks of live
registered storages; while ``PoolState.in_sync`` is true, no replay has run since.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._device import DeviceLayer, PoolCheckpoint
from ._liveness import LiveStorages


class PoolStateError(RuntimeError):
    """The pool's live storages do not fit the checkpoint to restore (a runtime bug)."""


@dataclass
class PoolState:
    in_sync: bool = True
    checkpoint: PoolCheckpoint | None = None
    restores: int = 0

    def after_replay(self, checkpoint: PoolCheckpoint) -> None:
        self.in_sync = False
        self.checkpoint = checkpoint


def sync_allocator(layer: DeviceLayer, state: PoolState, live: LiveStorages) -> None:
    if state.in_sync:
        return
    checkpoint = state.checkpoint
    assert checkpoint is not None
    live.prune()
    entries = list(live)
    missing = [e.ptr for e in entries if checkpoint.blocks.get(e.ptr, -1) < e.nbytes]
    if missing:
        raise PoolStateError(
            f"{len(missing)} live pool storage(s) lie outside the checkpoint to restore"
        )
    live_ptrs = {e.ptr for e in entries}
    adopted = [e for e in entries if not layer.owns(e.handle)]
    free = [ptr for ptr in checkpoint.blocks if ptr not in live_ptrs]
    layer.restore(checkpoint, [e.handle for e in adopted], free)
    for entry in adopted:
        # the storage now frees its block when the callers' tensors die; a node's templates
        # must not keep it alive, so the node builds new ones on its next replay
        entry.detach_templates()
    state.in_sync = True
    state.restores += 1
