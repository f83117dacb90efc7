"""Guard code for dynamic shapes: ShapeEnv expressions and tensors with free dims.

The graph package records what the ShapeEnv assumed as ``SHAPE`` guards: a sympy boolean
over symbols, each bound to a source (``L['x'].size()[0]``, ``L['n']``). This module renders
such an expression as Python for the generated guard function of :mod:`.emitter`.

Invariants (the same as the rest of the generated code):

* The rendered text is built *only* from the emitter's locals (``v<n>``, one per source, so
  a size read by several guards is read once), namespace names (``k<n>``, for exact
  fractions and math functions), integer literals, operators and fixed builtins (``max``,
  ``min``). Nothing from the user or from sympy's printers is spliced in.
* An expression with a construct not listed here is refused (:class:`Unsupported`): a
  guard is never weakened or dropped.
* A tensor guard with free dims checks the rank, the static sizes and strides, and every
  other property; free dims are left to the shape guards.
"""

from __future__ import annotations

import fractions
import functools
import math
from typing import TYPE_CHECKING, Any

from sapwood_graph import Guard, TensorSpec

from ..errors import Unsupported
from .emitter import Emitter

if TYPE_CHECKING:
    import sympy

__all__ = ["dynamic_tensor_check", "shape_guard_check"]

# (sympy is imported where a shape guard is first rendered, not with sapwood: it costs about
# a quarter of a second to import)


@functools.cache
def _relations() -> dict[type, str]:
    import sympy

    return {
        sympy.Eq: "==",
        sympy.Ne: "!=",
        sympy.Lt: "<",
        sympy.Le: "<=",
        sympy.Gt: ">",
        sympy.Ge: ">=",
    }


def shape_guard_check(em: Emitter, guard: Guard, indent: str) -> str:
    """A Python condition equivalent to the ``SHAPE`` guard's expression."""
    names = {symbol: em.source(source, indent) for symbol, source in guard.symbols}
    expr = guard.expected
    import sympy

    if not isinstance(expr, sympy.Basic):
        raise Unsupported(f"a shape guard that is not an expression ({expr!r})")
    return _ShapeRenderer(em, names).render(expr)


def dynamic_tensor_check(em: Emitter, value: str, spec: TensorSpec) -> str:
    """The checks of a ``TENSOR_MATCH`` whose spec has free (``None``) dims or strides."""
    parts = [
        f"type({value}) is {em.const(spec.tensor_type)}",
        f"{value}.dtype is {em.const(spec.dtype)}",
        f"{value}.device == {em.const(spec.device)}",
        f"{value}.dim() == {len(spec.shape)}",
    ]
    for dim, size in enumerate(spec.shape):
        if size is not None:
            parts.append(f"{value}.size({dim}) == {int(size)}")
    for dim, stride in enumerate(spec.stride):
        if stride is not None:
            parts.append(f"{value}.stride({dim}) == {int(stride)}")
    parts.append(f"{value}.requires_grad is {em.const(spec.requires_grad)}")
    parts.append(f"_dispatch_keys({value}).raw_repr() == {em.const(spec.dispatch_keys)}")
    return " and ".join(parts)


class _ShapeRenderer:
    def __init__(self, em: Emitter, names: dict[sympy.Symbol, str]) -> None:
        self.em = em
        self.names = names

    def render(self, expr: Any) -> str:
        import sympy

        if expr is sympy.true:
            return "True"
        if expr is sympy.false:
            return "False"
        if isinstance(expr, sympy.Symbol):
            name = self.names.get(expr)
            if name is None:
                raise Unsupported(f"a shape guard over {expr}, which no input binds")
            return name
        if isinstance(expr, sympy.Integer):
            return f"({int(expr)})"
        if isinstance(expr, sympy.Rational):
            # exact: a Fraction compares exactly with ints
            return self.em.const(fractions.Fraction(int(expr.p), int(expr.q)))
        relation = _relations().get(type(expr))
        if relation is not None:
            return f"({self.render(expr.lhs)} {relation} {self.render(expr.rhs)})"
        if isinstance(expr, sympy.And):
            return "(" + " and ".join(self.render(a) for a in expr.args) + ")"
        if isinstance(expr, sympy.Or):
            return "(" + " or ".join(self.render(a) for a in expr.args) + ")"
        if isinstance(expr, sympy.Not):
            return f"(not {self.render(expr.args[0])})"
        if isinstance(expr, sympy.Add):
            return "(" + " + ".join(self.render(a) for a in expr.args) + ")"
        if isinstance(expr, sympy.Mul):
            return "(" + " * ".join(self.render(a) for a in expr.args) + ")"
        if isinstance(expr, sympy.Pow):
            exponent = expr.exp
            if isinstance(exponent, sympy.Integer) and int(exponent) >= 0:
                return f"({self.render(expr.base)} ** {int(exponent)})"
            raise Unsupported(f"a shape guard with the power {expr}")
        return self._function(expr)

    def _function(self, expr: Any) -> str:
        import sympy
        from torch.utils._sympy import functions as torch_sympy

        args = [self.render(a) for a in expr.args]
        if isinstance(expr, (torch_sympy.FloorDiv, torch_sympy.CleanDiv)):
            return f"({args[0]} // {args[1]})"
        if isinstance(expr, (torch_sympy.PythonMod, torch_sympy.Mod, sympy.Mod)):
            return f"({args[0]} % {args[1]})"
        if isinstance(expr, torch_sympy.ModularIndexing):
            return f"(({args[0]} // {args[1]}) % {args[2]})"
        if isinstance(expr, (sympy.Max, torch_sympy.Max)):
            return f"max({', '.join(args)})"
        if isinstance(expr, (sympy.Min, torch_sympy.Min)):
            return f"min({', '.join(args)})"
        if isinstance(expr, torch_sympy.CeilToInt):
            return f"{self.em.const(math.ceil)}({args[0]})"
        if isinstance(expr, torch_sympy.FloorToInt):
            return f"{self.em.const(math.floor)}({args[0]})"
        if isinstance(expr, torch_sympy.TruncToInt):
            return f"{self.em.const(math.trunc)}({args[0]})"
        if isinstance(expr, torch_sympy.IntTrueDiv):
            return f"({args[0]} / {args[1]})"
        raise Unsupported(
            f"a shape guard using {type(expr).__name__} ({expr})",
            hint="Mark the dims involved static (sapwood.mark_static) to avoid it.",
        )
