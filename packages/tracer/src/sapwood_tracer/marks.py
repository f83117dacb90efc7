"""What users tell the tracer about their functions: ``disable``, ``graph_break``,
``allow_in_graph`` and ``disallow_in_graph``.

Invariants:

* The marks live on the function objects themselves (a registry keyed by the function), so
  they need no global hook and disappear with the function.
* A disabled function is never traced: a compiled caller breaks its graph at the call and
  runs it eagerly; compiling it directly returns it unchanged.
* An allowed function is recorded in the graph as one call node (fake tensors run it), never
  inlined; a disallowed one (typically a torch function) breaks the graph at every call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "allow_in_graph",
    "disable",
    "disallow_in_graph",
    "graph_break",
    "is_allowed",
    "is_disabled",
    "is_disallowed",
]

F = TypeVar("F", bound=Callable[..., Any])

_DISABLED = "__sapwood_disabled__"
_allowed: set[Any] = set()
_disallowed: set[Any] = set()


def disable(fn: F) -> F:
    """Never trace ``fn``: compiled code calling it breaks the graph and calls it eagerly.

    Usable as a decorator. Returns a wrapper with ``fn``'s name and docstring; the original is
    in ``__wrapped__``.
    """
    if not callable(fn):
        raise TypeError(f"sapwood.disable expects a callable, got {type(fn).__name__}")
    if is_disabled(fn):
        return fn

    @functools.wraps(fn)
    def disabled(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    setattr(disabled, _DISABLED, True)
    return disabled  # type: ignore[return-value]


def is_disabled(fn: Any) -> bool:
    return getattr(fn, _DISABLED, False) is True


def graph_break() -> None:
    """Split the compiled graph here (eagerly, this does nothing)."""


setattr(graph_break, _DISABLED, True)  # never traced nor compiled itself


def allow_in_graph(fn: F) -> F:
    """Record calls to ``fn`` as one node of the graph instead of tracing into it.

    ``fn`` must take and return tensors (and Python constants) and must run on fake tensors;
    the backend receives the call as it is. Returns ``fn`` itself.
    """
    if not callable(fn):
        raise TypeError(f"sapwood.allow_in_graph expects a callable, got {type(fn).__name__}")
    _disallowed.discard(fn)
    _allowed.add(fn)
    return fn


def disallow_in_graph(fn: F) -> F:
    """Never put ``fn`` in a graph: compiled code breaks the graph at each call and calls it
    eagerly (typically used on a torch function). Returns ``fn`` itself."""
    if not callable(fn):
        raise TypeError(f"sapwood.disallow_in_graph expects a callable, got {type(fn).__name__}")
    _allowed.discard(fn)
    _disallowed.add(fn)
    return fn


def is_allowed(fn: Any) -> bool:
    try:
        return fn in _allowed
    except TypeError:  # unhashable
        return False


def is_disallowed(fn: Any) -> bool:
    try:
        return fn in _disallowed
    except TypeError:
        return False
