"""Instances of set and frozenset subclasses that define nothing (``class Tags(set): pass``) or
ordinary methods alone (``def add(self, item): super().add(item + 1)``), which are inlined.

Such an instance behaves as its base set in everything but its type, and Python's own set
code gives results of the *base* type: ``s | t``, ``s.union(t)`` and ``s.copy()`` of a
subclass make a plain ``set`` (a ``frozenset`` for a frozenset subclass). The value keeps the
model of :class:`SetValue`, whose key mirror ``order`` here is a real instance of the subclass:
the real operations on it give the base type and Python's iteration order, as they do for
the real object.

What differs from :class:`SetValue`:

* the type (``type(s)``, ``isinstance``, the rebuilt object after a graph break);
* ``copy()`` of a frozenset subclass is a new frozenset (only an exact frozenset is its own
  copy);
* ``__init__`` of a frozenset subclass is ``object.__init__``, which ignores its arguments;
* the instance has a ``__dict__``: an input's own attributes are read through its source
  (their absence guarded); setting one is refused, so an instance built in the trace has
  none.
"""

from __future__ import annotations

import types
from typing import Any

from sapwood_graph import AttrSource

from ..errors import Unsupported
from ..guards.sources import ContainsSource
from .attributes import class_attribute, lookup_mro
from .base import BoundBuiltinMethod, ConstantValue, Context, Value
from .sets import SetValue

__all__ = ["SetSubclassValue", "plain_set_subclass", "plain_subclass_of"]

#: what a class statement puts in a class that defines nothing (3.13 adds the last two)
_INERT_NAMES = frozenset(
    {
        "__module__",
        "__qualname__",
        "__doc__",
        "__dict__",
        "__weakref__",
        "__firstlineno__",
        "__static_attributes__",
        "__slotnames__",  # copyreg's cache of the slot names, once pickled or copied
    }
)


def plain_subclass_of(cls: type, bases: tuple[type, ...]) -> bool:
    """Whether ``cls`` subclasses one of the builtin ``bases`` through classes that define
    nothing (``class Dict(dict): pass``), under the plain metaclass: its instances behave as
    the base's, but for their type."""
    if type(cls) is not type or cls in bases or not issubclass(cls, bases):
        return False
    for klass in cls.__mro__:
        if klass in bases:
            return True
        if klass.__module__ == "builtins" or not _INERT_NAMES.issuperset(klass.__dict__):
            return False
    return False


def plain_set_subclass(cls: type) -> bool:
    """Whether ``cls`` subclasses ``set`` or ``frozenset`` through classes written in Python
    that define nothing but ordinary methods (no special method: those the model applies
    without looking at the class), under the plain metaclass."""
    if plain_subclass_of(cls, (set, frozenset)):
        return True
    if type(cls) is not type or cls in (set, frozenset) or not issubclass(cls, (set, frozenset)):
        return False
    for klass in cls.__mro__:
        if klass in (set, frozenset):
            return True
        if klass.__module__ == "builtins":
            return False
        for name, raw in vars(klass).items():
            if name in _INERT_NAMES:
                continue
            if name.startswith("__") or not isinstance(
                raw, (types.FunctionType, staticmethod, classmethod)
            ):
                return False
    return False


class SetSubclassValue(SetValue):
    """A set (or frozenset) of a subclass that defines nothing or ordinary methods alone (found
    first, and inlined); ``order`` is a real instance of the subclass (for an input, the input
    itself), or of its base for a class with methods of its own, whose mirror operations must
    be set's."""

    __slots__ = ("cls", "obj")

    def __init__(
        self, cls: type, members: dict[Any, Value], order: Any, source: Any = None
    ) -> None:
        super().__init__(members, issubclass(cls, frozenset), source, order)
        self.cls = cls
        #: the real object of an input (its instance attributes)
        self.obj = order if source is not None else None

    def describe(self) -> str:
        return f"a {self.cls.__name__} of {len(self.members)}"

    def python_type(self) -> type:
        return self.cls

    def as_constant(self) -> Any:
        return self.cls(self.members[k].as_constant() for k in self.order)

    def getattr(self, tx: Context, name: str) -> Value:
        if name in ("__dict__", "__weakref__"):
            raise Unsupported(f"{name} of {self.describe()}")
        if self.source is not None:
            instance = vars(self.obj)
            if name in instance:
                return tx.wrap(instance[name], AttrSource(self.source, name))
            tx.guard_false(ContainsSource(AttrSource(self.source, "__dict__"), name))
        if name == "__init__" and self.frozen:
            return BoundBuiltinMethod(self, name)
        klass, _ = lookup_mro(self.cls, name)
        if klass is not None and klass.__module__ != "builtins":  # a method of the class's own
            found = class_attribute(tx, self.cls, name, self)
            if found is not None:
                return found
        return super().getattr(tx, name)

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if name == "copy" and self.frozen and not args and not kwargs:
            # the real copy of the subclass instance: a new frozenset, in its order
            return SetValue(dict(self.members), True, order=self.order.copy())
        if name == "__init__" and self.frozen:
            # object.__init__: a frozenset is made whole by __new__, its __init__ reads nothing
            return ConstantValue(None)
        return super().call_method(tx, name, args, kwargs)
