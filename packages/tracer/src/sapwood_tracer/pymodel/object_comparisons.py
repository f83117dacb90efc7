"""``object``'s own comparison methods called by name: ``super().__eq__(other)`` or
``super().__ne__(other)`` in a class whose bases define neither (``OrderedSet``'s), and
``object.__lt__(a, b)``.

As CPython's ``object`` implements them: ``__eq__`` is ``True`` for the object itself and
``NotImplemented`` otherwise; ``__ne__`` asks the receiver's class for ``__eq__`` (the
class's own, inlined where it is written in Python) and inverts its answer, passing
``NotImplemented`` on; the orderings are ``NotImplemented``.
"""

from __future__ import annotations

from ..errors import Unsupported
from ..values.attributes import class_attribute
from ..values.base import ConstantValue, Context, Value, answers_not_implemented
from ..values.identity import same_object
from .builtins import handles

__all__: list[str] = []

_NOT_IMPLEMENTED = ConstantValue(NotImplemented)


def _operands(name: str, args: list[Value], kwargs: dict[str, Value]) -> tuple[Value, Value]:
    if len(args) != 2 or kwargs:
        raise Unsupported(f"object.{name}() with these arguments")
    return args[0], args[1]


@handles(object.__eq__)
def _object_eq(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    a, b = _operands("__eq__", args, kwargs)
    return ConstantValue(True) if same_object(tx, a, b) else _NOT_IMPLEMENTED


@handles(object.__ne__)
def _object_ne(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    a, b = _operands("__ne__", args, kwargs)
    cls = a.python_type()
    if cls.__eq__ is object.__eq__:
        return ConstantValue(False) if same_object(tx, a, b) else _NOT_IMPLEMENTED
    method = class_attribute(tx, cls, "__eq__", a)
    if method is None:
        raise Unsupported(f"object.__ne__ on {a.describe()}, whose __eq__ the trace cannot find")
    equal = tx.call(method, [b], {})
    if answers_not_implemented(equal):
        return _NOT_IMPLEMENTED
    return ConstantValue(not tx.truth(equal))


@handles(*(getattr(object, name) for name in ("__lt__", "__le__", "__gt__", "__ge__")))
def _object_ordering(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    _operands("an ordering", args, kwargs)
    return _NOT_IMPLEMENTED
