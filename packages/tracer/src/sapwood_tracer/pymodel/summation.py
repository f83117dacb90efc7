"""``sum()``: the real one on constants, else ``start + item`` for each item in turn.

Python 3.12+ adds exact floats with compensation (Neumaier's), not one ``+`` after another:
on constants the real ``sum`` gives that result; a sum where a float meets a number the trace
does not know (a symbolic float or int) cannot be computed by additions, so it is refused.
Tensors and other objects are added with ``+`` by Python too.
"""

from __future__ import annotations

import builtins
import operator
import sys

from ..errors import Unsupported
from ..values.base import ConstantValue, Context, Value
from . import operators as ops
from .builtins import _fold_call, handles

__all__: list[str] = []

_COMPENSATED = sys.version_info >= (3, 12)
_NUMBERS = (int, float, bool)


@handles(builtins.sum)
def _sum(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    items = tx.unpack(args[0])
    total = args[1] if len(args) > 1 else kwargs.get("start", ConstantValue(0))
    if all(v.is_constant() for v in (total, *items)) and all(
        type(v.as_constant()) in _NUMBERS for v in (total, *items)
    ):
        return _fold_call(
            tx, builtins.sum, [ConstantValue([v.as_constant() for v in items])], {"start": total}
        )
    if _COMPENSATED:
        numbers = [v for v in (total, *items) if v.python_type() in _NUMBERS]
        if any(v.python_type() is float for v in numbers) and not all(
            v.is_constant() for v in numbers
        ):
            raise Unsupported(
                "sum() of floats and numbers unknown while tracing (Python adds them with compensation)"
            )
    for item in items:
        total = ops.binary(tx, operator.add, total, item)
    return total
