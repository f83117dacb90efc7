"""What users tell the tracer about their functions and tensors: ``disable``,
``graph_break``, ``allow_in_graph`` and ``disallow_in_graph`` on functions; ``mark_dynamic``,
``mark_static`` and ``mark_static_address`` on tensors.

Invariants:

* The marks live on the function objects themselves (a registry keyed by the function), so
  they need no global hook and disappear with the function.
* A disabled function is never traced: a compiled caller breaks its graph at the call and
  runs it eagerly; compiling it directly returns it unchanged. torch's disable marks
  (``torch.compiler.disable``, recursive or not) are honoured the same way: sapwood has no
  frame hook, so a non-recursive one also leaves the functions it calls uncompiled.
* An allowed function is recorded in the graph as one call node (fake tensors run it), never
  inlined; a disallowed one (typically a torch function) breaks the graph at every call.
* Dims marked dynamic or static are stored on the tensor object and read when a call
  traces (see :mod:`sapwood_tracer.interpreter.shape_plan`); they override
  ``compile(dynamic=...)`` per dim. torch's own ``mark_dynamic`` (with its ``min``/``max``)
  and ``maybe_mark_dynamic`` marks are read too. A ``mark_dynamic`` dim the code specialises
  is reported (a warning; ``fullgraph=True``: an error), a ``maybe_mark_dynamic`` one not.
* A tensor marked with ``mark_static_address`` (sapwood's or torch's: one attribute, so each
  compiler honours the other's mark) is a static input of the graphs that take it: the CUDA
  graph trees read and write it at its own address instead of copying it into a buffer.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, overload

import torch

__all__ = [
    "allow_in_graph",
    "disable",
    "disabled_reason",
    "disallow_in_graph",
    "graph_break",
    "is_allowed",
    "is_disabled",
    "is_disallowed",
    "is_torch_graph_break",
    "mark_dynamic",
    "mark_static",
    "mark_static_address",
    "marked_dims",
    "marked_ranges",
    "maybe_mark_dynamic",
    "static_address_marked",
]

F = TypeVar("F", bound=Callable[..., Any])

_DISABLED = "__sapwood_disabled__"
_DISABLED_REASON = "__sapwood_disabled_reason__"
#: what ``torch.compiler.disable`` / ``torch._dynamo.disable`` set on their wrapper
_TORCH_DISABLED = "_torchdynamo_disable"
_allowed: set[Any] = set()
_disallowed: set[Any] = set()


@overload
def disable(fn: F, recursive: bool = True, *, reason: str | None = None) -> F: ...
@overload
def disable(
    fn: None = None, recursive: bool = True, *, reason: str | None = None
) -> Callable[[F], F]: ...
def disable(fn: Any = None, recursive: bool = True, *, reason: str | None = None) -> Any:
    """Never trace ``fn``: compiled code calling it breaks the graph and calls it eagerly.

    torch.compiler.disable's signature: usable as ``@disable``, ``@disable()`` or
    ``@disable(reason="...")``; ``reason`` is quoted where the graph breaks. ``recursive=False``
    is accepted and means the same here: sapwood has no frame hook, so what ``fn`` calls is
    not compiled either way. Returns a wrapper with ``fn``'s name and docstring; the original
    is in ``__wrapped__``.
    """
    if type(recursive) is not bool:
        raise TypeError(f"sapwood.disable(recursive=...) takes a bool, not {recursive!r}")
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"sapwood.disable(reason=...) takes a str, not {type(reason).__name__}")
    if fn is None:
        return lambda target: disable(target, recursive, reason=reason)
    if not callable(fn):
        raise TypeError(f"sapwood.disable expects a callable, got {type(fn).__name__}")
    if is_disabled(fn) and reason is None:
        return fn

    @functools.wraps(fn)
    def disabled(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    setattr(disabled, _DISABLED, True)
    if reason:
        setattr(disabled, _DISABLED_REASON, reason)
    return disabled


def is_disabled(fn: Any) -> bool:
    """``fn`` was excluded from compiling, by sapwood's :func:`disable` or by torch's
    (``torch.compiler.disable`` / ``torch._dynamo.disable``, recursive or not)."""
    return getattr(fn, _DISABLED, False) is True or getattr(fn, _TORCH_DISABLED, False) is True


def disabled_reason(fn: Any) -> str | None:
    """Which mark excluded ``fn`` from compiling, with the reason the user gave, in words for
    a graph break; None for sapwood's own mark given no reason."""
    if getattr(fn, _DISABLED, False) is True:
        given = getattr(fn, _DISABLED_REASON, None)
        return f"sapwood.disable: {given}" if isinstance(given, str) else None
    if getattr(fn, _TORCH_DISABLED, False) is not True:
        return None
    reason = getattr(fn, "_torchdynamo_disable_msg", None)
    said = f": {reason}" if isinstance(reason, str) and reason else ""
    return f"torch.compiler.disable{said}"


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
    """Marked by :func:`allow_in_graph`, or by torch's (``torch.compiler.allow_in_graph``),
    and not disallowed since."""
    try:
        if fn in _allowed:
            return True
    except TypeError:  # unhashable
        return False
    return fn not in _disallowed and _in_torch_rules(fn, "_allowed_callable_ids")


def is_disallowed(fn: Any) -> bool:
    """Marked by :func:`disallow_in_graph`, or by torch's (``torch._dynamo.disallow_in_graph``,
    and torch's own ``torch._dynamo.graph_break``), and not allowed since."""
    try:
        if fn in _disallowed:
            return True
    except TypeError:
        return False
    return fn not in _allowed and _in_torch_rules(fn, "_disallowed_callable_ids")


def is_torch_graph_break(fn: Any) -> bool:
    """``torch._dynamo.graph_break``: a graph break where it is called, as sapwood's own."""
    decorators = sys.modules.get("torch._dynamo.decorators")
    return decorators is not None and fn is getattr(decorators, "graph_break", None)


def _in_torch_rules(fn: Any, table: str) -> bool:
    """Whether torch's trace rules list ``fn`` in ``table`` (ids kept by torch._dynamo; read
    only where the program loaded it, never imported for this)."""
    rules = sys.modules.get("torch._dynamo.trace_rules")
    ids = getattr(rules, table, None)
    if ids is None:
        return False
    try:
        return id(fn) in ids
    except Exception:  # (torch's internals changed: its marks are not read)
        return False


# ----------------------------------------------------------------------- dims of tensors
_DYNAMIC_ATTR = "_sapwood_dynamic_dims"
_WEAK_DYNAMIC_ATTR = "_sapwood_weak_dynamic_dims"
_RANGES_ATTR = "_sapwood_dynamic_ranges"
_STATIC_ATTR = "_sapwood_static_dims"
#: what ``torch._dynamo.mark_dynamic`` / ``maybe_mark_dynamic`` store: honoured too, so
#: marked inputs carry over
_TORCH_DYNAMIC_ATTR = "_dynamo_dynamic_indices"
_TORCH_WEAK_DYNAMIC_ATTR = "_dynamo_weak_dynamic_indices"
_TORCH_RANGES_ATTR = "_dynamo_dynamic_range"  # a set of (dim, min, max) records


def _dims(tensor: torch.Tensor, dim: int | Iterable[int], what: str) -> set[int]:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} takes a tensor, not {type(tensor).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    ndim = tensor.dim()
    out = set()
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"{what}: dims are ints, not {type(d).__name__}")
        if not -ndim <= d < ndim:
            raise IndexError(f"{what}: dim {d} is out of range for a {ndim}-d tensor")
        out.add(d % ndim)
    return out


def _bound(value: int | None, what: str) -> int | None:
    if value is not None and (type(value) is not int or value < 0):
        raise TypeError(f"mark_dynamic: {what} must be an int >= 0 or None, not {value!r}")
    return value


def mark_dynamic(
    tensor: torch.Tensor,
    dim: int | Iterable[int],
    *,
    min: int | None = None,
    max: int | None = None,
) -> None:
    """Trace ``dim`` (an int or several) of ``tensor`` symbolically whenever it is an input.

    ``min``/``max`` bound the sizes the compiled code is for: the size is guarded to stay
    within them (a call outside traces again), and the tensor's size now must lie within.
    The mark is stored on the tensor object and read when a call traces. A size of 0 or 1
    is still specialised (as torch's ShapeEnv does); use sizes >= 2 for the first call. If
    the traced code needs one exact size (``if x.shape[0] == 4``), the dim is specialised
    all the same, with a warning naming the line (``fullgraph=True``: an
    :class:`~sapwood_tracer.Unsupported` error); :func:`maybe_mark_dynamic` does not warn.
    """
    dims = _dims(tensor, dim, "mark_dynamic")
    low, high = _bound(min, "min"), _bound(max, "max")
    if low is not None and high is not None and low > high:
        raise ValueError(f"mark_dynamic: min={low} is greater than max={high}")
    ranges = dict(getattr(tensor, _RANGES_ATTR, {}))
    for d in sorted(dims):
        size = tensor.size(d)
        if (low is not None and size < low) or (high is not None and size > high):
            raise ValueError(
                f"mark_dynamic: dim {d} of the tensor has size {size}, outside [{low}, {high}]"
            )
        if low is None and high is None:
            ranges.pop(d, None)
        else:
            ranges[d] = (low, high)
    _add(tensor, _DYNAMIC_ATTR, dims)
    setattr(tensor, _RANGES_ATTR, ranges)
    _remove(tensor, _STATIC_ATTR, dims)


def maybe_mark_dynamic(tensor: torch.Tensor, dim: int | Iterable[int]) -> None:
    """Like :func:`mark_dynamic`, but the code may specialise the dim without a warning or
    an error (torch's ``maybe_mark_dynamic``)."""
    dims = _dims(tensor, dim, "maybe_mark_dynamic")
    _add(tensor, _WEAK_DYNAMIC_ATTR, dims)
    _remove(tensor, _STATIC_ATTR, dims)


def mark_static(tensor: torch.Tensor, dim: int | Iterable[int]) -> None:
    """Keep ``dim`` of ``tensor`` static (its size guarded exactly), even with
    ``compile(dynamic=True)`` or after sizes varied."""
    dims = _dims(tensor, dim, "mark_static")
    _add(tensor, _STATIC_ATTR, dims)
    _remove(tensor, _DYNAMIC_ATTR, dims)
    _remove(tensor, _WEAK_DYNAMIC_ATTR, dims)


def _add(tensor: torch.Tensor, attr: str, dims: set[int]) -> None:
    setattr(tensor, attr, frozenset(set(getattr(tensor, attr, ())) | dims))


def _remove(tensor: torch.Tensor, attr: str, dims: set[int]) -> None:
    if hasattr(tensor, attr):
        setattr(tensor, attr, frozenset(set(getattr(tensor, attr)) - dims))


_STATIC_ADDRESS_ATTR = "_dynamo_static_input_type"  # torch.compile's attribute, shared


def mark_static_address(tensor: torch.Tensor, guard: bool = False) -> None:
    """Declare that ``tensor`` keeps its storage between calls (a static key/value cache).

    Graphs that take it treat it as module state: a CUDA graph recorded with it reads and
    writes it in place, and checks its address at each replay (a tensor that moved is
    recorded again). ``guard`` is accepted for ``torch._dynamo.mark_static_address``'s
    signature; sapwood checks the address either way. Same attribute as torch's mark.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"mark_static_address expects a tensor, got {type(tensor).__name__}")
    setattr(tensor, _STATIC_ADDRESS_ATTR, "guarded" if guard else "unguarded")


def static_address_marked(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` carries sapwood's or torch's ``mark_static_address`` mark."""
    return getattr(tensor, _STATIC_ADDRESS_ATTR, None) in ("guarded", "unguarded")


def marked_dims(tensor: torch.Tensor, *, dynamic: bool, strict: bool = False) -> set[int]:
    """The dims of ``tensor`` marked dynamic (by sapwood or by torch; ``strict``: only by
    ``mark_dynamic``, not ``maybe_mark_dynamic``), or marked static."""
    if not dynamic:
        return _marked(tensor, _STATIC_ATTR)
    dims = _marked(tensor, _DYNAMIC_ATTR) | _marked(tensor, _TORCH_DYNAMIC_ATTR)
    if not strict:
        dims |= _marked(tensor, _WEAK_DYNAMIC_ATTR) | _marked(tensor, _TORCH_WEAK_DYNAMIC_ATTR)
    return dims


def marked_ranges(tensor: torch.Tensor) -> dict[int, tuple[int | None, int | None]]:
    """The ``min``/``max`` bounds given to ``mark_dynamic`` (sapwood's or torch's) per dim."""
    ndim = tensor.dim()
    out: dict[int, tuple[int | None, int | None]] = {}
    for record in getattr(tensor, _TORCH_RANGES_ATTR, ()):
        dim, low, high = (getattr(record, n, None) for n in ("dim", "min", "max"))
        if type(dim) is int and -ndim <= dim < ndim and (low is not None or high is not None):
            out[dim % ndim] = (low, high)
    for dim, bounds in dict(getattr(tensor, _RANGES_ATTR, {})).items():
        if -ndim <= dim < ndim:
            out[dim % ndim] = bounds
    return out


def _marked(tensor: torch.Tensor, attr: str) -> set[int]:
    ndim = tensor.dim()
    return {d % ndim for d in getattr(tensor, attr, ()) if ndim and -ndim <= d < ndim}
