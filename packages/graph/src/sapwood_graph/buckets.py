"""Splitting a graph at gradient-bucket boundaries, so gradients leave the backward early.

A data-parallel wrapper (torch's ``DistributedDataParallel``) all-reduces gradients in
*buckets*: parameters taken in reverse order of use, a bucket closed once its parameters fill
a byte cap. Its reducer starts a bucket's all-reduce as soon as every gradient in it is ready.
One compiled graph with a single backward (AOT autograd) hands out every gradient at the very
end, so no all-reduce can overlap the backward. Cutting the graph into one piece per bucket
gives each piece its own backward: the last piece's backward runs first and finishes its
bucket's gradients while the earlier pieces' backwards still run.

:func:`split_at_buckets` wraps a backend (``backend(gm, example_inputs) -> callable``):

1. The plan (:func:`plan_buckets`): walk the graph's nodes from the output back to the
   inputs, adding the bytes of each trainable parameter the first time a node uses it; when
   the bucket being filled has reached its cap (the first bucket has a cap of its own, as the
   reducer's), the next node opens a new bucket — but only once the current one has a node
   whose value leaves it (a piece with no outputs would be dropped). A leading piece without
   parameters joins its neighbour.
2. With one bucket, the graph goes to the backend whole. Otherwise ``torch.fx``'s
   ``split_module`` cuts it into consecutive pieces (consecutive node ranges keep the graph's
   order, so side effects keep theirs), and each piece is handed to the backend on its first
   call, with the real values it receives as example inputs.

Invariants: the split never changes what the graph computes (the pieces run in the original
node order); graphs with symbolic sizes are not split (a piece compiled lazily would see one
size only) and say so in the recorded plan; ``gm.meta["sapwood_gradient_buckets"]`` holds the
:class:`BucketPlan` for reports.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Collection
from typing import Any

import torch
from torch.fx.passes.split_module import split_module

from sapwood_graph.compiled import Backend
from sapwood_graph.errors import BackendCompilerFailed

__all__ = ["META_KEY", "BucketPlan", "GradientBucket", "plan_buckets", "split_at_buckets"]

#: Where :func:`split_at_buckets` leaves its :class:`BucketPlan` on the graph it was given.
META_KEY = "sapwood_gradient_buckets"


@dataclasses.dataclass(frozen=True)
class GradientBucket:
    """One piece of the split graph: the parameters whose gradients it produces."""

    #: Placeholder names of the parameters, in reverse order of use (the reducer's order).
    params: tuple[str, ...]
    #: Their total size in bytes.
    nbytes: int
    #: How many graph nodes (operations) the piece holds.
    node_count: int


@dataclasses.dataclass(frozen=True)
class BucketPlan:
    """How a graph was cut: its pieces in execution order, or why it was not cut."""

    buckets: tuple[GradientBucket, ...]
    bucket_cap_bytes: int
    first_bucket_cap_bytes: int
    #: ``None`` when the graph was split (two pieces or more); otherwise the reason it was not.
    not_split_because: str | None = None

    @property
    def split(self) -> bool:
        return self.not_split_because is None

    def describe(self) -> str:
        if not self.split:
            return f"not split at gradient buckets: {self.not_split_because}"
        sizes = ", ".join(
            f"{len(b.params)} params / {b.nbytes} B / {b.node_count} ops" for b in self.buckets
        )
        return (
            f"split at gradient buckets (cap {self.bucket_cap_bytes} B, first "
            f"{self.first_bucket_cap_bytes} B) into {len(self.buckets)} graphs: {sizes}"
        )


def _nbytes(value: Any) -> int:
    return int(value.numel()) * value.element_size()


def plan_buckets(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    trainable: Callable[[Any], bool],
    bucket_cap_bytes: int,
    first_bucket_cap_bytes: int,
) -> tuple[list[list[torch.fx.Node]], list[GradientBucket]]:
    """The pieces of ``gm`` (node lists in graph order, first piece first) and their buckets.

    ``trainable(example)`` says whether a placeholder's example input is a parameter whose
    gradient the data-parallel wrapper reduces.
    """
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    params = {
        node: example
        for node, example in zip(placeholders, example_inputs, strict=False)
        if isinstance(example, torch.Tensor) and trainable(example)
    }
    # built back to front: pieces[0] is the last piece of the graph
    pieces: list[list[torch.fx.Node]] = [[]]
    names: list[list[str]] = [[]]
    sizes = [0]
    counted: set[torch.fx.Node] = set()
    for node in reversed(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        cap = first_bucket_cap_bytes if len(pieces) == 1 else bucket_cap_bytes
        if sizes[-1] >= cap and _has_outside_user(pieces[-1]):
            pieces.append([])
            names.append([])
            sizes.append(0)
        for arg in node.all_input_nodes:
            if arg in params and arg not in counted:
                counted.add(arg)
                names[-1].append(arg.name)
                sizes[-1] += _nbytes(params[arg])
        pieces[-1].append(node)
    if len(pieces) > 1 and sizes[-1] == 0:
        # the graph's first nodes use no parameter: they join the piece after them
        pieces[-2].extend(pieces.pop())
        names.pop()
        sizes.pop()
    ordered = [list(reversed(piece)) for piece in reversed(pieces)]
    buckets = [
        GradientBucket(tuple(n), s, sum(1 for node in piece if node.op != "get_attr"))
        for n, s, piece in zip(reversed(names), reversed(sizes), ordered, strict=True)
    ]
    return ordered, buckets


def _has_outside_user(piece: list[torch.fx.Node]) -> bool:
    inside = set(piece)
    return any(user not in inside for node in piece for user in node.users)


def split_at_buckets(
    backend: Backend,
    *,
    bucket_cap_bytes: int,
    first_bucket_cap_bytes: int,
    params: Collection[int] | None = None,
) -> Backend:
    """A backend that cuts each graph at gradient-bucket boundaries, then hands each piece to
    ``backend``. ``params`` holds the ``id()`` of the parameters whose gradients are reduced
    (``None``: every ``nn.Parameter`` that requires a gradient)."""

    def trainable(example: Any) -> bool:
        if params is not None:
            return id(example) in params
        return isinstance(example, torch.nn.Parameter) and example.requires_grad

    def bucketed(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        def record(buckets: list[GradientBucket], why: str | None) -> None:
            gm.meta[META_KEY] = BucketPlan(
                tuple(buckets), bucket_cap_bytes, first_bucket_cap_bytes, why
            )

        if any(isinstance(x, torch.SymInt) or _is_fake(x) for x in example_inputs):
            record([], "the graph has symbolic sizes")
            return backend(gm, example_inputs)
        pieces, buckets = plan_buckets(
            gm, example_inputs, trainable, bucket_cap_bytes, first_bucket_cap_bytes
        )
        if len(pieces) < 2:
            record(buckets, "its parameters fit in one bucket")
            return backend(gm, example_inputs)
        if not all(_has_outside_user(piece) for piece in pieces):
            # (side effects only, e.g. an in-place update nothing reads): a piece without
            # outputs is not a piece split_module keeps
            record(buckets, "a piece of it would have no outputs")
            return backend(gm, example_inputs)
        record(buckets, None)
        return _compile_pieces(gm, pieces, backend)

    bucketed.__name__ = getattr(backend, "__name__", type(backend).__name__)
    return bucketed


def _is_fake(value: Any) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return isinstance(value, torch.Tensor) and bool(is_fake(value))


def _compile_pieces(
    gm: torch.fx.GraphModule, pieces: list[list[torch.fx.Node]], backend: Backend
) -> Callable[..., Any]:
    piece_of = {node: i for i, piece in enumerate(pieces) for node in piece}
    # placeholders and the output are placed by split_module itself
    options: dict[str, Any] = {"keep_original_order": True}
    if "tuple_return" in inspect.signature(split_module).parameters:
        options["tuple_return"] = True  # every piece returns a tuple, as backends expect
    split = split_module(gm, gm, lambda node: piece_of[node], **options)
    # a piece's placeholder named after one of the graph's keeps what the front end said of it
    # (outputs of an earlier piece are named after their nodes, and get nothing)
    marks = ("static_input", "layout_guarded")
    marked = {
        n.name: [m for m in marks if n.meta.get(m)] for n in gm.graph.nodes if n.op == "placeholder"
    }
    for node in split.graph.nodes:
        if node.op != "call_module":
            continue
        piece = getattr(split, node.target)
        for inner in piece.graph.nodes:
            if inner.op == "placeholder":
                for mark in marked.get(inner.name, ()):
                    inner.meta[mark] = True
        setattr(split, node.target, _LazilyCompiled(piece, backend))
    split.recompile()
    return split.forward


class _LazilyCompiled(torch.nn.Module):
    """One piece of a split graph, handed to the backend on its first call with the values
    that call receives (a static graph's pieces always receive tensors of those sizes)."""

    def __init__(self, piece: torch.fx.GraphModule, backend: Backend) -> None:
        super().__init__()
        self.piece = piece
        self._backend = backend
        self._compiled: Callable[..., Any] | None = None

    def forward(self, *args: Any) -> Any:
        compiled = self._compiled
        if compiled is None:
            backend = self._backend
            try:
                compiled = backend(self.piece, list(args))
            except Exception as exc:
                name = getattr(backend, "__name__", None) or type(backend).__name__
                raise BackendCompilerFailed(name, exc) from exc
            self._compiled = compiled
        return compiled(*args)
