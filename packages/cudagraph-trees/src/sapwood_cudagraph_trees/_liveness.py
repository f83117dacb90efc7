"""Which pool storages are alive: weak references to every storage the runtime handed out.

Invariants:

* Every storage in the pool that a caller can reach (warm-up outputs, recording outputs, replay
  outputs) is registered here under its data pointer until it dies or is invalidated; at most
  one live storage is registered per pointer, because a replay never writes over a live one.
* An entry holds a *weak* reference (counted on the storage's implementation, not a Python
  object), so registering an output never extends its life. A storage counts as alive while its
  strong use count is above the entry's ``baseline``: the number of references the runtime itself
  keeps (the *templates* a node detaches its replay outputs from).
* A *persistent* entry belongs to a node, which reuses it on every replay; the registry never
  frees its weak reference. The node frees it when it replaces the entry, or hands it over by
  clearing ``persistent`` when the entry is still registered.
* :meth:`LiveStorages.fits` is the replay rule: a graph may run only when every live storage lies
  inside a block that was already allocated when the graph was captured (``held``), since a
  replay writes only into memory that was free at capture.
* Entries may outlive their storage until the next :meth:`LiveStorages.prune` (recordings,
  checkpoint restores and new steps prune first); every reader that must not count them --
  ``fits``, ``contains`` -- checks life itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

_expired = torch.UntypedStorage._expired
_free_weak_ref = torch.UntypedStorage._free_weak_ref
_use_count = torch._C._storage_Use_Count


def storage_use_count(handle: int) -> int:
    return int(_use_count(handle))


def weak_handle(storage: torch.UntypedStorage) -> int:
    """A weak reference to the storage: its implementation's address, counted as weak."""
    handle: Any = storage._weak_ref()
    return int(handle)


@dataclass(eq=False)
class LiveStorage:
    handle: int
    ptr: int
    nbytes: int
    producer: str
    output_index: int
    stack_trace: str | None
    exempt_from_step: bool
    baseline: int = 0
    templates: list[torch.Tensor] | None = field(default=None, repr=False)
    persistent: bool = False

    def alive(self) -> bool:
        return _use_count(self.handle) > self.baseline

    def detach_templates(self) -> None:
        """The runtime stops holding the storage: only callers' tensors keep it alive now."""
        self.templates = None
        self.baseline = 0


class LiveStorages:
    def __init__(self) -> None:
        self._by_ptr: dict[int, LiveStorage] = {}

    def __len__(self) -> int:
        return len(self._by_ptr)

    def __iter__(self) -> Iterator[LiveStorage]:
        return iter(list(self._by_ptr.values()))

    def add(
        self,
        storage: torch.UntypedStorage,
        producer: str,
        output_index: int,
        stack_trace: str | None,
        exempt_from_step: bool = False,
    ) -> LiveStorage:
        entry = LiveStorage(
            weak_handle(storage),
            storage.data_ptr(),
            storage.nbytes(),
            producer,
            output_index,
            stack_trace,
            exempt_from_step,
        )
        self.put(entry)
        return entry

    def put(self, entry: LiveStorage) -> None:
        old = self._by_ptr.get(entry.ptr)
        if old is not None and old is not entry and not old.persistent:
            _free_weak_ref(old.handle)
        self._by_ptr[entry.ptr] = entry

    def holds(self, entry: LiveStorage) -> bool:
        return self._by_ptr.get(entry.ptr) is entry

    def contains(self, ptr: int) -> bool:
        entry = self._by_ptr.get(ptr)
        if entry is None:
            return False
        if not entry.alive():
            self._drop(entry)
            return False
        return True

    def prune(self) -> None:
        """Forget dead storages (the only place entries disappear without invalidation)."""
        by_ptr = self._by_ptr
        if not by_ptr:
            return
        for entry in list(by_ptr.values()):
            if _use_count(entry.handle) <= entry.baseline:
                self._drop(entry)

    def _drop(self, entry: LiveStorage) -> None:
        del self._by_ptr[entry.ptr]
        if not entry.persistent:
            _free_weak_ref(entry.handle)

    def remove(self, entry: LiveStorage) -> None:
        if self._by_ptr.get(entry.ptr) is entry:
            self._drop(entry)

    def release(self, entry: LiveStorage) -> None:
        """A node gives up a persistent entry it no longer uses."""
        entry.detach_templates()
        if self.holds(entry):
            entry.persistent = False
        elif entry.persistent:
            entry.persistent = False
            _free_weak_ref(entry.handle)

    def fits(self, held: dict[int, int]) -> bool:
        """Whether every live storage lies inside a block of ``held`` (pointer to bytes).

        Needs no :meth:`prune` first: an entry outside ``held`` is checked for life here, and a
        dead one does not count. Dead entries are left registered (nothing reads their memory),
        so a node's own entries, dead since its last replay, need no registering again.
        """
        get = held.get
        for ptr, entry in self._by_ptr.items():
            if get(ptr, -1) < entry.nbytes and _use_count(entry.handle) > entry.baseline:
                return False
        return True

    def sizes(self) -> dict[int, int]:
        return {ptr: e.nbytes for ptr, e in self._by_ptr.items()}
