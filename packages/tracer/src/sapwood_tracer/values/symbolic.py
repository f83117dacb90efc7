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
from typing import Any

import torch

from sapwood_graph import Source

from .base import BoundBuiltinMethod, ConstantValue, Context, Value
from .containers import NamedTupleValue, TupleValue

__all__ = [
    "SizeValue",
    "SymNumberValue",
    "has_symbolic_shape",
    "is_number_expr",
    "is_symbolic",
    "number_from_fake",
    "size_binary",
    "specialised",
    "specialised_int",
    "symbolic_binary",
    "symbolic_extreme",
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

    def truth(self, tx: Context) -> bool:
        return bool(self.fake)  # guards on `value != 0`, not on the value

    def getattr(self, tx: Context, name: str) -> Value:
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

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if name == "numel":
            total: Value = ConstantValue(1)
            for item in self.items:
                total = symbolic_binary(tx, operator.mul, total, item)
            return total
        return super().call_method(tx, name, args, kwargs)

    def getattr(self, tx: Context, name: str) -> Value:
        if name == "numel":
            return BoundBuiltinMethod(self, name)
        return super().getattr(tx, name)


def is_symbolic(value: Value) -> bool:
    return isinstance(value, SymNumberValue)


def is_number_expr(fake: Any) -> bool:
    return bool(fake.node.expr.is_number)


def number_from_fake(proxy: Any, fake: Any) -> Value:
    """The value of a graph node whose fake result is a number (symbolic or not)."""
    if isinstance(fake, torch.SymBool):
        return ConstantValue(bool(fake))
    if isinstance(fake, _SYMBOLIC_TYPES):
        if is_number_expr(fake):
            return ConstantValue(fake.node.pytype(fake.node.expr))
        return SymNumberValue(proxy, fake)
    return ConstantValue(fake)


def _number_like(value: Value) -> bool:
    if isinstance(value, SymNumberValue):
        return True
    if not isinstance(value, ConstantValue):
        return False
    return type(value.value) in (int, float, bool)


def _fake_of(value: Value) -> Any:
    return value.fake if isinstance(value, SymNumberValue) else value.as_constant()


def symbolic_binary(tx: Context, fn: Any, a: Value, b: Value) -> Value:
    """``fn(a, b)`` where at least one side may be symbolic and neither is a tensor."""
    if not (is_symbolic(a) or is_symbolic(b)):
        return tx.binary_operation(fn, a, b)
    if fn in (operator.pow, operator.ipow) and is_symbolic(b):
        # a symbolic exponent: the ShapeEnv's power of naturals fails on some bases (0 ** n,
        # asked whether it is 0, recurses): the exponent is specialised (guarded)
        return tx.binary_operation(fn, specialised(a), specialised(b))
    if _number_like(a) and _number_like(b):
        if fn in _COMPARISONS:
            # the ShapeEnv evaluates the condition and guards on it
            return ConstantValue(bool(fn(_fake_of(a), _fake_of(b))))
        if fn in _ARITHMETIC:
            # a bool takes part as the int it is (its arithmetic gives ints; the ShapeEnv's
            # symbolic arithmetic does not take bools)
            a, b = _int_if_bool(a), _int_if_bool(b)
            result = tx.graph.call_function(tx, _INPLACE.get(fn, fn), [a, b], {})
            if is_symbolic(result) or _folds_for_every_value(_INPLACE.get(fn, fn), a, b):
                return result
            # The ShapeEnv folded symbolic operands to a constant, with no guard. Its rules are
            # not all sound (``Max(2, 2*n) % 6`` folds to 0: it takes ``Max(2, 2*n) / 6`` for
            # an integer), so the operands are specialised (guarded) and Python computes it.
            return tx.binary_operation(fn, specialised(a), specialised(b))
    if fn in (operator.eq, operator.ne) and not _number_like(a if is_symbolic(b) else b):
        return ConstantValue(fn is operator.ne)  # an int is never equal to a non-number
    # Anything else (a list times a size, a bit operation, ...) needs the real int: specialise.
    return tx.binary_operation(fn, specialised(a), specialised(b))


def _folds_for_every_value(fn: Any, a: Value, b: Value) -> bool:
    """Whether ``fn(a, b)`` is the same number whatever the symbols are, by Python's own
    arithmetic: a product with a constant 0, a difference of one expression with itself, a
    remainder by 1 or -1. The ShapeEnv's other folds are not trusted (see the caller)."""
    if a.python_type() not in (int, bool) or b.python_type() not in (int, bool):
        return False  # (a float may be inf or nan: ``inf * 0`` is nan)
    constant = [v.as_constant() for v in (a, b) if isinstance(v, ConstantValue)]
    if fn is operator.mul and 0 in constant:
        return True
    if fn is operator.mod and isinstance(b, ConstantValue) and b.as_constant() in (1, -1):
        return True
    if fn is operator.sub and isinstance(a, SymNumberValue) and isinstance(b, SymNumberValue):
        return bool(a.fake.node.expr == b.fake.node.expr)
    return False


def _int_if_bool(value: Value) -> Value:
    if isinstance(value, ConstantValue) and type(value.value) is bool:
        return ConstantValue(int(value.value))
    return value


def _sequence_items(tx: Context, value: Value) -> list[Value] | None:
    """The items of a tuple-like value (a tuple, a torch.Size, symbolic or constant)."""
    if isinstance(value, TupleValue):
        return list(value.items)
    if isinstance(value, ConstantValue) and isinstance(value.value, tuple):
        return [ConstantValue(v) for v in value.value]
    return None


def size_binary(tx: Context, fn: Any, a: Value, b: Value) -> Value:
    """``fn(a, b)`` where one side is a :class:`SizeValue` (a size with symbolic dims)."""
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
    return tx.binary_operation(fn, specialised(a), specialised(b))


def symbolic_extreme(tx: Context, pick: Any, items: list[Value]) -> Value:
    """``max(...)``/``min(...)`` of numbers of which some are symbolic, without a guard."""
    fn = torch.sym_max if pick is max else torch.sym_min
    best = items[0]
    for item in items[1:]:
        best = tx.graph.call_function(tx, fn, [best, item], {})
    return best


def symbolic_unary(tx: Context, fn: Any, a: SymNumberValue) -> Value:
    if fn in (operator.neg, operator.pos, operator.abs):
        return tx.graph.call_function(tx, fn, [a], {})
    if fn is operator.not_:
        return ConstantValue(not a.truth(tx))
    return tx.unary_operation(fn, specialised(a))


def specialised(value: Value) -> Value:
    """A symbolic number as the constant it is in this call (guarded); anything else as is."""
    if isinstance(value, (SymNumberValue, SizeValue)):
        return ConstantValue(value.as_constant())
    return value


def specialised_int(value: Value) -> Value:
    """A symbolic int as the constant it is in this call (guarded); a symbolic float computed
    from symbolic ints by Python's arithmetic (``i / 1000``) as the float that arithmetic
    makes of their values (the ints guarded); anything else, as is (a guard comparing floats
    is one the guards cannot express)."""
    if isinstance(value, SymNumberValue) and value.python_type() is int:
        return ConstantValue(value.as_constant())
    if isinstance(value, SymNumberValue):
        replayed = _replayed(value.proxy.node, depth=0)
        if type(replayed) is float:
            return ConstantValue(replayed)
    return value


#: operations of Python numbers a symbolic float's node may be made by, replayed on values
_REPLAYED = frozenset([*_ARITHMETIC, operator.neg, operator.pos, operator.abs, torch.sym_float])
_NOT_REPLAYED = object()


def _replayed(node: Any, depth: int) -> Any:
    """The Python number graph node ``node`` stands for, computed again by Python's own
    operations from the values of the symbolic ints it is made of (each specialised: the
    cache entry is guarded on it), so the result is bit for bit eager's; ``_NOT_REPLAYED``
    where it is made otherwise (a tensor's item, a float input)."""
    if not isinstance(node, torch.fx.Node):
        return node if type(node) in (int, float, bool) else _NOT_REPLAYED
    example = node.meta.get("example_value")
    if isinstance(example, torch.SymInt):
        return int(example)  # (specialises)
    if (
        depth > 32
        or not isinstance(example, torch.SymFloat)
        or node.op != "call_function"
        or node.target not in _REPLAYED
        or node.kwargs
    ):
        return _NOT_REPLAYED
    operands = [_replayed(arg, depth + 1) for arg in node.args]
    if any(operand is _NOT_REPLAYED for operand in operands):
        return _NOT_REPLAYED
    target = float if node.target is torch.sym_float else node.target
    try:
        return target(*operands)
    except (ArithmeticError, ValueError):
        return _NOT_REPLAYED


def has_symbolic_shape(fake: torch.Tensor) -> bool:
    return any(isinstance(s, torch.SymInt) and not is_number_expr(s) for s in fake.shape)
