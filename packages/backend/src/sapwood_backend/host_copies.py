"""Host tensors a graph copies to the GPU, copied before the graph instead of inside it.

A CUDA graph cannot capture a copy from ordinary (pageable) host memory: the capture fails and
the graph runs without CUDA graphs. Code that moves a CPU tensor to the GPU inside the compiled
region is common — transformers' static KV cache does it on its first call, moving its position
counter (``self.cumulative_length.to(self.device)``) — so such a graph would never be replayed.

:func:`hoist_host_copies` takes the copy out: a CPU graph input whose *every* use is a copy to
another device (``x.to(...)`` or ``x.cuda(...)`` with constant arguments) is removed from the
graph, each copy becomes a new input of the graph, and a prologue runs the same copies on the
caller's tensor just before the graph runs. Nothing between the two can tell the difference:

* the CPU tensor is only read by those copies, so the graph cannot write it, and nothing runs
  between the prologue and the graph, so the copies see the value the graph would have read;
* each copy is made anew on every call, and the graph clones its new input once where the copy
  was, so a copy the program writes in place or returns is a tensor of the graph's own, never
  the prologue's buffer (a runtime that stages inputs in buffers of its own stays correct).

A CPU input used in any other way (read by a CPU operation, written in place, a copy whose
arguments come from the graph) stays where it is; the runtime then reports why the graph
cannot be captured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

__all__ = ["HoistedCopies", "hoist_host_copies"]

_COPY_METHODS = ("to", "cuda")


@dataclass(frozen=True)
class _Copy:
    """One copy taken out of the graph: ``getattr(args[source], method)(*args, **kwargs)``."""

    source: int
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def run(self, inputs: Sequence[Any]) -> Any:
        return getattr(inputs[self.source], self.method)(*self.args, **self.kwargs)


@dataclass(frozen=True)
class HoistedCopies:
    """The graph with its host copies taken out, and how a call's inputs are made for it."""

    gm: torch.fx.GraphModule
    example_inputs: list[Any]
    removed: frozenset[int]
    copies: tuple[_Copy, ...]

    def inputs_for(self, inputs: Sequence[Any]) -> list[Any]:
        """The inputs of the rewritten graph for one call of the original graph."""
        kept = [value for index, value in enumerate(inputs) if index not in self.removed]
        return kept + [copy.run(inputs) for copy in self.copies]

    def wrap(self, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """A callable with the original graph's signature that runs ``compiled``."""

        def with_copies_first(*inputs: Any) -> Any:
            return compiled(*self.inputs_for(inputs))

        return with_copies_first


def _mentions_node(value: Any) -> bool:
    found = False

    def visit(item: Any) -> Any:
        nonlocal found
        found = found or isinstance(item, torch.fx.Node)
        return item

    torch.fx.node.map_aggregate(value, visit)
    return found


def _is_copy_off_host(node: torch.fx.Node, source: torch.fx.Node) -> bool:
    """Whether ``node`` copies ``source`` (a CPU tensor) to another device, arguments constant."""
    if node.op != "call_method" or node.target not in _COPY_METHODS:
        return False
    if not node.args or node.args[0] is not source or source in node.args[1:]:
        return False
    if _mentions_node(node.args[1:]) or _mentions_node(node.kwargs):
        return False
    result = node.meta.get("example_value")
    return isinstance(result, torch.Tensor) and result.device.type != "cpu"


def _copies_only(node: torch.fx.Node, value: Any) -> bool:
    if type(value) not in (torch.Tensor, torch.nn.Parameter):
        return False
    if value.device.type != "cpu" or value.requires_grad or value.layout != torch.strided:
        return False
    return bool(node.users) and all(_is_copy_off_host(user, node) for user in node.users)


def hoist_host_copies(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> HoistedCopies | None:
    """Take the copies of CPU inputs to another device out of ``gm`` (see the module docstring).

    Returns None when there is none; ``gm`` is then left as it was. Otherwise ``gm`` is
    rewritten in place and returned in the result, with example inputs for its new signature.
    """
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return None
    hoisted = [
        index
        for index, (node, value) in enumerate(zip(placeholders, example_inputs))
        if _copies_only(node, value)
    ]
    if not hoisted:
        return None
    graph = gm.graph
    copies: list[_Copy] = []
    new_inputs: list[Any] = []
    last = placeholders[-1]
    for index in hoisted:
        source = placeholders[index]
        for user in list(source.users):
            copy = _Copy(index, str(user.target), tuple(user.args[1:]), dict(user.kwargs))
            with graph.inserting_after(last):
                moved = graph.placeholder(f"{source.name}_moved_{len(copies)}")
            moved.meta.update(
                {key: user.meta[key] for key in ("example_value", "val") if key in user.meta}
            )
            # the copy's layout follows the host tensor's, which the front end's guards fix
            if source.meta.get("layout_guarded"):
                moved.meta["layout_guarded"] = True
            last = moved
            with graph.inserting_before(user):
                fresh = graph.call_method("clone", (moved,))
            fresh.meta.update(user.meta)
            user.replace_all_uses_with(fresh)
            graph.erase_node(user)
            copies.append(copy)
            new_inputs.append(copy.run(example_inputs))
        graph.erase_node(source)
    graph.lint()
    gm.recompile()
    removed = frozenset(hoisted)
    kept = [value for index, value in enumerate(example_inputs) if index not in removed]
    return HoistedCopies(gm, kept + new_inputs, removed, tuple(copies))
