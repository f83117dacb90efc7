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
* A *handed-out* entry's templates are themselves the outputs of its node's replays (no new
  tensor object per replay). The storage's use count no longer tells whether a caller holds
  one, so such an entry is also alive while any template has a reference beyond the ones
  measured at rest (``rest_refs`` Python references, ``rest_uses`` C++ owners: autograd keeps
  saved tensors and gradients as C++ references). Handed-out templates are registered as
  autograd's *cached tensors*, so that the runtime's own reference does not stop autograd from
  taking a gradient over without a copy.
* :attr:`LiveStorages.version` changes whenever a storage is registered at an address, or with
  a size, not seen there since the last :meth:`LiveStorages.prune`, so a reader may cache what
  it derived from the addresses seen (see ``TreeNode.fit_checks``): an entry that leaves and
  comes back at the same address (a loss invalidated each step, then registered again by the
  replay that makes the next one) moves no cache.
  A persistent entry that leaves it, or whose templates are dropped, marks its ``group`` of its
  ``owner`` stale (``TreeNode.stale_group``): only that group is registered or rebuilt again.
* Death is final until the owner replays: nothing but a replay of the node that owns a storage
  hands out a new reference to it (the runtime's own templates are reachable from nowhere
  else), so an entry found dead keeps ``dead`` set, and checks of life skip it, until that
  replay clears it (``DeviceRuntime.replay``). Each storage's life is then read about
  once per replay of its node, not once per check.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

_expired = torch.UntypedStorage._expired
_free_weak_ref = torch.UntypedStorage._free_weak_ref
_use_count = torch._C._storage_Use_Count
_refcount = sys.getrefcount
_C: Any = torch._C
_tensor_uses: Any = getattr(torch.Tensor, "_use_count", None)
_add_cached: Any = getattr(_C, "_add_cached_tensor", None)
_remove_cached: Any = getattr(_C, "_remove_cached_tensor", None)
_enable_cached: Any = getattr(_C, "_set_cached_tensors_enabled", None)

# whether this torch build lets the runtime tell when a handed-out template is free again
CAN_HAND_OUT = None not in (_tensor_uses, _add_cached, _remove_cached, _enable_cached)


def _cpp_owners_hidden() -> bool:
    """Whether a C++ owner of a tensor can go unseen in its Python reference count.

    Builds where a TensorImpl holds its Python object while any C++ code owns it too (the
    object's reference count rises with the first C++ owner) need one check per template;
    older ones also need the C++ use count. Probed, not looked up by version.
    """
    if _tensor_uses is None:
        return True
    t = torch.empty(0)
    holder = torch.empty(0, requires_grad=True)
    before = _refcount(t)
    holder.grad = t  # autograd keeps the gradient as a C++ reference
    seen = _refcount(t) > before
    holder.grad = None
    return not seen


_USES_HIDDEN = _cpp_owners_hidden()


def enable_cached_tensors() -> None:
    """Turn autograd's cached-tensor accounting on (torch's own tree runtime turns it off
    when it resets; registered tensors then only lose their exemption, nothing breaks)."""
    _enable_cached(True)


def _held_counts(templates: list[torch.Tensor]) -> tuple[int, int]:
    # the same loop shape as LiveStorage.templates_in_use, so the references this frame holds
    # (the loop variable, the argument) are counted alike
    refs = uses = 0
    for t in templates:
        refs = max(refs, _refcount(t))
        uses = max(uses, _tensor_uses(t))
    return refs, uses


def storage_use_count(handle: int) -> int:
    return int(_use_count(handle))


def weak_handle(storage: torch.UntypedStorage) -> int:
    """A weak reference to the storage: its implementation's address, counted as weak."""
    handle: Any = storage._weak_ref()
    return int(handle)


@dataclass(eq=False, slots=True)
class LiveStorage:
    handle: int
    ptr: int
    nbytes: int
    producer: str
    output_index: int
    stack_trace: str | None
    mode: str  # of the function that produced it: inference, forward or backward
    baseline: int = 0
    templates: list[torch.Tensor] | None = field(default=None, repr=False)
    persistent: bool = False
    handed: bool = False  # the templates are the replay outputs themselves
    rest_refs: int = 0
    rest_uses: int = 0
    owner: Any = field(default=None, repr=False)  # the node whose entry this is (persistent)
    group: int = -1  # which of the owner's graph-owned storages this is
    dead: bool = False  # found dead since the owner last handed the storage out

    def alive(self) -> bool:
        if self.dead:
            return False
        if _use_count(self.handle) > self.baseline or (self.handed and self.templates_in_use()):
            return True
        self.dead = True
        return False

    def templates_in_use(self) -> bool:
        """Whether anyone but the runtime holds a handed-out template."""
        rest_refs, rest_uses = self.rest_refs, self.rest_uses
        for t in self.templates:  # type: ignore[union-attr]
            if _refcount(t) > rest_refs or (_USES_HIDDEN and _tensor_uses(t) > rest_uses):
                return True
        return False

    def hand_out(self) -> None:
        """From now on replays return the templates themselves (call :meth:`measure_rest`
        once every structure of the runtime that holds them is built)."""
        assert self.templates is not None and CAN_HAND_OUT
        enable_cached_tensors()
        for t in self.templates:
            _add_cached(t)
        self.handed = True

    def measure_rest(self) -> None:
        """Record the references to the templates while no caller holds one."""
        if self.handed:
            self.rest_refs, self.rest_uses = _held_counts(self.templates)  # type: ignore[arg-type]

    def detach_templates(self) -> None:
        """The runtime stops holding the storage: only callers' tensors keep it alive now."""
        if self.handed:
            enable_cached_tensors()
            for t in self.templates:  # type: ignore[union-attr]
                _remove_cached(t)
            self.handed = False
        self.templates = None
        self.baseline = 0
        if self.owner is not None:
            # the owner's recipe holds the templates too: it drops them with this group
            self.owner.stale_group(self.group, templates_dropped=True)


class LiveStorages:
    def __init__(self) -> None:
        self._by_ptr: dict[int, LiveStorage] = {}
        #: address to size of every storage registered since the last prune, registered now
        #: or not: what ``outside`` reads
        self._seen: dict[int, int] = {}
        self.version = 0

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
        mode: str = "inference",
    ) -> LiveStorage:
        entry = LiveStorage(
            weak_handle(storage),
            storage.data_ptr(),
            storage.nbytes(),
            producer,
            output_index,
            stack_trace,
            mode,
        )
        self.put(entry)
        return entry

    def put(self, entry: LiveStorage) -> None:
        old = self._by_ptr.get(entry.ptr)
        if old is entry:
            return
        if old is not None:
            self._left(old)
        self._by_ptr[entry.ptr] = entry
        if self._seen.get(entry.ptr) != entry.nbytes:
            self._seen[entry.ptr] = entry.nbytes
            self.version += 1

    def _left(self, entry: LiveStorage) -> None:
        """``entry`` is no longer registered."""
        if entry.persistent:
            if entry.owner is not None:
                entry.owner.stale_group(entry.group, templates_dropped=False)
        else:
            _free_weak_ref(entry.handle)

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

    def count_alive(self) -> int:
        """How many storages someone other than the runtime still holds."""
        return sum(1 for entry in self._by_ptr.values() if entry.alive())

    def prune(self) -> None:
        """Forget dead storages (the only place entries disappear without invalidation), and
        the addresses no storage is registered at."""
        by_ptr = self._by_ptr
        for entry in list(by_ptr.values()):
            if not entry.alive():
                self._drop(entry)
        if len(self._seen) != len(by_ptr):
            self._seen = {ptr: e.nbytes for ptr, e in by_ptr.items()}
            self.version += 1

    def _drop(self, entry: LiveStorage) -> None:
        del self._by_ptr[entry.ptr]
        self._left(entry)

    def remove(self, entry: LiveStorage) -> None:
        if self._by_ptr.get(entry.ptr) is entry:
            self._drop(entry)

    def release(self, entry: LiveStorage) -> None:
        """A node gives up a persistent entry it no longer uses."""
        entry.detach_templates()
        entry.owner = None
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
        return all_dead(self.outside(held), self._by_ptr)

    def outside(self, held: dict[int, int]) -> list[int]:
        """The addresses seen since the last prune whose storage does not lie inside a block
        of ``held``: every registered entry outside ``held`` is at one of them while
        :attr:`version` stays the same."""
        get = held.get
        return [ptr for ptr, nbytes in self._seen.items() if get(ptr, -1) < nbytes]

    def sizes(self) -> dict[int, int]:
        return {ptr: e.nbytes for ptr, e in self._by_ptr.items()}


def all_dead(ptrs: list[int], by_ptr: dict[int, LiveStorage]) -> bool:
    """Whether no storage registered at ``ptrs`` is alive: the replay rule's inner loop, run
    over the addresses outside a node's memory on each replay, so kept flat (the checks of
    :meth:`LiveStorage.alive` are written out here, and mark what they find dead)."""
    get = by_ptr.get
    for ptr in ptrs:
        e = get(ptr)
        if e is None or e.dead:
            continue
        if _use_count(e.handle) > e.baseline:
            return False
        if e.handed:
            rest_refs, rest_uses = e.rest_refs, e.rest_uses
            for t in e.templates:  # type: ignore[union-attr]
                if _refcount(t) > rest_refs or (_USES_HIDDEN and _tensor_uses(t) > rest_uses):
                    return False
        e.dead = True
    return True
