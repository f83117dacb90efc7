"""CompiledGraph: what compiling an :class:`~sapwood_graph.OutputGraph` returns.

Invariants:

* ``fn`` is exactly what the backend returned; it takes the graph inputs positionally, in the
  order of ``input_sources``, and returns a flat sequence of graph outputs.
* :class:`OutputSpec` rebuilds the structure the frontend asked for (nested tuples, lists,
  dicts, namedtuples) from those flat outputs, putting back constants that never entered the
  graph. A graph output and a constant keep their original positions.
* A CompiledGraph keeps no example inputs alive.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree

from sapwood_graph.guards import GuardSet
from sapwood_graph.sources import Source

__all__ = ["STAGE_TIMES_META_KEY", "Backend", "CompiledGraph", "OutputSpec"]

#: The backend protocol shared with ``torch.compile``: ``backend(gm, example_inputs) -> callable``.
Backend = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]

#: Where a backend may note the seconds its own stages took (``gm.meta[STAGE_TIMES_META_KEY]
#: = {"aot_autograd": 0.4, "inductor": 2.1}``) for a frontend to report with its own.
STAGE_TIMES_META_KEY = "sapwood_stage_times"


@dataclasses.dataclass(frozen=True)
class _Constant:
    value: Any


@dataclasses.dataclass(frozen=True, eq=False)
class OutputSpec:
    """The structure of a compiled region's result.

    ``leaves`` holds, per leaf of the structure, either the index of a graph output (int) or
    a constant wrapper; ``treespec`` is the ``torch.utils._pytree`` spec of the structure.
    """

    treespec: pytree.TreeSpec
    leaves: tuple[int | _Constant, ...]

    @property
    def num_graph_outputs(self) -> int:
        """How many values the graph itself returns."""
        return sum(1 for leaf in self.leaves if isinstance(leaf, int))

    def rebuild(self, graph_outputs: Sequence[Any]) -> Any:
        """The user-visible result from the graph's flat outputs."""
        values = [
            graph_outputs[leaf] if isinstance(leaf, int) else leaf.value for leaf in self.leaves
        ]
        return pytree.tree_unflatten(values, self.treespec)


@dataclasses.dataclass(frozen=True, eq=False)
class CompiledGraph:
    """A compiled region: the backend's callable and how to feed and read it."""

    #: What the backend returned: ``fn(*inputs) -> flat outputs``.
    fn: Callable[..., Any]
    #: Where each input of ``fn`` comes from, in call order.
    input_sources: tuple[Source, ...]
    #: How to rebuild the result structure from ``fn``'s outputs.
    output_spec: OutputSpec
    #: The graph handed to the backend (after DCE and input pruning).
    graph_module: torch.fx.GraphModule
    #: Every guard the graph relies on, shape guards and alias guards included.
    guards: GuardSet
    #: The backend's name, for messages.
    backend_name: str

    def __call__(self, *inputs: Any) -> Any:
        """Run with the real input values (in ``input_sources`` order); returns the
        structured result."""
        return self.output_spec.rebuild(self.fn(*inputs))

    def resolve_inputs(
        self,
        f_locals: Mapping[str, Any],
        f_globals: Mapping[str, Any] | None = None,
        function: Callable[..., Any] | None = None,
    ) -> list[Any]:
        """The input values for a call, resolved from their sources (a slow, generic path;
        a frontend usually generates its own access code)."""
        globs = f_globals if f_globals is not None else {}
        return [s.resolve(f_locals, globs, function) for s in self.input_sources]
