"""Text of values the builtins' folding on constants does not cover: ``str()``, ``repr()``
and ``format()`` of an enum member whose class has special methods of the user's, of an
exception of the trace, of a user object whose class writes ``__str__``/``__repr__`` in Python
(inlined), and ``str.join`` of an iterator or list.

Enum members of such classes are not converted to text for real at trace time: the user's code
would run once, while tracing, instead of on every call. Their text is what Python computes,
step by step: a method written in Python (the user's, or the ``enum`` module's, which may
call the user's) is inlined; a builtin one is followed where Python's is known to call
another method (``format(x, "")`` is ``str(x)``, ``object.__str__`` is ``repr``) and folded
where it only reads the member's value (``int.__repr__``, ``int.__format__`` with a spec).
Anything else is a graph break.
"""

from __future__ import annotations

import enum
import types
from collections.abc import Callable
from typing import Any

from ..errors import Unsupported
from ..values.attributes import lookup_mro
from ..values.base import ConstantValue, Context, Value, enum_class_runs_user_code
from ..values.exceptions import ExceptionValue, python_error, raised_for_real
from ..values.objects import NewObjectValue, ObjectValue
from ..values.slot_results import checked, inline_special

__all__ = [
    "inlines_text",
    "join_text",
    "member_text",
    "object_format",
    "object_text",
    "text_call",
    "text_of_exception",
]

Fold = Callable[[Context, Any, list[Value], dict[str, Value]], Value]

#: builtin value types whose text methods read only the value
_VALUE_TYPES = (int, float, complex, str)


def inlines_text(value: Value) -> bool:
    """Whether the text of ``value`` is computed by :func:`member_text`: an enum member whose
    class has Python code of the user's."""
    member = value.as_constant() if value.is_constant() else None
    return isinstance(member, enum.Enum) and enum_class_runs_user_code(member)


def text_call(
    tx: Context, fn: Any, args: list[Value], kwargs: dict[str, Value], fold: Fold
) -> Value:
    """``repr(x)`` or ``format(x[, spec])`` (``fn``) of constants: an enum member of a class
    with special methods of the user's by :func:`member_text`, anything else by ``fold``."""
    if fn is repr and not args[0].is_constant():
        return object_text(tx, repr, args, kwargs)
    if fn is format and 1 <= len(args) <= 2 and not kwargs and _is_user_object(args[0]):
        given = args[1] if len(args) == 2 else ConstantValue("")
        if not (given.is_constant() and type(given.as_constant()) is str):
            raise Unsupported(f"format() of {args[0].describe()} with {given.describe()}")
        return object_format(tx, args[0], given.as_constant())
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported(f"{fn.__name__}() of {args[0].describe() if args else 'nothing'}")
    if args and not kwargs and inlines_text(args[0]):
        if fn is repr and len(args) == 1:
            return member_text(tx, args[0], "__repr__")
        spec = args[1].as_constant() if len(args) == 2 else ""
        if fn is format and len(args) <= 2 and type(spec) is str:
            return member_text(tx, args[0], "__format__", spec)
    return fold(tx, fn, args, kwargs)


def object_text(tx: Context, fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``str(obj)`` or ``repr(obj)`` (``fn``) of a user object whose class's ``__str__`` or
    ``__repr__`` is written in Python: inlined, its result checked as Python checks it
    (``object.__str__`` is ``repr``). Anything else is a graph break."""
    obj = args[0] if len(args) == 1 and not kwargs else None
    checked_name = dunder = "__repr__" if fn is repr else "__str__"
    if isinstance(obj, (ObjectValue, NewObjectValue)):
        cls = obj.python_type()
        _, raw = lookup_mro(cls, dunder)
        if raw is object.__str__:  # (it calls the type's repr; str() checks the result)
            dunder = "__repr__"
            _, raw = lookup_mro(cls, dunder)
        if isinstance(raw, types.FunctionType):
            text = inline_special(tx, obj, dunder)
            made = checked(tx, checked_name, text, cls)
            if type(made) is str:
                return ConstantValue(made)
    described = args[0].describe() if args else "nothing"
    raise Unsupported(f"{fn.__name__}() of {described}")


def object_format(tx: Context, obj: Value, spec: str) -> Value:
    """``format(obj, spec)`` (an f-string's ``{obj:spec}``) of a user object: its class's
    ``__format__`` written in Python, inlined and its result checked as Python checks it;
    ``object.__format__``, which is ``str(obj)`` for an empty spec and refuses any other.
    Another ``__format__`` (a C base class's) is a graph break."""
    cls = obj.python_type()
    _, raw = lookup_mro(cls, "__format__")
    if isinstance(raw, types.FunctionType):
        text = inline_special(tx, obj, "__format__", [ConstantValue(spec)])
        return ConstantValue(checked(tx, "__format__", text, cls, spec))
    if raw is object.__format__:
        if spec:
            message = f"unsupported format string passed to {cls.__name__}.__format__"
            raise python_error(TypeError, message)
        return object_text(tx, str, [obj], {})
    raise Unsupported(f"format() of {obj.describe()} (its __format__ is {type(raw).__name__})")


def _is_user_object(value: Value) -> bool:
    return isinstance(value, (ObjectValue, NewObjectValue))


def member_text(tx: Context, value: Value, dunder: str, spec: str = "") -> Value:
    """``value.__str__()``, ``__repr__()`` or ``__format__(spec)`` of a member, as Python
    computes it (see the module's docstring)."""
    member = value.as_constant()
    _, raw = lookup_mro(type(member), dunder)
    # (the enum class may hold a builtin type's method: ``IntEnum.__format__`` is int's)
    klass = getattr(raw, "__objclass__", None)
    if isinstance(raw, types.FunctionType):
        args = [ConstantValue(spec)] if dunder == "__format__" else []
        text = tx.call(tx.getattr(value, dunder), args, {})
        if not (text.is_constant() and type(text.as_constant()) is str):
            raise Unsupported(f"{dunder} of {value.describe()} giving {text.describe()}")
        return text
    if dunder == "__format__" and spec == "":
        return member_text(tx, value, "__str__")  # a builtin __format__ with no spec: str()
    if dunder == "__str__" and klass is object:
        return member_text(tx, value, "__repr__")
    if klass in _VALUE_TYPES or (dunder == "__repr__" and klass is object):
        args = (spec,) if dunder == "__format__" else ()
        return ConstantValue(raw(member, *args))
    raise Unsupported(f"{dunder} of {value.describe()} ({getattr(klass, '__qualname__', None)})")


def text_of_exception(exc: ExceptionValue, text: Any) -> Value:
    """``str()``/``repr()`` of an exception of the trace: those of the real exception made
    from the same constant arguments, when its class keeps BaseException's own."""
    real = exc.real()
    method = "__str__" if text is str else "__repr__"
    owner = next(k for k in exc.cls.__mro__ if method in k.__dict__)
    if real is None or owner.__module__ != "builtins":
        raise Unsupported(f"{text.__name__}() of {exc.describe()}")
    return ConstantValue(text(real))


def join_text(tx: Context, separator: str, iterable: Value) -> Value:
    """``separator.join(iterable)``: folded once the iterable's items (an iterator's are taken
    from it, as the real call would) are all constants."""
    if iterable.is_constant():
        strings = iterable.as_constant()
    else:
        items = iterable.collect(tx)
        if not all(item.is_constant() for item in items):
            raise Unsupported("str.join of values that are not constants")
        strings = [item.as_constant() for item in items]
    try:
        return ConstantValue(separator.join(strings))
    except Exception as error:
        raise raised_for_real(error, "str.join") from error
