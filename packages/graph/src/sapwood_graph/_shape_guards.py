"""Shape guards: the ShapeEnv's assumptions restated as sympy expressions over sources.

For every backed symbol the ShapeEnv created for a graph input, three kinds of facts are
turned into :class:`~sapwood_graph.Guard` records of kind ``SHAPE``:

* equalities: a symbol the ShapeEnv replaced by an expression (``s1 -> s0``), and every extra
  source of a duck-shaped symbol, must still evaluate to that expression;
* ranges: the value range of each remaining symbol (e.g. ``>= 2`` for a size that was not
  specialised to 0/1);
* the guards the ShapeEnv recorded while tracing (branching on a size, broadcasting, …);
* strides: a stride left free in a tensor guard must still equal the expression of the sizes
  the fake tensor was built with (``L['x'].stride()[0] == L['x'].size()[1]``), so a graph
  compiled for dense inputs never runs on a strided view of the same sizes.

Invariant: every free symbol of a produced guard is bound to a source in ``Guard.symbols``;
facts that mention a symbol with no source (unbacked, data-dependent) are left out, because a
frontend cannot check them before running the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from sapwood_graph._fake import sapwood_source
from sapwood_graph._lazy import lazy
from sapwood_graph.guards import Guard, GuardKind
from sapwood_graph.sources import Source, TensorPropertySource

if TYPE_CHECKING:
    import sympy
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
else:
    sympy = lazy("sympy")
_sympy_numbers = lazy("torch.utils._sympy.numbers")


def _unbounded(bound: Any) -> bool:
    int_oo = _sympy_numbers.int_oo
    return bound in (sympy.oo, -sympy.oo, int_oo, -int_oo)


def produce_shape_guards(
    shape_env: ShapeEnv, free_strides: Sequence[tuple[Source, int, Any]] = ()
) -> list[Guard]:
    """The shape guards of ``shape_env`` in a deterministic order; ``free_strides`` lists
    ``(tensor source, dim, fake stride)`` for the strides tensor guards leave free."""
    primary: dict[sympy.Symbol, Source] = {}
    extras: dict[sympy.Symbol, list[Source]] = {}
    for symbol, env_sources in shape_env.var_to_sources.items():
        ours = [s for s in (sapwood_source(e) for e in env_sources) if s is not None]
        if ours:
            primary[symbol] = ours[0]
            extras[symbol] = ours[1:]

    guards: list[Guard] = []

    def emit(expr: Any, bindings: dict[sympy.Symbol, Source]) -> None:
        if expr in (sympy.true, True):
            return
        if not all(s in bindings for s in expr.free_symbols):
            return
        symbols = tuple(
            sorted(((s, bindings[s]) for s in expr.free_symbols), key=lambda p: str(p[0]))
        )
        guards.append(Guard(GuardKind.SHAPE, None, expr, symbols))

    for symbol in sorted(primary, key=str):
        value = shape_env.replace(symbol)
        for k, extra in enumerate(extras[symbol]):
            alias = sympy.Symbol(f"{symbol}_alias{k}", integer=True)
            emit(sympy.Eq(alias, value), {**primary, alias: extra})
        if value != symbol:
            emit(sympy.Eq(symbol, value), primary)
            continue
        vr = shape_env.var_to_range.get(symbol)
        if vr is None:
            continue
        if not _unbounded(vr.lower):
            emit(sympy.Ge(symbol, vr.lower), primary)
        if not _unbounded(vr.upper):
            emit(sympy.Le(symbol, vr.upper), primary)

    for recorded in shape_env.guards:
        expr = shape_env.simplify(recorded.expr)
        emit(expr, primary)
    for k, (source, dim, stride) in enumerate(free_strides):
        expr = stride.node.expr if isinstance(stride, torch.SymInt) else sympy.Integer(int(stride))
        value = shape_env.replace(expr)
        alias = sympy.Symbol(f"stride{k}", integer=True)
        emit(
            sympy.Eq(alias, value), {**primary, alias: TensorPropertySource(source, "stride", dim)}
        )
    return guards
