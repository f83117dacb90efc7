"""Whether an enum member's class runs Python code of the user's: which of its reads and
builtin operations may be run for real at trace time (see :mod:`.enums`)."""

from __future__ import annotations

import enum
import types
from typing import Any

__all__ = ["class_runs_user_code", "enum_class_runs_user_code", "runs_enum_user_code"]


def _user_function(fn: Any) -> bool:
    return isinstance(fn, types.FunctionType) and fn.__module__ != "enum"


def runs_enum_user_code(member: Any, name: str) -> bool:
    """Whether reading ``member.name`` (an enum member's attribute) runs Python code of the
    user's: a getter (``property``, ``enum.property``) or a method, class or static method
    of its class that is not the ``enum`` module's own."""
    for klass in type(member).__mro__:
        if name in klass.__dict__:
            raw = klass.__dict__[name]
            break
    else:
        return False
    if isinstance(raw, (property, types.DynamicClassAttribute)):
        # (these three only call their getter on an instance; a subclass may do anything)
        plain = type(raw) in (property, types.DynamicClassAttribute, enum.property)
        return not plain or _user_function(raw.fget)
    if name in getattr(member, "__dict__", {}):
        return False  # the instance's own value wins over a non-data attribute
    if isinstance(raw, (classmethod, staticmethod)):
        return _user_function(raw.__func__)
    return _user_function(raw)


def enum_class_runs_user_code(member: Any) -> bool:
    return class_runs_user_code(type(member))


def _is_special_name(name: str) -> bool:
    """A dunder (``__str__``) or an enum sunder (``_missing_``) name."""
    return (len(name) > 2 and name[0] == name[-1] == "_" and name[1] != "_") or (
        len(name) > 4 and name[:2] == name[-2:] == "__"
    )


def class_runs_user_code(cls: type) -> bool:
    """Whether the enum class ``cls`` has Python code of the user's that builtins and the
    ``enum`` module's methods may call: a class of its MRO other than the ``enum`` module's
    defines a Python function (a method, getter, class or static method) under a special
    name (``__str__``, ``__eq__``, ``_missing_``, ``_value_repr_``, ...). Such a member's
    ``str()``, ``format()``, operators ... are not run for real at trace time; its other
    methods and getters run only when read, and reads are inlined."""
    for klass in cls.__mro__:
        if klass.__module__ in ("enum", "builtins"):
            continue
        for name, raw in klass.__dict__.items():
            if not _is_special_name(name) or name == "_generate_next_value_":
                continue  # (that one runs only while a class is made)
            if isinstance(raw, (property, types.DynamicClassAttribute)):
                raw = raw.fget
            elif isinstance(raw, (classmethod, staticmethod)):
                raw = raw.__func__
            if _user_function(raw):
                return True
    return False
