"""Errors a frontend can meet while building or compiling a graph.

Every error derives from :class:`GraphError`. Errors caused by another exception (a failing
fake kernel, a failing backend) chain it as ``__cause__`` so the original traceback survives.
"""

from __future__ import annotations

__all__ = [
    "BackendCompilerFailed",
    "FakePropagationError",
    "GraphError",
    "GraphInputError",
    "SubgraphError",
]


class GraphError(Exception):
    """Base class of sapwood-graph's errors."""


class FakePropagationError(GraphError):
    """Running an op on fake values failed, so the op cannot be recorded.

    ``op`` is a readable name of the target (e.g. ``torch.nonzero`` or ``Tensor.item``) and
    ``reason`` says why. A frontend typically turns this into a graph break at that op. The
    original exception is chained as ``__cause__``.
    """

    def __init__(self, op: str, reason: str, *, data_dependent: bool = False) -> None:
        self.op = op
        self.reason = reason
        self.data_dependent = data_dependent
        hint = (
            " The result depends on tensor data, which is unknown while tracing; compute it "
            "outside the compiled region or break the graph here."
            if data_dependent
            else ""
        )
        super().__init__(f"cannot trace {op}: {reason}.{hint}")


class BackendCompilerFailed(GraphError):
    """The backend raised while compiling the graph. ``backend`` names it; the cause is chained."""

    def __init__(self, backend: str, cause: BaseException) -> None:
        self.backend = backend
        super().__init__(
            f"backend {backend!r} failed to compile the graph: {type(cause).__name__}: {cause}. "
            "Try the 'eager' backend to check that the graph itself is sound."
        )


class GraphInputError(GraphError):
    """A graph input was requested in a way the graph cannot honour (e.g. wrong tracer)."""


class SubgraphError(GraphError):
    """A tracer was misused: a proxy from an unrelated or closed tracer, an output set twice, …"""
