"""``collections.defaultdict``: a dict whose missing keys its factory makes.

``d[key]`` of a missing key calls ``d.default_factory()`` (inlined, as any call), stores the
result under the key and returns it; with no factory (``None``) it raises ``KeyError`` as a
dict does. ``get``, ``in``, ``setdefault``, ``pop`` and iteration are dict's and never call
the factory. ``d.copy()`` is a defaultdict with the same factory.

One passed in is guarded on its type and keys (as a dict is) and its factory is read through
``default_factory``; the trace's writes to it are written back after the graph, as to a dict.
One the trace makes is rebuilt with its factory. What this model does not follow (``|``,
assigning ``default_factory`` of one passed in) is refused, a graph break with its reason.
"""

from __future__ import annotations

import collections
from typing import Any

from ..errors import TracedException, Unsupported
from .base import BoundBuiltinMethod, ConstantValue, Context, Value, attribute_missing
from .dicts import _DICT_METHODS, DictValue
from .dunders import has_special, special_method

__all__ = ["DefaultDictValue", "check_factory"]

_OWN_SPECIALS = frozenset(
    {"__repr__", "__str__", "__format__", "__or__", "__ror__", "__ior__", "__reduce__"}
    | {"__reduce_ex__", "__missing__", "__class_getitem__"}
)


class DefaultDictValue(DictValue):
    """A ``collections.defaultdict`` (exactly that class); ``factory`` its default factory."""

    __slots__ = ("factory",)

    def __init__(
        self,
        entries: dict[Any, tuple[Value, Value]],
        factory: Value,
        source: Any = None,
        obj: Any = None,
    ) -> None:
        super().__init__(entries, source, cls=collections.defaultdict, obj=obj)
        self.factory = factory

    def describe(self) -> str:
        return f"a defaultdict of {len(self.entries)}"

    def getitem(self, tx: Context, key: Value) -> Value:
        k = key.hash_key(tx)
        if k in self.entries:
            return self.entries[k][1]
        if self.factory.is_constant() and self.factory.as_constant() is None:
            raise TracedException(cls=KeyError, args=(key,))
        made = tx.call(self.factory, [], {})
        self.setitem(tx, key, made)
        return made

    def getattr(self, tx: Context, name: str) -> Value:
        if name == "default_factory":
            return self.factory
        if name in ("copy", "__copy__") or name in _DICT_METHODS:
            return BoundBuiltinMethod(self, name)
        if name in _OWN_SPECIALS:  # (defaultdict's own: its text, its |, its pickling)
            raise Unsupported(f"defaultdict.{name}")
        if has_special(dict, name):
            return special_method(self, dict, name)
        raise attribute_missing(self.describe(), name)

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        if name != "default_factory" or self.source is not None:
            raise Unsupported(f"setting attribute {name!r} of {self.describe()}")
        check_factory(value)
        self.factory = value

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if name in ("copy", "__copy__") and not args and not kwargs:
            return DefaultDictValue(dict(self.entries), self.factory)
        if name == "__missing__":
            raise Unsupported("defaultdict.__missing__ called directly")
        return super().call_method(tx, name, args, kwargs)

    def copy_class(self) -> type:
        raise Unsupported("a defaultdict's | (a defaultdict with its factory)")


def check_factory(factory: Value) -> None:
    """Python's TypeError for a factory that is neither callable nor None."""
    if factory.is_constant() and factory.as_constant() is None:
        return
    if not any("__call__" in vars(k) for k in factory.python_type().__mro__):
        raise TracedException(
            cls=TypeError, args=(ConstantValue("first argument must be callable or None"),)
        )
