"""Enum classes and their members.

An enum class is a class like any other (guarded by identity), whose metaclass
``enum.EnumType`` gives it container behaviour: iterating over it, ``len()``, ``in``,
``cls[name]``, ``cls(value)``, ``reversed()``, ``dir()``. Where the metaclass's method is the
standard library's own, its result for a constant argument is the real method's, computed at
trace time; members are constants.

Invariants:

* What a result relies on is guarded: the names of the class's members (the keys of its
  ``_member_map_``), on top of the identity of the class. Enum classes are not changed after
  their creation in normal use; a class whose members were changed recompiles.
* No user code runs at trace time. A lookup by value runs the real ``Enum.__new__`` only
  where ``_missing_`` is the standard library's and every member's value compares in C (its
  ``__eq__`` and ``__hash__`` are not Python functions); Flag's ``_missing_`` caches the
  composite members it makes, as the eager call would. Anything else is a graph break.
* Attributes of a member that run Python code of the user's (a property, an ``enum.property``
  with a getter, a method) are inlined, not read for real (see :class:`EnumMemberValue`).
"""

from __future__ import annotations

import enum
import sys
import types
from typing import Any

from sapwood_graph import AttrSource, GuardKind

from ..errors import Unsupported
from ..guards.sources import KeysSource
from .attributes import class_dict_source, held, is_data_descriptor, lookup_mro
from .base import (
    ConstantValue,
    Context,
    ListIteratorValue,
    Value,
    attribute_missing,
    class_runs_user_code,
    enum_class_runs_user_code,
    runs_enum_user_code,
)
from .exceptions import raised_for_real
from .functions import BoundMethodValue
from .objects import ClassValue

__all__ = ["EnumClassValue", "EnumMemberValue", "is_immutable_class", "member_value"]

_META = enum.EnumType


def member_value(member: Any) -> Value:
    """A member (or any constant) produced by the real enum machinery, as a value."""
    if isinstance(member, enum.Enum):
        return EnumMemberValue(member)
    return ConstantValue(member)


#: ``Py_TPFLAGS_IMMUTABLETYPE``: the attributes of such a type cannot be set or deleted
_IMMUTABLE_TYPE = 1 << 8


def is_immutable_class(cls: type) -> bool:
    """Whether ``cls`` and its bases are classes whose attributes cannot change (builtin and C
    types), under the plain metaclass: ``dir(cls)`` is the same on every call."""
    return type(cls) is type and all(k.__flags__ & _IMMUTABLE_TYPE for k in cls.__mro__)


def _is_stdlib_method(meta: type, name: str) -> bool:
    """Whether the metaclass ``meta`` keeps EnumType's own ``name``."""
    return getattr(meta, name, None) is getattr(_META, name, None)


def _compares_in_c(obj: Any) -> bool:
    """Whether ``obj == x`` and ``hash(obj)`` run no Python code (an enum member's hash is
    ``enum``'s own, which hashes its name)."""
    cls = type(obj)
    for dunder in ("__eq__", "__hash__"):
        _, raw = lookup_mro(cls, dunder)
        if isinstance(raw, types.FunctionType) and raw.__module__ != "enum":
            return False
    if isinstance(obj, tuple):
        return all(_compares_in_c(item) for item in obj)
    return True


_STDLIB_MISSING = frozenset({enum.Enum._missing_.__func__, enum.Flag._missing_.__func__})  # type: ignore[attr-defined]


class EnumClassValue(ClassValue):
    """A class whose metaclass is ``enum.EnumType`` (or a subclass of it)."""

    __slots__ = ()

    def _class_source(self) -> Any:
        return self.source or held(self.cls, self.cls.__qualname__)

    def _guard_members(self, tx: Context) -> None:
        names = tuple(self.cls._member_map_)  # type: ignore[attr-defined]
        source = KeysSource(AttrSource(self._class_source(), "_member_map_"))
        tx.guard(GuardKind.CONSTANT_MATCH, source, names)

    def _uses(self, name: str) -> bool:
        return _is_stdlib_method(type(self.cls), name)

    def _members(self, tx: Context, what: str) -> list[Value]:
        if not self._uses("__iter__"):
            raise Unsupported(f"{what} {self.describe()}, whose metaclass defines __iter__")
        self._guard_members(tx)
        return [EnumMemberValue(m) for m in self.cls]  # type: ignore[attr-defined]

    # -- container behaviour of the class ---------------------------------------------------
    def unpack(self, tx: Context) -> list[Value]:
        return self._members(tx, "iterating over")

    def iterate(self, tx: Context) -> Value:
        # EnumType.__iter__ returns a generator: made again at a graph break it would not be one
        return ListIteratorValue(self.unpack(tx), types.GeneratorType)

    def collect(self, tx: Context) -> list[Value]:
        self.length(tx)  # (the length hint: EnumType.__len__, the enum module's own)
        return self.unpack(tx)

    def reversed_iterator(self, tx: Context) -> Value:
        if not self._uses("__reversed__"):
            raise Unsupported(f"reversed() of {self.describe()}, whose metaclass defines it")
        self._guard_members(tx)
        members = [EnumMemberValue(m) for m in reversed(self.cls)]  # type: ignore[call-overload]
        return ListIteratorValue(members, types.GeneratorType)

    def length(self, tx: Context) -> int:
        if not self._uses("__len__"):
            raise Unsupported(f"len() of {self.describe()}, whose metaclass defines __len__")
        self._guard_members(tx)
        return len(self.cls)  # type: ignore[arg-type]

    def truth(self, tx: Context) -> bool:
        if self._uses("__bool__") and self._uses("__len__"):
            return True  # EnumType.__bool__: classes are always true
        return super().truth(tx)

    def contains(self, tx: Context, item: Value) -> bool:
        if not self._uses("__contains__") or not item.is_constant():
            raise Unsupported(f"'in' on {self.describe()}")
        obj = item.as_constant()
        # not a member: 3.11 warns and raises TypeError, 3.12 looks among the members' values
        if not isinstance(obj, enum.Enum) and (
            sys.version_info < (3, 12) or not self._values_compare_in_c(obj)
        ):
            raise Unsupported(f"'in' on {self.describe()} with {item.describe()}")
        self._guard_members(tx)
        return obj in self.cls  # type: ignore[operator]

    def _values_compare_in_c(self, value: Any) -> bool:
        """Whether looking ``value`` up among the members' values runs no Python code."""
        members = self.cls._member_map_.values()  # type: ignore[attr-defined]
        return _compares_in_c(value) and all(_compares_in_c(m._value_) for m in members)

    def getitem(self, tx: Context, key: Value) -> Value:
        if (
            not self._uses("__getitem__")
            or not key.is_constant()
            or not _compares_in_c(key.as_constant())
        ):
            raise Unsupported(f"indexing {self.describe()}")
        self._guard_members(tx)
        try:
            return member_value(self.cls[key.as_constant()])  # type: ignore[index]
        except Exception as error:
            raise raised_for_real(error, f"indexing {self.describe()}") from None

    def names_in_dir(self, tx: Context) -> list[str]:
        """``dir(cls)``, where EnumType's ``__dir__`` computes it from the class alone."""
        member_type = self.cls._member_type_  # type: ignore[attr-defined]
        if not self._uses("__dir__") or not is_immutable_class(member_type):
            # (the names of a mixed-in class of the user's could change)
            raise Unsupported(f"dir() of {self.describe()}")
        self._guard_members(tx)
        return dir(self.cls)

    # -- attributes and calls ---------------------------------------------------------------
    def getattr(self, tx: Context, name: str) -> Value:
        _, raw = lookup_mro(self.cls, name)
        plain = type(raw) in (types.DynamicClassAttribute, enum.property)
        if plain and self._reads_members():
            # an ``enum.property`` seen from the class: the member of that name, if any
            # (its __get__ and EnumType.__getattr__ read ``_member_map_`` only)
            self._guard_members(tx)
            try:
                found = getattr(self.cls, name)
            except AttributeError:
                raise attribute_missing(self.describe(), name) from None
            return member_value(found)
        return super().getattr(tx, name)

    def _reads_members(self) -> bool:
        meta = type(self.cls)
        return (
            _is_stdlib_method(meta, "__getattr__")
            and meta.__getattribute__ is type.__getattribute__
        )

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if len(args) == 1 and not kwargs and self._uses("__call__"):
            return self._lookup_by_value(tx, args[0])
        return super().call(tx, args, kwargs)

    def _lookup_by_value(self, tx: Context, arg: Value) -> Value:
        """``cls(value)``: the member with that value, by the real ``Enum.__new__``."""
        cls: Any = self.cls
        what = f"{cls.__qualname__}({arg.describe()})"
        if not arg.is_constant():
            raise Unsupported(f"looking up the member {what}: the value is not a constant")
        if cls.__new__ is not enum.Enum.__new__:
            raise Unsupported(f"looking up the member {what}: its class replaces __new__")
        if getattr(cls._missing_, "__func__", None) not in _STDLIB_MISSING:
            raise Unsupported(f"looking up the member {what}: its class defines _missing_")
        if not self._values_compare_in_c(arg.as_constant()):
            raise Unsupported(f"looking up the member {what}: a value's __eq__ is Python code")
        if not self._found_directly(arg.as_constant()) and (
            class_runs_user_code(cls)
            or not is_immutable_class(cls._member_type_)
            or not _is_stdlib_method(type(cls), "__repr__")
        ):
            # ``_missing_`` (Flag's makes a composite member) would call code of the user's
            raise Unsupported(f"looking up the member {what}: not one of its members' values")
        self._guard_members(tx)
        try:
            found = cls(arg.as_constant())
        except Exception as error:
            raise raised_for_real(error, f"looking up the member {what}") from None
        return member_value(found)

    def _found_directly(self, value: Any) -> bool:
        """Whether ``Enum.__new__`` finds ``value`` without calling ``_missing_``."""
        cls: Any = self.cls
        if type(value) is cls:
            return True
        try:
            return value in cls._value2member_map_
        except TypeError:  # unhashable: compared with each member's value
            return any(m._value_ == value for m in cls._member_map_.values())


class EnumMemberValue(ConstantValue):
    """An enum member: a constant, whose attributes that run the user's Python code are
    inlined (a property, an ``enum.property`` with a getter of the user's, a method), as are
    the ``enum`` module's methods where its class has code of the user's (they may call it)."""

    __slots__ = ()

    def getattr(self, tx: Context, name: str) -> Value:
        member = self.value
        klass, raw = lookup_mro(type(member), name)
        if klass is None or (
            name in getattr(member, "__dict__", {}) and not is_data_descriptor(raw)
        ):
            return super().getattr(tx, name)
        source = class_dict_source(klass, name)
        if isinstance(raw, (property, types.DynamicClassAttribute)):
            if not runs_enum_user_code(member, name):
                return super().getattr(tx, name)
            if type(raw) not in (property, types.DynamicClassAttribute, enum.property):
                raise Unsupported(f"attribute {name!r} of {self.describe()} ({type(raw)})")
            fget = tx.wrap(raw.fget, AttrSource(source, "fget"))
            return tx.call(fget, [self], {})
        if isinstance(raw, types.FunctionType) and (
            raw.__module__ != "enum" or enum_class_runs_user_code(member)
        ):
            return BoundMethodValue(tx.wrap(raw, source), self)
        if runs_enum_user_code(member, name):
            raise Unsupported(f"attribute {name!r} of {self.describe()} ({type(raw).__name__})")
        return super().getattr(tx, name)

    def hash_key(self, tx: Context) -> Any:
        # (enum's own __hash__ hashes the name; one of the user's would run at trace time)
        if runs_enum_user_code(self.value, "__hash__") or runs_enum_user_code(self.value, "__eq__"):
            raise Unsupported(f"{self.describe()} as a dict key or set member (its __hash__)")
        return super().hash_key(tx)
