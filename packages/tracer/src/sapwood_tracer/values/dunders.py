"""Special methods of the builtin containers called directly: ``d.__contains__(k)``,
``list.__getitem__(xs, i)``, ``xs.__iadd__(ys)``, ``s.__or__(t)``.

Each modelled special method is the container's own operation (the one the value implements
for the matching syntax), never a subclass override: a value hands out a bound special
method only where its class's lookup finds the builtin's. Binary special methods differ
from their operators on a foreign operand (``[].__eq__(5)`` is ``NotImplemented`` where
``[] == 5`` is ``False``, ``[].__add__(x)`` never tries ``x.__radd__``), so they are modelled
where the operand's type is exactly the receiver's; any other operand is refused.

Invariants:

* :func:`has_special` answers for every special method the builtin type really has (modelled
  or not), so ``hasattr`` and attribute reads never call an existing method missing;
  :func:`special_method` hands out only the modelled ones and refuses the rest.
* A call with the wrong arguments raises Python's own ``TypeError`` (its message too).
"""

from __future__ import annotations

import operator
from typing import Any

from ..errors import TracedException, Unsupported
from .base import BoundBuiltinMethod, BuiltinValue, ConstantValue, Context, Value

__all__ = ["call_special", "has_special", "is_special", "special_method"]

#: special method -> (operator function, number of arguments after the receiver)
_BINARY: dict[str, Any] = {
    "__eq__": operator.eq,
    "__ne__": operator.ne,
    "__lt__": operator.lt,
    "__le__": operator.le,
    "__gt__": operator.gt,
    "__ge__": operator.ge,
    "__add__": operator.add,
    "__mul__": operator.mul,
    "__rmul__": operator.mul,
    "__or__": operator.or_,
    "__and__": operator.and_,
    "__sub__": operator.sub,
    "__xor__": operator.xor,
    "__ror__": operator.or_,
    "__rand__": operator.and_,
    "__rsub__": operator.sub,
    "__rxor__": operator.xor,
}
_INPLACE: dict[str, Any] = {
    "__iadd__": operator.iadd,
    "__imul__": operator.imul,
    "__ior__": operator.ior,
    "__iand__": operator.iand,
    "__isub__": operator.isub,
    "__ixor__": operator.ixor,
}
_REFLECTED = frozenset({"__rmul__", "__ror__", "__rand__", "__rsub__", "__rxor__"})
#: special methods of the protocol: name -> number of arguments after the receiver
_PROTOCOL: dict[str, int] = {
    "__getitem__": 1,
    "__setitem__": 2,
    "__delitem__": 1,
    "__contains__": 1,
    "__len__": 0,
    "__iter__": 0,
    "__reversed__": 0,
}
_MODELLED = frozenset(_PROTOCOL) | frozenset(_BINARY) | frozenset(_INPLACE)


def is_special(name: str) -> bool:
    """Whether ``name`` is a special method this module models."""
    return name in _MODELLED


def has_special(owner: type, name: str) -> bool:
    """Whether the builtin type ``owner`` has the special (dunder) attribute ``name``."""
    return name.startswith("__") and name.endswith("__") and hasattr(owner, name)


def special_method(receiver: Value, owner: type, name: str) -> Value:
    """``receiver.<name>`` for a special method of the builtin ``owner`` that the receiver's
    class does not override (the caller checked)."""
    if is_special(name) and hasattr(owner, name):
        return BoundBuiltinMethod(receiver, name)
    raise Unsupported(f"the special attribute {owner.__name__}.{name}")


def _signature_error(owner: type, name: str, args: list[Value], kwargs: dict) -> Exception:
    """Python's own ``TypeError`` for a call with the wrong arguments: the real special
    method, called on an empty instance with as many placeholders, raises it before it
    reads any of them."""
    try:
        getattr(owner, name)(owner(), *([0] * len(args)), **dict.fromkeys(kwargs, 0))
    except TypeError as exc:
        return TracedException(cls=TypeError, args=tuple(ConstantValue(a) for a in exc.args))
    return Unsupported(f"{owner.__name__}.{name} with {len(args)} arguments")


def call_special(
    tx: Context, receiver: Value, owner: type, name: str, args: list[Value], kwargs: dict
) -> Value:
    """``owner.<name>(receiver, *args)``: the builtin container's own special method."""
    if kwargs or len(args) != _PROTOCOL.get(name, 1):
        raise _signature_error(owner, name, args, kwargs)
    if name == "__getitem__":
        return receiver.getitem(tx, args[0])
    if name == "__setitem__":
        receiver.setitem(tx, args[0], args[1])
        return ConstantValue(None)
    if name == "__delitem__":
        receiver.delitem(tx, args[0])
        return ConstantValue(None)
    if name == "__contains__":
        return ConstantValue(receiver.contains(tx, args[0]))
    if name == "__len__":
        return ConstantValue(receiver.length(tx))
    if name == "__iter__":
        return receiver.iterate(tx)
    if name == "__reversed__":
        return tx.call_builtin(BuiltinValue(reversed), [receiver], {})
    other = args[0]
    if owner is dict and name in _DICT_MERGES and receiver.python_type() is dict:
        merged = _dict_merge(tx, name, receiver, other)
        if merged is not None:
            return merged
    if name in _SET_COMPARISONS and _builtin_set_comparison(name, receiver, other):
        return _operator(tx, name, receiver, other)
    if receiver.python_type() is not owner or other.python_type() is not owner:
        repeat = name in ("__mul__", "__rmul__", "__imul__") and owner in (list, tuple)
        if repeat and other.is_constant() and type(other.as_constant()) is int:
            return _operator(tx, name, receiver, other)
        if name == "__iadd__" and owner is list:
            return _operator(tx, name, receiver, other)
        raise Unsupported(
            f"{owner.__name__}.{name} with {other.describe()} "
            "(the special method differs from its operator there)"
        )
    if name in _BINARY and getattr(owner(), name)(owner()) is NotImplemented:
        return ConstantValue(NotImplemented)  # dict.__lt__: dicts have no order
    return _operator(tx, name, receiver, other)


_DICT_MERGES = frozenset({"__or__", "__ror__", "__ior__"})
#: a comparison and its reflection
_SET_COMPARISONS = {
    "__eq__": "__eq__",
    "__ne__": "__ne__",
    "__lt__": "__gt__",
    "__le__": "__ge__",
    "__gt__": "__lt__",
    "__ge__": "__le__",
}


def _builtin_set_comparison(name: str, receiver: Value, other: Value) -> bool:
    """Whether ``set.__eq__(a, b)`` (or another comparison) is what ``a == b`` computes:
    both are sets or frozensets (subclasses too) whose classes take the comparison and its
    reflection from the builtin types, so the operator, reflected or not, reaches the same
    content comparison (``set() == frozenset()``)."""
    for value, method in ((receiver, name), (other, _SET_COMPARISONS[name])):
        cls = value.python_type()
        if not issubclass(cls, (set, frozenset)):
            return False
        owner = next(k for k in cls.__mro__ if method in vars(k))
        if owner not in (set, frozenset):
            return False
    return True


def _dict_merge(tx: Context, name: str, receiver: Value, other: Value) -> Value | None:
    """``d.__or__(x)``/``d.__ror__(x)``/``d.__ior__(x)`` of a dict with an ``x`` that is no
    dict: ``|`` gives ``NotImplemented`` (it merges dicts only), ``|=`` is ``d.update(x)``
    (pairs or a mapping, with update's errors) and gives ``d``. ``None``: ``x`` is a dict."""
    if issubclass(other.python_type(), dict):
        return None
    if name != "__ior__":
        return ConstantValue(NotImplemented)
    receiver.call_method(tx, "update", [other], {})
    return receiver


def _operator(tx: Context, name: str, receiver: Value, other: Value) -> Value:
    fn = _BINARY.get(name) or _INPLACE[name]
    if name in _REFLECTED:
        return tx.binary_operation(fn, other, receiver)
    return tx.binary_operation(fn, receiver, other)
