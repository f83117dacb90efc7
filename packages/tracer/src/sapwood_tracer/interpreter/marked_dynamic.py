"""Dims marked dynamic that the traced code specialises.

A dim the user marked with ``mark_dynamic`` (sapwood's or torch's, not
``maybe_mark_dynamic``) is traced as a symbol; code that needs one exact size
(``if x.shape[0] == 4``) makes torch's ShapeEnv replace the symbol by that number. The graph
is still right (its guards pin the size), but the user asked for a dim that varies: the
trace reports it (a warning, or an error under ``fullgraph=True``) with the user's line that
specialised it.

Invariant: the ShapeEnv of a trace is a :func:`watched_shape_env`; the line is taken when the
ShapeEnv records the replacement (torch's ``_set_replacement``). Should torch rename that
method, the specialisation is still found after the trace, without a line.
"""

from __future__ import annotations

import functools
import types
import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from sapwood_graph import Source

from ..errors import SpecializedDimWarning, Unsupported, user_stacklevel
from ..marks import marked_dims

if TYPE_CHECKING:
    import sympy
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

__all__ = ["report_specialized", "specialized_marks", "watch_marked_dims", "watched_shape_env"]


class _Watching:
    """Mixed into torch's ShapeEnv: notes the traced line where a watched symbol became a
    number."""

    replacements: dict[Any, Any]

    def __init__(self) -> None:
        super().__init__()
        #: symbol -> what the user marked (``L['x'].size()[0]``)
        self.watched: dict[sympy.Symbol, str] = {}
        #: symbol -> the traced ``file:line`` that specialised it
        self.where: dict[sympy.Symbol, str | None] = {}
        self.locate: Callable[[], str | None] | None = None

    def _set_replacement(self, a: sympy.Symbol, tgt: sympy.Expr, msg: str) -> None:
        super()._set_replacement(a, tgt, msg)  # type: ignore[misc]
        if a in self.watched and a not in self.where and self.locate is not None:
            replaced = self.replacements.get(a)
            if replaced is not None and replaced.is_number:
                self.where[a] = self.locate()


@functools.cache
def _watched_class() -> type:
    # (made at the first trace: torch's symbolic-shapes module imports sympy, 0.25 s)
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return type("WatchedShapeEnv", (_Watching, ShapeEnv), {})


def watched_shape_env() -> ShapeEnv:
    """A ShapeEnv for one trace that notes where marked dims are specialised."""
    env: ShapeEnv = _watched_class()()
    return env


def watch_marked_dims(
    env: ShapeEnv, locate: Callable[[], str | None], tensor: torch.Tensor, fake: Any, source: Source
) -> None:
    """Watch the symbols of ``tensor``'s dims marked with ``mark_dynamic``."""
    if not isinstance(env, _Watching):
        return
    import sympy

    for d in sorted(marked_dims(tensor, dynamic=True, strict=True)):
        size = fake.shape[d]
        if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
            env.watched.setdefault(size.node.expr, f"{source}.size()[{d}]")
            env.locate = locate


def specialized_marks(env: ShapeEnv) -> list[tuple[str, int, str | None]]:
    """``(dim, size, file:line or None)`` of each watched dim the trace specialised."""
    if not isinstance(env, _Watching):
        return []
    out = []
    for symbol, what in env.watched.items():
        value = env.replace(symbol)
        if not value.is_number:
            vr = env.var_to_range.get(symbol)
            if vr is None or vr.lower != vr.upper:
                continue
            value = vr.lower
        out.append((what, int(value), env.where.get(symbol)))
    return out


class _Specialized(Unsupported):
    def _message(self) -> str:  # (no graph break is involved: the trace specialises)
        where = f" at {self.location}" if self.location else ""
        return f"sapwood cannot keep {self.construct}{where}. {self.hint}"


_warned: weakref.WeakKeyDictionary[types.CodeType, set[str]] = weakref.WeakKeyDictionary()


def report_specialized(
    code: types.CodeType, marks: list[tuple[str, int, str | None]], fullgraph: bool
) -> None:
    """Tell the user about marked dims the trace of ``code`` specialised: an
    :class:`Unsupported` error under ``fullgraph``, else a warning once per code and dim."""
    for what, size, where in marks:
        construct = f"{what} dynamic (it was marked with mark_dynamic)"
        hint = (
            f"The code needs it to be exactly {size}, so the graph is specialised to {size}; "
            "use maybe_mark_dynamic where that is expected."
        )
        if fullgraph:
            raise _Specialized(construct, where, hint=hint)
        seen = _warned.setdefault(code, set())
        if what in seen:
            continue
        seen.add(what)
        at = f" at {where}" if where else ""
        warnings.warn(
            f"sapwood: {what} was marked dynamic, but {code.co_qualname} specialises it to "
            f"{size}{at}; the graph is compiled for that size only (use maybe_mark_dynamic "
            "where that is expected)",
            SpecializedDimWarning,
            stacklevel=user_stacklevel(),
        )
