"""The special method names behind Python's operators, shared by the operator models
(:mod:`.operators`, and :mod:`.torch_function_protocol` for tensors with a
``__torch_function__`` of their own)."""

from __future__ import annotations

import builtins
import operator
from typing import Any

__all__ = ["DUNDER", "INPLACE_DUNDER", "INPLACE_TO_BINARY", "UNARY_DUNDER"]

#: operator function -> (its method, the reflected method Python tries next)
DUNDER: dict[Any, Any] = {
    operator.add: ("__add__", "__radd__"),
    operator.sub: ("__sub__", "__rsub__"),
    operator.mul: ("__mul__", "__rmul__"),
    operator.truediv: ("__truediv__", "__rtruediv__"),
    operator.floordiv: ("__floordiv__", "__rfloordiv__"),
    operator.mod: ("__mod__", "__rmod__"),
    operator.pow: ("__pow__", "__rpow__"),
    operator.matmul: ("__matmul__", "__rmatmul__"),
    operator.and_: ("__and__", "__rand__"),
    operator.or_: ("__or__", "__ror__"),
    operator.xor: ("__xor__", "__rxor__"),
    operator.lshift: ("__lshift__", "__rlshift__"),
    operator.rshift: ("__rshift__", "__rrshift__"),
    builtins.divmod: ("__divmod__", "__rdivmod__"),
    operator.lt: ("__lt__", "__gt__"),
    operator.le: ("__le__", "__ge__"),
    operator.gt: ("__gt__", "__lt__"),
    operator.ge: ("__ge__", "__le__"),
    operator.eq: ("__eq__", "__eq__"),
    operator.ne: ("__ne__", "__ne__"),
}

#: in-place operator function -> the binary one Python falls back to
INPLACE_TO_BINARY: dict[Any, Any] = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
    operator.ipow: operator.pow,
    operator.imatmul: operator.matmul,
    operator.iand: operator.and_,
    operator.ior: operator.or_,
    operator.ixor: operator.xor,
    operator.ilshift: operator.lshift,
    operator.irshift: operator.rshift,
}

#: in-place operator function -> its method
INPLACE_DUNDER: dict[Any, Any] = {
    operator.iadd: "__iadd__",
    operator.isub: "__isub__",
    operator.imul: "__imul__",
    operator.itruediv: "__itruediv__",
    operator.ifloordiv: "__ifloordiv__",
    operator.imod: "__imod__",
    operator.ipow: "__ipow__",
    operator.imatmul: "__imatmul__",
    operator.iand: "__iand__",
    operator.ior: "__ior__",
    operator.ixor: "__ixor__",
    operator.ilshift: "__ilshift__",
    operator.irshift: "__irshift__",
}

#: unary operator function -> its method
UNARY_DUNDER: dict[Any, Any] = {
    operator.neg: "__neg__",
    operator.pos: "__pos__",
    operator.invert: "__invert__",
    operator.abs: "__abs__",
}
