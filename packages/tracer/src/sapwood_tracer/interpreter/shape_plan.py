"""What one trace makes symbolic: the :class:`ShapePlan`.

A plan says which dims of which input tensors, and which int arguments, a trace makes
symbolic. The graph bridge asks it for each tensor input and the builder for each int; the
recompile policy (:mod:`sapwood_tracer.api.dynamic`) makes the plan on a cache miss.

Eligible inputs are those reached from the call's arguments through items only (arguments,
and items of the lists, tuples and dicts among them, and the next item of a loop over an
argument's iterator, read ahead at a graph break: :mod:`sapwood_tracer.pymodel.loop_items`). Module state (parameters, buffers,
ints stored on modules or objects) stays static: it does not change between calls, and a
symbolic hyper-parameter would only cost guards. Dims marked with
:func:`~sapwood_tracer.mark_dynamic` / :func:`~sapwood_tracer.mark_static` override the
rest, whatever the plan's mode says.

Invariant: a plan only ever makes more things symbolic than the static trace would; the
ShapeEnv still specialises what the code needs concrete (0/1 sizes, ``range(n)``, ...) with
guards, so a plan can never make an entry unsound, only more general.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch

from sapwood_graph import ItemSource, LocalSource, Source

from ..guards.sources import ReaderSource
from ..marks import marked_dims, marked_ranges
from ..pymodel.loop_items import next_item
from ..pymodel.overriding_tensors import plain_alias

__all__ = ["ShapePlan", "is_argument_source"]


def is_argument_source(source: Source) -> bool:
    """Reached from the call's arguments through items only (``L['x']``, ``L['xs'][0]``,
    ``next_item(L['stack 0'])[1]``)."""
    while isinstance(source, ItemSource) or (
        # (an overriding tensor's plain alias: the argument itself, as the graph sees it)
        isinstance(source, ReaderSource) and source.reader in (next_item, plain_alias)
    ):
        source = source.base  # type: ignore[assignment]
    return isinstance(source, LocalSource)


@dataclasses.dataclass(frozen=True)
class ShapePlan:
    """What one trace makes symbolic (read by the graph bridge and the builder)."""

    #: ``compile(dynamic=...)``.
    mode: bool | None = None
    #: Dims seen to vary, per tensor source (the automatic policy).
    dims: Mapping[Source, frozenset[int]] = dataclasses.field(default_factory=dict)
    #: Int sources seen to vary (the automatic policy).
    ints: frozenset[Source] = frozenset()

    def tensor_dims(self, source: Source, tensor: torch.Tensor) -> frozenset[int]:
        ndim = tensor.dim()
        if ndim == 0:
            return frozenset()
        dims: set[int] = set()
        if is_argument_source(source) and not isinstance(tensor, torch.nn.Parameter):
            if self.mode is True:
                dims = set(range(ndim))
            elif self.mode is None:
                dims = set(self.dims.get(source, ()))
        dims |= marked_dims(tensor, dynamic=True)
        dims -= marked_dims(tensor, dynamic=False)
        return frozenset(d for d in dims if d < ndim)

    def tensor_ranges(self, tensor: torch.Tensor) -> dict[int, tuple[int | None, int | None]]:
        """The ``mark_dynamic(min=, max=)`` bounds of ``tensor``'s dims that hold its sizes
        (a tensor resized out of its bounds since is traced for its new size unbounded)."""
        return {
            d: (low, high)
            for d, (low, high) in marked_ranges(tensor).items()
            if (low is None or tensor.size(d) >= low) and (high is None or tensor.size(d) <= high)
        }

    def int_is_symbolic(self, source: Source) -> bool:
        if not is_argument_source(source):
            return False
        return self.mode is True or (self.mode is None and source in self.ints)
