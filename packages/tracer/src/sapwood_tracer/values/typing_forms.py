"""Subscriptions of typing's type hints evaluated in a function body (``List[torch.Tensor]``,
``Optional[Tuple[int, int]]``), as in ``torch.jit.annotate(List[Tensor], [])``.

typing builds these through caches keyed by functions and, in ``typing_extensions``, reads
frames: traced, that code is a graph break or runs the whole function eagerly. A type hint
depends only on its form and its arguments, so when both are objects the trace knows exactly
(constants, classes, other type hints; the form's identity guarded), the subscription is
evaluated while tracing and its result is a constant of the trace. Anything else (a value
made in the trace, a tensor) is left to the ordinary lookup of ``__getitem__``.
"""

from __future__ import annotations

from typing import Any

from .base import BuiltinValue, ConstantValue, Context, Value
from .containers import TupleValue

__all__ = ["UNKNOWN", "hint_argument", "hint_subscription", "is_type_hint"]

UNKNOWN = object()


def is_type_hint(obj: Any) -> bool:
    """A typing special form or generic alias (``typing.List``, ``List[int]``, ``Optional``).
    (``list[int]``, a ``types.GenericAlias``, is not one: the trace has no value for it.)"""
    return type(obj).__module__ in ("typing", "typing_extensions") and not isinstance(obj, type)


def hint_argument(tx: Context, value: Value, pins: list[Value]) -> Any:
    """The real object of a subscription argument, or ``UNKNOWN`` (the values whose identity
    must be pinned for it are added to ``pins``)."""
    if isinstance(value, ConstantValue):
        return value.value
    if isinstance(value, TupleValue):
        parts = [hint_argument(tx, item, pins) for item in value.items]
        return UNKNOWN if any(p is UNKNOWN for p in parts) else tuple(parts)
    cls = getattr(value, "cls", None)
    if isinstance(cls, type) and type(value).__name__ == "ClassValue":
        return cls  # (a class is guarded by its identity)
    if isinstance(value, BuiltinValue) and isinstance(value.fn, type):
        return value.fn  # ``int``, ``str``: a builtin class
    obj = getattr(value, "obj", None)
    if obj is not None and is_type_hint(obj):
        pins.append(value)
        return obj
    return UNKNOWN


def hint_subscription(tx: Context, container: Value, form: Any, key: Value) -> Value | None:
    """``form[key]`` evaluated now, for a type hint ``form``; None where it is not one or an
    argument is not exactly known."""
    if not is_type_hint(form):
        return None
    pins: list[Value] = []
    argument = hint_argument(tx, key, pins)
    if argument is UNKNOWN:
        return None
    try:
        result = form[argument]
    except Exception:  # (raised again, as it should be, by the ordinary lookup)
        return None
    if not is_type_hint(result):
        return None
    for value in (container, *pins):
        if value.source is not None:
            tx.pin_identity(value)  # type: ignore[attr-defined]
    return tx.wrap_trusted(result)  # type: ignore[attr-defined, no-any-return]
