"""Symbolic numbers: sizes and int arguments that stay symbols in the graph.

A :class:`SymNumberValue` holds the FX proxy of a graph value whose fake value is a
``torch.SymInt`` (or ``SymFloat``) of the graph's ShapeEnv: a dynamic size of a tensor
(``x.shape[0]``), an int argument traced symbolically, or arithmetic on those.

Invariants:

* Arithmetic on symbolic numbers records a node (``operator.add`` on proxies, ...); the fake
  result decides the result's kind, so ``s0 * 2`` is symbolic and ``s0 - s0`` a constant.
* A question whose answer is a Python bool (``n > 8``, ``if n:``) is asked of the ShapeEnv
  with the fake values: it answers from the example sizes and records a guard on the
  *condition*, so a later call satisfying the same condition reuses the graph.
* Wherever the interpreter needs a real Python int (``range(n)``, list repetition, a key),
  :meth:`SymNumberValue.as_constant` specialises: the ShapeEnv records ``s0 == value`` and the
  cache entry is guarded on it. Never a silent static value.
* A size whose fake value is a plain int (static dims, 0/1-specialised dims) is a
  :class:`~sapwood_tracer.values.base.ConstantValue`, as in static traces.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import sympy
import torch

from sapwood_graph import Source

from ..errors import Unsupported
from .base import ConstantValue, Value
from .containers import NamedTupleValue, TupleValue

if TYPE_CHECKING:
    from ..interpreter.session import TraceSession
    from .tensors import TensorValue

__all__ = [
    "SYMBOLIC_METADATA",
    "SizeValue",
    "SymNumberValue",
    "has_symbolic_shape",
    "is_symbolic",
    "number_from_fake",
    "size_binary",
    "size_of",
    "symbolic_binary",
    "symbolic_extreme",
    "symbolic_numel",
    "symbolic_size",
    "symbolic_unary",
]

_SYMBOLIC_TYPES = (torch.SymInt, torch.SymFloat)
_COMPARISONS = frozenset(
    [operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge]
)
_ARITHMETIC = frozenset(
    [
        operator.add,
        operator.sub,
        operator.mul,
        operator.truediv,
        operator.floordiv,
        operator.mod,
        operator.pow,
        operator.iadd,
        operator.isub,
        operator.imul,
        operator.itruediv,
        operator.ifloordiv,
        operator.imod,
        operator.ipow,
    ]
)
_INPLACE = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
    operator.ipow: operator.pow,
}


class SymNumberValue(Value):
    """An int (or float) known to the graph only as a symbol: a proxy and its fake SymInt."""

    __slots__ = ("fake", "proxy")

    def __init__(
        self, proxy: Any, fake: torch.SymInt | torch.SymFloat, source: Source | None = None
    ):
        super().__init__(source)
        self.proxy = proxy
        self.fake = fake

    def describe(self) -> str:
        return f"the symbolic {self.python_type().__name__} {self.fake.node.expr}"

    def python_type(self) -> type:
        return int if isinstance(self.fake, torch.SymInt) else float

    def as_constant(self) -> Any:
        # Specialising: the ShapeEnv records that this expression equals its example value.
        return self.python_type()(self.fake)

    def truth(self, tx: TraceSession) -> bool:
        return bool(self.fake)  # guards on `value != 0`, not on the value

    def getattr(self, tx: TraceSession, name: str) -> Value:
        return ConstantValue(self.as_constant()).getattr(tx, name)


class SizeValue(NamedTupleValue):
    """``tensor.shape`` / ``tensor.size()`` with symbolic dims: a ``torch.Size`` of values
    (rebuilt as a ``torch.Size`` when returned, like any tuple subclass)."""

    __slots__ = ()

    def __init__(self, items: list[Value]) -> None:
        super().__init__(torch.Size, items)

    def describe(self) -> str:
        return f"a torch.Size of {len(self.items)}"

    def _new(self, items: list[Value]) -> Value:
        return SizeValue(items)

    def call_method(self, tx: TraceSession, name: str, args: list[Value], kwargs: dict) -> Value:
        if name == "numel":
            total: Value = ConstantValue(1)
            for item in self.items:
                total = symbolic_binary(tx, operator.mul, total, item)
            return total
        return super().call_method(tx, name, args, kwargs)

    def getattr(self, tx: TraceSession, name: str) -> Value:
        if name == "numel":
            from .functions import BoundBuiltinMethod

            return BoundBuiltinMethod(self, name)
        return super().getattr(tx, name)


def is_symbolic(value: Value) -> bool:
    return isinstance(value, SymNumberValue)


def _is_number_expr(fake: Any) -> bool:
    return bool(fake.node.expr.is_number)


def number_from_fake(proxy: Any, fake: Any) -> Value:
    """The value of a graph node whose fake result is a number (symbolic or not)."""
    if isinstance(fake, torch.SymBool):
        return ConstantValue(bool(fake))
    if isinstance(fake, _SYMBOLIC_TYPES):
        if _is_number_expr(fake):
            return ConstantValue(fake.node.pytype(fake.node.expr))
        return SymNumberValue(proxy, fake)
    return ConstantValue(fake)


def size_of(tx: TraceSession, tensor: TensorValue, dim: int) -> Value:
    """``tensor.size(dim)``: a constant for a static dim, else a symbolic value whose proxy is
    the symbol's own graph input where there is one (no node), else a ``sym_size`` node."""
    size = tensor.fake.shape[dim]
    if not isinstance(size, torch.SymInt) or _is_number_expr(size):
        return ConstantValue(int(size))
    expr = size.node.expr
    og = tx.graph.og
    if isinstance(expr, sympy.Symbol) and expr in og.root.bound_symbols:
        return SymNumberValue(og.root.symbol_proxy(expr), size)
    return tx.graph.call_function(tx, torch.ops.aten.sym_size.int, [tensor, ConstantValue(dim)], {})


def _number_like(value: Value) -> bool:
    if isinstance(value, SymNumberValue):
        return True
    if not isinstance(value, ConstantValue):
        return False
    return type(value.value) in (int, float, bool)


def _fake_of(value: Value) -> Any:
    return value.fake if isinstance(value, SymNumberValue) else value.as_constant()


def symbolic_binary(tx: TraceSession, fn: Any, a: Value, b: Value) -> Value:
    """``fn(a, b)`` where at least one side may be symbolic and neither is a tensor."""
    from ..pymodel import operators as _operators

    if not (is_symbolic(a) or is_symbolic(b)):
        return _operators.binary(tx, fn, a, b)
    if _number_like(a) and _number_like(b):
        if fn in _COMPARISONS:
            # the ShapeEnv evaluates the condition and guards on it
            return ConstantValue(bool(fn(_fake_of(a), _fake_of(b))))
        if fn in _ARITHMETIC:
            return tx.graph.call_function(tx, _INPLACE.get(fn, fn), [a, b], {})
    if fn in (operator.eq, operator.ne) and not _number_like(a if is_symbolic(b) else b):
        return ConstantValue(fn is operator.ne)  # an int is never equal to a non-number
    # Anything else (a list times a size, a bit operation, ...) needs the real int: specialise.
    return _operators.binary(tx, fn, _specialised(a), _specialised(b))


def _sequence_items(tx: TraceSession, value: Value) -> list[Value] | None:
    """The items of a tuple-like value (a tuple, a torch.Size, symbolic or constant)."""
    if isinstance(value, TupleValue):
        return list(value.items)
    if isinstance(value, ConstantValue) and isinstance(value.value, tuple):
        return [ConstantValue(v) for v in value.value]
    return None


def size_binary(tx: TraceSession, fn: Any, a: Value, b: Value) -> Value:
    """``fn(a, b)`` where one side is a :class:`SizeValue` (a size with symbolic dims)."""
    from ..pymodel import operators as _operators

    left, right = _sequence_items(tx, a), _sequence_items(tx, b)
    if fn in (operator.eq, operator.ne) and left is not None and right is not None:
        equal = len(left) == len(right) and all(
            symbolic_binary(tx, operator.eq, x, y).as_constant() for x, y in zip(left, right)
        )
        return ConstantValue(equal if fn is operator.eq else not equal)
    if fn is operator.add and isinstance(a, SizeValue) and right is not None:
        return SizeValue([*a.items, *right])  # torch.Size + tuple is a torch.Size
    if fn is operator.add and left is not None and right is not None:
        return TupleValue([*left, *right])
    # anything else on sizes (ordering, repetition) needs the real ints: specialise
    return _operators.binary(tx, fn, _specialised(a), _specialised(b))


def symbolic_extreme(tx: TraceSession, pick: Any, items: list[Value]) -> Value:
    """``max(...)``/``min(...)`` of numbers of which some are symbolic, without a guard."""
    fn = torch.sym_max if pick is max else torch.sym_min
    best = items[0]
    for item in items[1:]:
        best = tx.graph.call_function(tx, fn, [best, item], {})
    return best


def symbolic_unary(tx: TraceSession, fn: Any, a: SymNumberValue) -> Value:
    if fn in (operator.neg, operator.pos, operator.abs):
        return tx.graph.call_function(tx, fn, [a], {})
    if fn is operator.not_:
        return ConstantValue(not a.truth(tx))
    from ..pymodel import operators as _operators

    return _operators.unary(tx, fn, _specialised(a))


def _specialised(value: Value) -> Value:
    if isinstance(value, (SymNumberValue, SizeValue)):
        return ConstantValue(value.as_constant())
    return value


def has_symbolic_shape(fake: torch.Tensor) -> bool:
    return any(isinstance(s, torch.SymInt) and not _is_number_expr(s) for s in fake.shape)


def _dim_argument(tensor: TensorValue, args: list[Value], kwargs: dict[str, Value]) -> int | None:
    if len(args) > 1 or set(kwargs) - {"dim"}:
        raise Unsupported("Tensor.size() with more than one argument")
    given = args[0] if args else kwargs.get("dim")
    if given is None:
        return None
    dim = given.as_constant()
    if not isinstance(dim, int):
        raise Unsupported(f"Tensor.size({dim!r})")
    ndim = tensor.fake.dim()
    if not -ndim <= dim < ndim:
        raise Unsupported(f"Tensor.size({dim}) of a {ndim}-d tensor (IndexError)")
    return dim % ndim


def symbolic_size(
    tx: TraceSession, tensor: TensorValue, args: list[Value], kwargs: dict[str, Value]
) -> Value:
    """``tensor.shape`` / ``tensor.size()`` / ``tensor.size(d)`` of a tensor with symbolic dims."""
    dim = _dim_argument(tensor, args, kwargs)
    if dim is not None:
        return size_of(tx, tensor, dim)
    return SizeValue([size_of(tx, tensor, d) for d in range(tensor.fake.dim())])


def symbolic_numel(
    tx: TraceSession, tensor: TensorValue, args: list[Value], kwargs: dict[str, Value]
) -> Value:
    if args or kwargs:
        raise Unsupported("Tensor.numel() takes no arguments")
    return tx.graph.call_method(tx, "numel", [tensor], {})


#: Tensor metadata methods whose answer stays symbolic for a tensor with symbolic dims.
SYMBOLIC_METADATA: dict[str, Any] = {
    "size": symbolic_size,
    "numel": symbolic_numel,
    "nelement": symbolic_numel,
}
