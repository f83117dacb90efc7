"""``cls[args]`` of a class: ``list[int]``, ``OrderedSet[T]`` (in ``typing.cast(OrderedSet[T],
x)``), which Python answers through the class's ``__class_getitem__``.

Where that is the one builtin generics share — ``types.GenericAlias``, as ``classmethod`` (the
``collections.abc`` classes and their subclasses) or the builtin containers' own — the alias
depends on the class and the arguments alone, so it is made while tracing and is a constant
of the trace. Its arguments must be objects the trace knows exactly (as for typing's hints,
:func:`~.typing_forms.hint_argument`: constants, classes, ``TypeVar`` objects, hints, tuples of
them; identities pinned). A class without ``__class_getitem__`` raises Python's TypeError;
any other hook (a metaclass ``__getitem__``, a ``__class_getitem__`` of the user's) is
refused for now.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

from ..errors import TracedException, Unsupported
from .base import ConstantValue, Context, Value
from .typing_forms import UNKNOWN, hint_argument

__all__ = ["class_subscript"]

_BUILTIN_GENERICS = (list, dict, tuple, set, frozenset, type)


def class_subscript(tx: Context, cls: type, key: Value) -> Value:
    """The value of ``cls[key]`` (see the module docstring)."""
    if type(cls) is not type and hasattr(type(cls), "__getitem__"):
        raise Unsupported(f"indexing class {cls.__qualname__} through its metaclass")
    hook = inspect.getattr_static(cls, "__class_getitem__", None)
    if hook is None:
        text = ConstantValue(f"type '{cls.__name__}' is not subscriptable")
        raise TracedException(cls=TypeError, args=(text,))
    if not _makes_generic_alias(hook):
        raise Unsupported(f"indexing class {cls.__qualname__} (its own __class_getitem__)")
    pins: list[Value] = []
    argument = hint_argument(tx, key, pins)
    if argument is UNKNOWN:
        raise Unsupported(f"a generic alias of {cls.__qualname__} over {key.describe()}")
    for value in pins:
        if value.source is not None:
            tx.pin_identity(value)  # type: ignore[attr-defined]
    subscriptable: Any = cls
    return ConstantValue(subscriptable[argument])


def _makes_generic_alias(hook: Any) -> bool:
    if isinstance(hook, classmethod):
        return hook.__func__ is types.GenericAlias
    # the builtin containers' own (``list[int]``): a C classmethod of a builtin class
    owner = getattr(hook, "__objclass__", None)
    return type(hook).__name__ == "classmethod_descriptor" and owner in _BUILTIN_GENERICS
