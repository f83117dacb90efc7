"""``object.__getattribute__(obj, name)``: Python's generic attribute lookup, as a class's own
``__getattribute__`` reaches it (``super().__getattribute__(name)``), without calling that
hook or ``__getattr__`` (see :mod:`..values.getattribute`)."""

from __future__ import annotations

from ..errors import Unsupported
from ..values.attributes import lookup_mro
from ..values.base import Context, Value
from ..values.getattribute import generic_getattr
from ..values.objects import ObjectValue
from .builtins import handles

__all__: list[str] = []


@handles(object.__getattribute__)
def _object_getattribute(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if len(args) != 2 or kwargs or not args[1].is_constant():
        raise Unsupported("object.__getattribute__() with these arguments")
    target, name = args[0], args[1].as_constant()
    if type(name) is not str:
        raise Unsupported(f"object.__getattribute__() of the name {args[1].describe()}")
    cls = target.python_type()
    if isinstance(target, ObjectValue) and (
        cls.__getattribute__ is not object.__getattribute__
        or lookup_mro(cls, "__getattr__")[0] is not None
    ):
        return generic_getattr(tx, target, name)
    if (
        cls.__getattribute__ is object.__getattribute__
        and lookup_mro(cls, "__getattr__")[0] is None
    ):
        return tx.getattr(target, name)  # (attribute access is the generic lookup itself)
    raise Unsupported(f"object.__getattribute__ of {target.describe()}")
