"""Models of builtins that read interpreter settings or build immutable builtin values:
``sys.getrecursionlimit``, ``sys.get_int_max_str_digits``, ``float.__getformat__`` (read
with a guard),
``int.__new__`` and the other immutable classes' ``__new__``, ``dir()`` of constants and of
classes, ``sys.exc_info()`` and ``sys.exception()`` (the exception being handled).
Registered into the table of :mod:`.builtins` on import."""

from __future__ import annotations

import builtins
import enum
import sys
from typing import Any

from sapwood_graph import AttrSource, GuardKind

from ..errors import Unsupported
from ..guards.sources import ContainsSource, GlobalStateSource, KeysSource
from ..values.attributes import held
from ..values.base import ConstantValue, Context, Value, is_constant_type, runs_enum_user_code
from ..values.containers import ListValue, TupleValue
from ..values.enums import EnumClassValue, is_immutable_class
from ..values.exceptions import OUTER_EXCEPTION, ExceptionValue, TracebackValue
from ..values.objects import ClassValue
from .builtins import _HANDLERS, Handler, _fold_call, handles

__all__: list[str] = []


# ----------------------------------------------------------------- interpreter settings
def _setting(name: str, reader: Any) -> Handler:
    """A read of an interpreter setting: its value now, guarded (a later call where the
    setting changed traces again)."""

    def handler(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if args or kwargs:
            return _fold_call(tx, reader, args, kwargs)  # raises Python's TypeError
        value = reader()
        tx.guard(GuardKind.CONSTANT_MATCH, GlobalStateSource(name), value)
        return ConstantValue(value)

    return handler


_HANDLERS[sys.getrecursionlimit] = _setting("recursion_limit", sys.getrecursionlimit)
_HANDLERS[sys.get_int_max_str_digits] = _setting("int_max_str_digits", sys.get_int_max_str_digits)


@handles(float.__getformat__)
def _float_format(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``float.__getformat__("double")``: the platform's layout of floats, read with a guard;
    any other argument folds (Python's ValueError or TypeError)."""
    if len(args) == 1 and not kwargs and args[0].is_constant():
        typestr = args[0].as_constant()
        if type(typestr) is str and typestr in ("double", "float"):
            return _setting(f"{typestr}_format", lambda: float.__getformat__(typestr))(tx, [], {})
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported("float.__getformat__ of a non-constant")
    return _fold_call(tx, float.__getformat__, args, kwargs)


#: immutable builtin classes whose ``__new__`` on constants is pure
_IMMUTABLE_CLASSES = (int, bool, float, str, bytes, complex)


def _new_of_immutable(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``int.__new__(int, "5")``, ``bool.__new__(bool, 1)``: the class's own construction,
    folded on constants (a subclass as the first argument makes a new object: refused)."""
    if not args or not all(a.is_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported("__new__ of a builtin class on non-constant arguments")
    cls = args[0].as_constant()
    if cls not in _IMMUTABLE_CLASSES:
        raise Unsupported(f"__new__ of a builtin class for {args[0].describe()}")
    return _fold_call(tx, cls.__new__, args, kwargs)


for _cls in _IMMUTABLE_CLASSES:
    _HANDLERS[_cls.__new__] = _new_of_immutable


@handles(builtins.dir)
def _dir(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``dir(x)`` of an immutable constant, a class whose attributes cannot change (builtin
    and C types) or an enum class: its attribute names."""
    if len(args) == 1 and not kwargs:
        target = args[0]
        if isinstance(target, EnumClassValue):
            return ListValue([ConstantValue(n) for n in target.names_in_dir(tx)])
        member = target.as_constant() if target.is_constant() else None
        if isinstance(member, enum.Enum) and runs_enum_user_code(member, "__dir__"):
            raise Unsupported(f"dir() of {target.describe()}, whose class defines __dir__")
        if isinstance(target, ConstantValue) and is_constant_type(target.value):
            return ListValue([ConstantValue(n) for n in dir(target.value)])
        if target.is_constant():
            obj = target.as_constant()
            if isinstance(obj, type) and is_immutable_class(obj):
                return ListValue([ConstantValue(n) for n in dir(obj)])
        if isinstance(target, ClassValue) and _guard_class_dir(tx, target.cls):
            return ListValue([ConstantValue(n) for n in dir(target.cls)])
    raise Unsupported(f"dir() of {args[0].describe() if args else 'nothing'}")


def _handled(tx: Context, what: str) -> ExceptionValue | None:
    """The exception being handled, as ``sys.exc_info()`` sees it: one of the trace, or the
    caller's where it is known to be none (guarded)."""
    handled = tx.topmost_handled()
    if handled is OUTER_EXCEPTION and tx.caller_handles_nothing():
        return None
    if handled is None or isinstance(handled, ExceptionValue):
        return handled
    raise Unsupported(f"{what} while {handled.describe()} is handled")


@handles(sys.exc_info)
def _exc_info(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if args or kwargs:
        return _fold_call(tx, sys.exc_info, args, kwargs)  # raises Python's TypeError
    handled = _handled(tx, "sys.exc_info()")
    if handled is None:
        return TupleValue([ConstantValue(None)] * 3)
    return TupleValue([tx.wrap_trusted(handled.cls), handled, TracebackValue(handled)])


@handles(sys.exception)
def _exception(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if args or kwargs:
        return _fold_call(tx, sys.exception, args, kwargs)  # raises Python's TypeError
    handled = _handled(tx, "sys.exception()")
    return ConstantValue(None) if handled is None else handled


def _guard_class_dir(tx: Context, cls: type) -> bool:
    """Whether ``dir(cls)`` is ``type.__dir__``'s: the names in the ``__dict__`` of ``cls``
    and of every class its bases reach. The metaclass is guarded not to define ``__dir__``
    and each class written in Python to keep the names it has now (a builtin's are fixed)."""
    for meta in type(cls).__mro__:
        if meta is type:
            break
        if not meta.__flags__ & _HEAPTYPE or "__dir__" in vars(meta):
            return False
        tx.guard_false(ContainsSource(_class_dict(meta), "__dir__"))
    pending, seen = [cls], set()
    while pending:
        klass = pending.pop()
        if klass in seen:
            continue
        seen.add(klass)
        if klass.__flags__ & _HEAPTYPE:
            tx.guard(GuardKind.CONSTANT_MATCH, KeysSource(_class_dict(klass)), tuple(vars(klass)))
        pending.extend(klass.__bases__)
    return True


def _class_dict(klass: type) -> AttrSource:
    return AttrSource(held(klass, klass.__qualname__), "__dict__")


_HEAPTYPE = 1 << 9
