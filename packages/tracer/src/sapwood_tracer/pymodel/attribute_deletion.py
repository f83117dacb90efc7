"""``delattr(obj, name)``: the ``del obj.name`` of the value (each value models its own
deletion), with Python's errors for the call itself."""

from __future__ import annotations

import builtins

from ..errors import Unsupported
from ..values.base import ConstantValue, Context, Value
from ..values.exceptions import python_error
from .builtins import handles

__all__: list[str] = []


@handles(builtins.delattr)
def _delattr(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if len(args) != 2 or kwargs:
        try:  # (the real builtin refuses these calls before looking at any argument)
            builtins.delattr(*[None] * len(args), **dict.fromkeys(kwargs))
        except TypeError as exc:
            raise python_error(TypeError, *exc.args) from None
        raise Unsupported("delattr() with these arguments")
    target, name = args
    if not name.is_constant():
        raise Unsupported(f"delattr() with the name {name.describe()}")
    text = name.as_constant()
    if not isinstance(text, str):
        raise python_error(TypeError, f"attribute name must be string, not {type(text).__name__!r}")
    target.delattr(tx, text)
    return ConstantValue(None)
