"""How a recorded graph's inputs are fed and its outputs rebuilt.

Invariants:

* Inputs come in three kinds. *Static* inputs (parameters, buffers) and *pool* inputs (storages
  of the pool, i.e. outputs of earlier graphs) are read in place, so their data pointers are part
  of the node's identity and checked on every call. *Copied* inputs are copied into buffers of the
  graph; the copy covers the whole memory span the input's strides reach, so expanded (stride 0)
  and other overlapping inputs copy correctly.
* Outputs are rebuilt as new tensor objects on every replay. Each output is one of: a plain value;
  a caller input itself (the model returned its argument object, as Inductor does with the
  parameters it saves for a backward: the caller's object comes back, as in eager); a view of a
  caller input (rebuilt over that input's storage, so output/input aliasing matches eager); a
  declared constant (returned as the same object); or a view of a storage the graph allocated.
  Outputs that shared a storage at capture share one rebuilt storage, so aliasing between
  outputs is reproduced exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ._device import DeviceLayer

STATIC, POOL, COPIED, VALUE = 0, 1, 2, 3
_has_internal_overlap: Any = getattr(torch._C, "_debug_has_internal_overlap", None)


def span_elements(t: torch.Tensor) -> int:
    """Elements from the first to the last one the tensor's strides reach (0 when empty)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))


def overlaps_itself(t: torch.Tensor) -> bool:
    if any(s == 0 and n > 1 for n, s in zip(t.shape, t.stride())):
        return True
    return _has_internal_overlap is not None and _has_internal_overlap(t) != 0


@dataclass
class InputCopy:
    """Copy plan of one copied input: ``target`` is a borrowed tensor over the graph's buffer."""

    index: int
    target: torch.Tensor
    span: int  # elements copied as one flat run when the input overlaps itself; 0 otherwise

    def source(self, x: torch.Tensor) -> torch.Tensor:
        if self.span:
            return x.as_strided((self.span,), (1,), x.storage_offset())
        return x


def copy_inputs(copies: Sequence[InputCopy], inputs: Sequence[Any]) -> None:
    if not copies:
        return
    if len(copies) == 1:
        c = copies[0]
        x = inputs[c.index]
        c.target.copy_(x.as_strided((c.span,), (1,), x.storage_offset()) if c.span else x)
        return
    torch._foreach_copy_([c.target for c in copies], [c.source(inputs[c.index]) for c in copies])


_OWNED, _ALIAS, _CONST, _PLAIN, _INPUT = 0, 1, 2, 3, 4
PLAN_INPUT, PLAN_VALUE, PLAN_VIEW = -1, -2, -3  # replay_plan's kinds (storages count from 0)


@dataclass
class OutputLayout:
    """How to rebuild a graph's outputs.

    ``storages`` are (pointer, bytes) of the storages the graph allocated; ``views[g]`` lists the
    (dtype, offset, size, stride) of every output over storage ``g``. An owned output's spec is
    ``(_OWNED, g, k)``: the ``k``-th view of storage ``g``.
    """

    specs: list[tuple[Any, ...]]
    storages: list[tuple[int, int]]
    views: list[list[tuple[torch.dtype, int, tuple[int, ...], tuple[int, ...]]]]

    @staticmethod
    def analyze(
        outputs: Sequence[Any],
        recording_inputs: Sequence[Any],
        constants: Sequence[torch.Tensor],
        pool_ranges: Sequence[tuple[int, int]],
    ) -> OutputLayout:
        input_of: dict[int, tuple[int, torch.Tensor]] = {}
        index_of: dict[int, int] = {}  # id of an input object -> its first index
        for i, x in enumerate(recording_inputs):
            if isinstance(x, torch.Tensor):
                input_of.setdefault(x.untyped_storage().data_ptr(), (i, x))
                index_of.setdefault(id(x), i)
        constant_ptrs = {c.untyped_storage().data_ptr() for c in constants}
        group_of: dict[int, int] = {}
        storages: list[tuple[int, int]] = []
        views: list[list[tuple[torch.dtype, int, tuple[int, ...], tuple[int, ...]]]] = []
        specs: list[tuple[Any, ...]] = []
        for out in outputs:
            if not isinstance(out, torch.Tensor):
                specs.append((_PLAIN, out))
                continue
            storage = out.untyped_storage()
            ptr = storage.data_ptr()
            meta = (out.dtype, tuple(out.shape), tuple(out.stride()))
            same = index_of.get(id(out))
            if same is not None:
                specs.append((_INPUT, same))
            elif ptr in input_of:
                i, x = input_of[ptr]
                rel = out.storage_offset() * out.itemsize - x.storage_offset() * x.itemsize
                specs.append((_ALIAS, i, rel, out.itemsize, *meta))
            elif ptr in constant_ptrs or not any(a <= ptr < b for a, b in pool_ranges):
                # declared constants, and tensors the graph did not allocate (closures,
                # buffers the compiler did not declare), come back as the same object
                specs.append((_CONST, out))
            else:
                if ptr not in group_of:
                    group_of[ptr] = len(storages)
                    storages.append((ptr, storage.nbytes()))
                    views.append([])
                g = group_of[ptr]
                views[g].append(
                    (out.dtype, int(out.storage_offset()), tuple(out.shape), tuple(out.stride()))
                )
                specs.append((_OWNED, g, len(views[g]) - 1))
        return OutputLayout(specs, storages, views)

    def outputs(
        self,
        inputs: Sequence[Any],
        layer: DeviceLayer,
        owned: Sequence[Sequence[torch.Tensor]],
    ) -> list[Any]:
        """Outputs of one run; ``owned[g][k]`` gives the ``k``-th view of storage ``g``."""
        result: list[Any] = []
        for spec in self.specs:
            kind = spec[0]
            if kind == _OWNED:
                result.append(owned[spec[1]][spec[2]])
            elif kind == _INPUT:
                result.append(inputs[spec[1]])
            elif kind == _ALIAS:
                _, i, rel, item, dtype, size, stride = spec
                x = inputs[i]
                byte_offset = x.storage_offset() * x.itemsize + rel
                result.append(
                    layer.tensor_at(x.untyped_storage(), dtype, byte_offset // item, size, stride)
                )
            else:
                result.append(spec[1])
        return result

    def templates(self, layer: DeviceLayer, group: int) -> list[torch.Tensor]:
        """Tensors over a borrowed storage at group ``group``'s address, one per view."""
        ptr, nbytes = self.storages[group]
        storage = layer.storage_at(ptr, nbytes)
        return [
            layer.tensor_at(storage, dtype, offset, size, stride)
            for dtype, offset, size, stride in self.views[group]
        ]

    def captured(self, outputs: Sequence[Any]) -> list[list[torch.Tensor]]:
        """The capture's own output tensors, arranged like :meth:`templates`."""
        owned: list[list[torch.Tensor]] = [[] for _ in self.storages]
        for spec, out in zip(self.specs, outputs):
            if spec[0] == _OWNED:
                owned[spec[1]].append(out)
        return owned

    def replay_plan(self) -> list[tuple[int, Any]]:
        """Per output, how a replay builds it: ``(g, k)`` the ``k``-th view of storage ``g``;
        ``(PLAN_INPUT, i)`` input object ``i``; ``(PLAN_VALUE, v)`` the value or constant
        ``v``; ``(PLAN_VIEW, (i, rel, itemsize, dtype, size, stride))`` a view of input ``i``
        starting ``rel`` bytes after that input's own offset."""
        plan: list[tuple[int, Any]] = []
        for spec in self.specs:
            if spec[0] == _OWNED:
                plan.append((spec[1], spec[2]))
            elif spec[0] == _INPUT:
                plan.append((PLAN_INPUT, spec[1]))
            elif spec[0] in (_CONST, _PLAIN):
                plan.append((PLAN_VALUE, spec[1]))
            else:
                plan.append((PLAN_VIEW, spec[1:]))
        return plan

    def groups_only_in(self, outputs: frozenset[int]) -> frozenset[int]:
        """The graph-owned storages whose every output is one of ``outputs``."""
        seen: set[int] = set()
        other: set[int] = set()
        for i, spec in enumerate(self.specs):
            if spec[0] == _OWNED:
                seen.add(spec[1])
                if i not in outputs:
                    other.add(spec[1])
        return frozenset(seen - other)

    @property
    def output_bytes(self) -> int:
        return sum(n for _, n in self.storages)

    def group_output_indices(self) -> list[int]:
        """For each graph-owned storage, the index of the first output that views it."""
        first: dict[int, int] = {}
        for i, spec in enumerate(self.specs):
            if spec[0] == _OWNED:
                first.setdefault(spec[1], i)
        return [first[g] for g in range(len(self.storages))]
