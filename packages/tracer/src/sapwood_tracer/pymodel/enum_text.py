"""``str()``, ``repr()`` and ``format()`` of an enum member whose class has Python code of
the user's (a ``__str__``, a method, a getter).

Members of such classes are not converted to text for real at trace time: the user's code
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

from ..errors import Unsupported
from ..values.attributes import lookup_mro
from ..values.base import ConstantValue, Context, Value, enum_class_runs_user_code

__all__ = ["inlines_text", "member_text"]

#: builtin value types whose text methods read only the value
_VALUE_TYPES = (int, float, complex, str)


def inlines_text(value: Value) -> bool:
    """Whether the text of ``value`` is computed by :func:`member_text`: an enum member whose
    class has Python code of the user's."""
    member = value.as_constant() if value.is_constant() else None
    return isinstance(member, enum.Enum) and enum_class_runs_user_code(member)


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
