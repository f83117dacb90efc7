"""Base value kinds: the abstract :class:`Value` and Python constants.

Invariants:

* A value never holds a real mutable object from outside the trace without a source: reads
  of such objects go through the builder, which records guards.
* :class:`ConstantValue` holds an immutable Python value (int, float, str, dtype, device, ...);
  operations on constants are folded at trace time, so they never reach the graph.
"""

from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any

import torch

from sapwood_graph import Source

from ..errors import Unsupported

if TYPE_CHECKING:
    from ..interpreter.session import TraceSession

__all__ = ["ConstantValue", "NullValue", "Value", "is_constant_type"]


class Value:
    """A value of the symbolic frame."""

    __slots__ = ("source",)

    def __init__(self, source: Source | None = None) -> None:
        self.source = source

    # -- identity ------------------------------------------------------------------
    def describe(self) -> str:
        return type(self).__name__

    def python_type(self) -> type:
        raise Unsupported(f"type() of {self.describe()}")

    def is_constant(self) -> bool:
        return False

    def as_constant(self) -> Any:
        raise Unsupported(f"{self.describe()} where a Python constant is needed")

    # -- protocol ------------------------------------------------------------------
    def getattr(self, tx: TraceSession, name: str) -> Value:
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def hasattr(self, tx: TraceSession, name: str) -> bool:
        try:
            self.getattr(tx, name)
        except _AttributeMissing:
            return False
        return True

    def setattr(self, tx: TraceSession, name: str, value: Value) -> None:
        raise Unsupported(f"setting attribute {name!r} of {self.describe()}")

    def call(self, tx: TraceSession, args: list[Value], kwargs: dict[str, Value]) -> Value:
        raise Unsupported(f"calling {self.describe()}")

    def unpack(self, tx: TraceSession) -> list[Value]:
        """The values iteration would produce (finite, no side effects)."""
        raise Unsupported(f"iterating over {self.describe()}")

    def iterate(self, tx: TraceSession) -> Value:
        from .iterators import ListIteratorValue

        return ListIteratorValue(self.unpack(tx))

    def truth(self, tx: TraceSession) -> bool:
        raise Unsupported(f"the truth value of {self.describe()}")

    def length(self, tx: TraceSession) -> int:
        raise Unsupported(f"len() of {self.describe()}")

    def getitem(self, tx: TraceSession, key: Value) -> Value:
        raise Unsupported(f"indexing {self.describe()}")

    def setitem(self, tx: TraceSession, key: Value, value: Value) -> None:
        raise Unsupported(f"item assignment on {self.describe()}")

    def delitem(self, tx: TraceSession, key: Value) -> None:
        raise Unsupported(f"item deletion on {self.describe()}")

    def contains(self, tx: TraceSession, item: Value) -> bool:
        return any(tx.equal(v, item) for v in self.unpack(tx))

    def __repr__(self) -> str:
        return f"<{self.describe()}>"


class _AttributeMissing(Unsupported):
    """An attribute lookup failed during the trace (AttributeError in Python)."""


def attribute_missing(owner: str, name: str) -> _AttributeMissing:
    return _AttributeMissing(f"attribute {name!r} of {owner}, which does not exist")


class NullValue(Value):
    """The NULL the interpreter pushes below a callable (CPython's calling convention)."""

    __slots__ = ()

    def describe(self) -> str:
        return "NULL"


NULL = NullValue()

_CONSTANT_TYPES: tuple[type, ...] = (
    int,
    float,
    bool,
    str,
    bytes,
    complex,
    type(None),
    type(Ellipsis),
    type(NotImplemented),
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    torch.finfo,
    torch.iinfo,
    range,
    slice,
    torch.Size,
    inspect.Signature,
    inspect.Parameter,
    type(inspect.Parameter.POSITIONAL_ONLY),
)


def is_constant_type(value: Any) -> bool:
    """Whether ``value`` is an immutable atom the tracer may fold at trace time."""
    if isinstance(value, torch.Size):
        return True
    if isinstance(value, (tuple, frozenset)):
        return type(value) in (tuple, frozenset) and all(is_constant_type(v) for v in value)
    return type(value) in _CONSTANT_TYPES or _is_enum_member(value)


def _is_enum_member(value: Any) -> bool:
    import enum

    return isinstance(value, enum.Enum)


class ConstantValue(Value):
    """An immutable Python value known at trace time."""

    __slots__ = ("value",)

    def __init__(self, value: Any, source: Source | None = None) -> None:
        super().__init__(source)
        self.value = value

    def describe(self) -> str:
        text = repr(self.value)
        if len(text) > 40:
            text = text[:37] + "..."
        return f"the constant {text}"

    def python_type(self) -> type:
        return type(self.value)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.value

    def getattr(self, tx: TraceSession, name: str) -> Value:
        from .functions import BuiltinValue

        try:
            attr = getattr(self.value, name)
        except AttributeError:
            raise attribute_missing(self.describe(), name) from None
        if callable(attr) and not isinstance(attr, type):
            return BuiltinValue(attr)
        if isinstance(attr, types.MappingProxyType):
            return ConstantValue(attr)  # a read-only view derived from an immutable constant
        return tx.constant_or_wrap(attr)

    def unpack(self, tx: TraceSession) -> list[Value]:
        try:
            items = list(self.value)
        except TypeError:
            raise Unsupported(f"iterating over {self.describe()}") from None
        return [tx.constant_or_wrap(v) for v in items]

    def truth(self, tx: TraceSession) -> bool:
        return bool(self.value)

    def length(self, tx: TraceSession) -> int:
        try:
            return len(self.value)
        except TypeError:
            raise Unsupported(f"len() of {self.describe()}") from None

    def getitem(self, tx: TraceSession, key: Value) -> Value:
        k = key.as_constant()
        try:
            return tx.constant_or_wrap(self.value[k])
        except (TypeError, IndexError, KeyError) as exc:
            raise Unsupported(f"indexing {self.describe()} raised {type(exc).__name__}") from exc

    def contains(self, tx: TraceSession, item: Value) -> bool:
        try:
            return item.as_constant() in self.value
        except TypeError:
            raise Unsupported(f"'in' on {self.describe()}") from None
