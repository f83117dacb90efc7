"""``requires_grad = True`` on a view of graph inputs, kept in one graph.

Eagerly, a view of a tensor that does not require grad is a leaf; setting ``requires_grad``
on it makes a leaf that requires grad, whose ``.grad`` backward fills (Hugging Face's
Wav2Vec2 feature encoder does this to its input: ``x[:, None]``). No graph node can do that:
a node's result is never a leaf of the autograd graph around the compiled function. So the
entry makes that tensor itself, before the graph runs — the same views of the same input,
then ``requires_grad_()`` (:class:`~sapwood_tracer.guards.sources.LeafViewSource`) — and
passes it as a graph input that requires grad. The traced value stands for that input from
the assignment on: uses before it keep the graph's own view (no gradient flows through
them, as eagerly), and where the value escapes the entry hands out the leaf itself.

Exact only where nothing can tell the two tensors apart, so :func:`view_leaf` refuses
(:class:`~sapwood_tracer.errors.Unsupported`, a graph break) unless:

* the value is made from one graph input by view operations only (each result a view of
  its argument, every other argument a constant), and no tensor on the way requires grad;
* the views replayed on the input's fake tensor give a leaf (the graph input's fake value,
  whose sizes are expressions of the input's: the leaf needs no guard of its own), and on
  the real input the traced metadata;
* no other traced value is the same tensor object (an in-place result, ``.contiguous()`` of
  a contiguous view): it would have to become the leaf too;
* nothing writes to the input's storage in the graph, before or after (the entry makes the
  leaf before the graph runs; the graph sees two inputs). Checked again when the graph is
  compiled (:func:`check_unwritten`), through the fake tensors' version counters.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch

from sapwood_graph import Source

from ..errors import Unsupported
from ..guards.sources import VIEWED, LeafViewSource, ViewStep, make_view_leaf
from ..values.symbolic import has_symbolic_shape
from ..values.tensors import TensorValue

__all__ = ["MadeLeaf", "check_unwritten", "make_leaf_source", "shares_tensor", "view_steps"]

_serials = itertools.count()


@dataclass(frozen=True, slots=True)
class MadeLeaf:
    """A leaf the entry makes, and the fake tensor of the input it views."""

    base_fake: torch.Tensor
    source: Source


def _refuse(why: str) -> Unsupported:
    return Unsupported(
        f"setting requires_grad on {why}",
        hint="Set requires_grad outside the compiled function, or on a view of an input.",
    )


def view_steps(value: TensorValue) -> tuple[torch.fx.Node, tuple[ViewStep, ...]]:
    """The graph input ``value`` views, and the view steps from it to ``value`` (outermost
    last), or :class:`Unsupported` where ``value`` is not such a view."""
    steps: list[ViewStep] = []
    node: torch.fx.Node = value.proxy.node
    while node.op != "placeholder":
        if node.op not in ("call_function", "call_method"):
            raise _refuse("a tensor the graph computed")
        fake = node.meta.get("example_value")
        tensors = [
            i
            for i, a in enumerate(node.args)
            if isinstance(a, torch.fx.Node)
            and isinstance(a.meta.get("example_value"), torch.Tensor)
        ]
        if len(tensors) != 1 or not isinstance(fake, torch.Tensor):
            raise _refuse("a tensor the graph computed from several values")
        position = tensors[0]
        source_node = node.args[position]
        assert isinstance(source_node, torch.fx.Node)
        viewed = source_node.meta["example_value"]
        others = [*node.args[:position], *node.args[position + 1 :], *node.kwargs.values()]
        nested: list[torch.fx.Node] = []
        torch.fx.node.map_arg(others, nested.append)
        if nested:
            raise _refuse("a view whose arguments the graph computes")
        if (
            not fake._is_view()
            or fake is viewed
            or fake.untyped_storage()._cdata != (viewed.untyped_storage()._cdata)
        ):
            raise _refuse("a tensor the graph computed (not a view of an input)")
        args = tuple(VIEWED if i == position else a for i, a in enumerate(node.args))
        steps.append((node.op, node.target, args, dict(node.kwargs)))
        node = source_node
    return node, tuple(reversed(steps))


def make_leaf_source(
    value: TensorValue, base: TensorValue, real_base: torch.Tensor, fake_mode: Any
) -> tuple[LeafViewSource, torch.Tensor, torch.Tensor]:
    """The source of the leaf the entry makes for ``value`` (a view of the input ``base``),
    that leaf made now from the real input (the backend's example), and its fake value made
    the same way from the input's fake (its sizes use the input's symbols)."""
    _, steps = view_steps(value)
    assert base.input_source is not None
    if base.fake.requires_grad or value.fake.requires_grad:
        raise _refuse("a view of a tensor that requires grad")
    try:
        with torch.no_grad():
            example = make_view_leaf(real_base, steps)
        with fake_mode:
            fake = make_view_leaf(base.fake, steps)
    except Exception as exc:
        raise _refuse(f"a view that cannot be made again ({type(exc).__name__})") from exc
    if not (fake.is_leaf and fake.requires_grad and fake.dtype == value.fake.dtype):
        raise _refuse("a view that comes out otherwise when made again")
    if not has_symbolic_shape(value.fake) and (
        example.shape != value.fake.shape
        or example.stride() != value.fake.stride()
        or example.storage_offset() != value.fake.storage_offset()
    ):
        raise _refuse("a view that comes out otherwise when made again")
    return LeafViewSource(base.input_source, next(_serials), steps), example, fake


def check_unwritten(leaves: list[MadeLeaf]) -> None:
    """Refuse the graph where it writes to the storage of a leaf the entry makes (the leaf
    and its input would be two graph inputs over one storage): a fake input's version
    counter starts at 0, and every in-place operation on its storage counts."""
    for leaf in leaves:
        if leaf.base_fake._version != 0:
            raise _refuse("a view of an input that the function writes to")


def shares_tensor(graph: torch.fx.Graph, value: TensorValue) -> bool:
    """Whether another node of ``graph`` has ``value``'s fake tensor as its result (the same
    tensor object, eagerly)."""
    fake: Any = value.fake
    return any(
        n.meta.get("example_value") is fake for n in graph.nodes if n is not value.proxy.node
    )
