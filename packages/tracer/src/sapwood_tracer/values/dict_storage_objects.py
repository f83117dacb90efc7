"""Objects of dict subclasses written in Python, passed in, whose entries the trace reads
through the builtin dict's own methods: ``dict(self.items())`` inside a class's
``__getitem__``, ``"key" in obj`` or ``len(obj)`` where the class keeps dict's (or
``OrderedDict``'s) ``__contains__`` and ``__len__``; an older Hugging Face ``ModelOutput``, a
config class built on ``OrderedDict``.

Everything else about such an object is a user object's (:class:`ObjectValue`: its Python
methods inlined, its attributes read from its ``__dict__``). Its entries are read once, the
first time the trace needs them: the keys, in the object's own order (``OrderedDict``'s for an
``OrderedDict``), guarded as a tuple of constants, and each value through its own source, which
reads the entry with ``dict.__getitem__`` (never the class's ``__getitem__``). Writing an
entry through the builtin methods stays a graph break, so what was read cannot go stale within
the trace.
"""

from __future__ import annotations

import collections
from typing import Any

from sapwood_graph import GuardKind

from ..errors import Unsupported
from ..guards.sources import ReaderSource
from .attributes import lookup_mro
from .base import (
    BoundBuiltinMethod,
    BuiltinValue,
    ConstantValue,
    Context,
    Value,
    is_constant_type,
)
from .containers import DictValue, ListValue, TupleValue
from .objects import ObjectValue

__all__ = ["DictStorageObjectValue", "stored_entry_keys"]

#: the builtin methods answered from the entries read
_READS = frozenset(
    {"keys", "values", "items", "get", "__contains__", "__len__", "__iter__", "__getitem__"}
)


#: the methods read by name (``obj.items()``)
_METHODS = frozenset({"keys", "values", "items", "get"})


def stored_entry_keys(obj: Any) -> tuple[Any, ...] | None:
    """The keys of a dict (subclass) object in its own order, read past its class's methods;
    None for an ``OrderedDict`` whose order no longer agrees with its dict (an entry set with
    ``dict.__setitem__`` behind its back: its length and its iteration then disagree)."""
    if not isinstance(obj, collections.OrderedDict):
        return tuple(dict.keys(obj))
    try:
        keys = tuple(collections.OrderedDict.keys(obj))
    except RuntimeError:
        return None
    return keys if len(keys) == dict.__len__(obj) else None


class _Entry:
    """A guard reader: the entry ``key`` of a dict object, read with ``dict.__getitem__``."""

    __slots__ = ("__name__", "key")

    def __init__(self, key: Any) -> None:
        self.key = key
        self.__name__ = f"dict_entry[{key!r}]"

    def __call__(self, obj: Any) -> Any:
        return dict.__getitem__(obj, self.key)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Entry)
            and type(other.key) is type(self.key)
            and other.key == self.key
        )

    def __hash__(self) -> int:
        return hash((_Entry, type(self.key), self.key))


class DictStorageObjectValue(ObjectValue):
    """A dict subclass's object passed in (see the module's docstring)."""

    __slots__ = ("entries",)

    def __init__(self, obj: Any, source: Any) -> None:
        super().__init__(obj, source)
        self.entries: DictValue | None = None

    def _builtin(self, name: str) -> bool:
        """Whether the class takes ``name`` from dict or OrderedDict (no Python override)."""
        klass, _ = lookup_mro(self.python_type(), name)
        return klass in (dict, collections.OrderedDict)

    def read_entries(self, tx: Context) -> DictValue:
        """The entries, read (and guarded) on first use; a dict of the trace from then on."""
        if self.entries is not None:
            return self.entries
        assert self.source is not None
        keys = stored_entry_keys(self.obj)
        if keys is None:
            raise Unsupported(f"the entries of {self.describe()}, whose order and dict disagree")
        if not all(is_constant_type(k) for k in keys):
            raise Unsupported(f"the entries of {self.describe()}, whose keys are not constants")
        tx.guard(GuardKind.CONSTANT_MATCH, ReaderSource(self.source, stored_entry_keys), keys)
        entries = DictValue({})
        for key in keys:
            value = tx.wrap(dict.__getitem__(self.obj, key), ReaderSource(self.source, _Entry(key)))
            entries.entries[key] = (ConstantValue(key), value)
        self.entries = entries
        return entries

    def getattr(self, tx: Context, name: str) -> Value:
        # the generic lookup first: it guards where the name was found (not the instance's
        # own dict, the class's MRO), and sees the trace's own writes
        found = super().getattr(tx, name)
        if name in _METHODS and self._builtin(name) and isinstance(found, BuiltinValue):
            bound = found.fn
            if getattr(bound, "__self__", None) is self.obj:
                return BoundBuiltinMethod(self, name)
        return found

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        """``dict.<name>(obj, ...)`` / ``OrderedDict.<name>(obj, ...)`` (the builtin's own,
        reached through ``super()`` or the class): a read of the entries."""
        if name not in _READS:
            raise Unsupported(f"dict.{name} on {self.describe()} (its entries are not modelled)")
        entries = self.read_entries(tx)
        if name in ("keys", "values", "items"):
            # (a list of the trace stands for the live view: the entries cannot change here)
            pairs = list(entries.entries.values())
            if name == "keys":
                return ListValue([k for k, _ in pairs])
            if name == "values":
                return ListValue([v for _, v in pairs])
            return ListValue([TupleValue([k, v]) for k, v in pairs])
        return entries.call_method(tx, name, args, kwargs)

    def _dunder(self, tx: Context, name: str, args: list[Value]) -> Value:
        if name in _READS and self._builtin(name):
            return self.call_method(tx, name, args, {})
        return super()._dunder(tx, name, args)

    def _has(self, name: str) -> bool:
        return (name in _READS and self._builtin(name)) or super()._has(name)
