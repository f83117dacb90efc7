"""What wrapping real objects into values needs of the trace session.

:func:`sapwood_tracer.interpreter.builder.wrap` and the wrappers it calls for particular
kinds of objects (real generators, range iterators) take the session through this protocol
alone, so those modules need not import the builder that calls them.
"""

from __future__ import annotations

from typing import Any, Protocol

from sapwood_graph import Source

from ..context import TraceContext
from ..values.base import Value
from .graph_bridge import GraphBridge

__all__ = ["WrappingSession"]


class WrappingSession(TraceContext[Value], Protocol):
    """What wrapping needs of the trace session beyond the value protocol: the tables of
    values already made (per source, per object), the object each value from the inputs
    was made of (by the value's ``id``) and the graph's tensor inputs."""

    by_source: dict[Source, Value]
    by_object: dict[int, tuple[Any, Value]]
    object_of: dict[int, Any]

    @property
    def graph(self) -> GraphBridge: ...

    def tensor_input(self, tensor: Any, source: Source) -> Value: ...
