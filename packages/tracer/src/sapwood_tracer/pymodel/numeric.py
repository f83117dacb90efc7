"""The numeric builtins on user objects. ``divmod(a, b)`` is the binary operator it is
(``__divmod__``/``__rdivmod__``, see :mod:`.operators`).

``int()``, ``float()``, ``oct()``, ``hex()`` and ``bin()`` of a user object: the class's
``__int__``, ``__float__`` or ``__index__`` written in Python is inlined, as the type's slot
calls it, and its result checked as Python checks it (by
:mod:`~sapwood_tracer.values.slot_results`: Python's ``TypeError`` where it is of another
type; a result of a subclass of ``int``/``float``, which Python converts with a
``DeprecationWarning``, is a graph break). A class whose slot is no Python function (a C base
class, ``__int__ = None``) is a graph break too. Other arguments keep the models of
:mod:`.builtins`.
"""

from __future__ import annotations

import builtins
from typing import Any

from ..errors import Unsupported
from ..values.attributes import lookup_mro
from ..values.base import ConstantValue, Context, Value
from ..values.exceptions import python_error
from ..values.objects import NewObjectValue, ObjectValue
from ..values.slot_results import checked, inline_special
from ..values.symbolic import specialised_int
from .builtins import _HANDLERS, Handler, _fold_call

__all__: list[str] = []

_UNSET = object()


def _converted(tx: Context, obj: Value, name: str) -> Any:
    """``type(obj).<name>(obj)``, inlined and checked as the builtin that calls it checks
    it (:mod:`~sapwood_tracer.values.slot_results`); ``_UNSET`` if the class has no such
    method. A method that is no Python function is refused."""
    cls = obj.python_type()
    if lookup_mro(cls, name)[0] is None:
        return _UNSET
    return checked(tx, name, inline_special(tx, obj, name), cls)


def _index(tx: Context, obj: Value) -> Any:
    """``operator.index(obj)``: ``_UNSET`` if the class has no ``__index__``."""
    return _converted(tx, obj, "__index__")


def _to_int(tx: Context, obj: Value) -> Value:
    result = _converted(tx, obj, "__int__")
    if result is not _UNSET:
        return ConstantValue(result)
    if lookup_mro(obj.python_type(), "__trunc__")[0] is not None:
        raise Unsupported(f"int() of {obj.describe()} through __trunc__")
    result = _index(tx, obj)
    if result is _UNSET:
        name = obj.python_type().__name__
        raise python_error(
            TypeError,
            f"int() argument must be a string, a bytes-like object or a real number, not '{name}'",
        )
    return ConstantValue(result)


def _to_float(tx: Context, obj: Value) -> Value:
    name = obj.python_type().__name__
    result = _converted(tx, obj, "__float__")
    if result is not _UNSET:
        return ConstantValue(result)
    result = _index(tx, obj)
    if result is _UNSET:
        message = f"float() argument must be a string or a real number, not '{name}'"
        raise python_error(TypeError, message)
    try:
        return ConstantValue(float(result))
    except OverflowError as error:
        raise python_error(OverflowError, str(error)) from None


def _converting(kind: type, convert: Any) -> Handler:
    fallback = _HANDLERS[kind]

    def handler(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if len(args) == 1 and not kwargs and isinstance(args[0], (ObjectValue, NewObjectValue)):
            return convert(tx, args[0])  # type: ignore[no-any-return]
        return fallback(tx, args, kwargs)

    return handler


def _in_base(fn: Any) -> Handler:
    def handler(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if len(args) == 1 and not kwargs and isinstance(args[0], (ObjectValue, NewObjectValue)):
            number = _index(tx, args[0])
            if number is _UNSET:
                name = args[0].python_type().__name__
                raise python_error(
                    TypeError, f"'{name}' object cannot be interpreted as an integer"
                )
            return ConstantValue(fn(number))
        args = [specialised_int(a) for a in args]
        if not all(a.is_constant() for a in [*args, *kwargs.values()]):
            raise Unsupported(f"builtins.{fn.__name__} on non-constant arguments")
        return _fold_call(tx, fn, args, kwargs)

    return handler


_HANDLERS[builtins.int] = _converting(int, _to_int)
_HANDLERS[builtins.float] = _converting(float, _to_float)
for _fn in (builtins.oct, builtins.hex, builtins.bin):
    _HANDLERS[_fn] = _in_base(_fn)


def _divmod(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    objects = [a for a in args if isinstance(a, (ObjectValue, NewObjectValue))]
    if len(args) == 2 and not kwargs and objects:
        return tx.binary_operation(builtins.divmod, args[0], args[1])
    args = [specialised_int(a) for a in args]
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported("builtins.divmod on non-constant arguments")
    return _fold_call(tx, builtins.divmod, args, kwargs)


_HANDLERS[builtins.divmod] = _divmod
