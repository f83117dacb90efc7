"""Dicts (``dict``, ``OrderedDict`` and dict subclasses that keep dict's storage).

Invariants:

* ``entries`` maps each key's trace-time hash key to ``(key value, value)`` in the dict's
  iteration order.
* A dict created during the trace is mutable in place; its mutations are private to the trace.
* A dict from the inputs (it has a source) is guarded on its type and its keys, in order; its
  mutations are written back after the graph (:mod:`..breaks.outputs`).
"""

from __future__ import annotations

import collections
import types
from typing import Any

from sapwood_graph import AttrSource

from ..errors import TracedException, Unsupported
from ..guards.sources import ContainsSource
from .attributes import class_attribute, is_data_descriptor, lookup_mro, python_getattr_hook
from .base import (
    BoundBuiltinMethod,
    ConstantValue,
    Context,
    Value,
    attribute_missing,
)
from .dict_storage import mutable_input_dict
from .dunders import call_special, has_special, is_special, special_method
from .sequences import ListValue, TupleValue
from .views import DictIteratorValue, DictViewValue

__all__ = ["DictValue", "filled_dict"]


def _rebuildable_subclass(cls: type, obj: Any) -> bool:
    """Whether a dict subclass's instance is its class and its items alone: classes written
    in Python up to ``dict`` (no C fields: ``defaultdict``'s factory), no instance attributes,
    its text made by dict's or ``collections``' code (a constant's ``repr()`` runs once)."""
    below = cls.__mro__[: cls.__mro__.index(dict)]
    heap = all(k.__flags__ & _HEAPTYPE for k in below)
    text = all(k.__module__ == "collections" or not _TEXT & k.__dict__.keys() for k in below)
    return heap and text and not getattr(obj, "__dict__", None)


_HEAPTYPE = 1 << 9
_TEXT = frozenset({"__repr__", "__str__", "__format__"})


class DictValue(Value):
    """A dict (insertion-ordered). ``entries`` maps trace-time keys to (key value, value)."""

    __slots__ = ("cleared", "cls", "deletions", "entries", "obj", "original", "popped")

    def __init__(
        self,
        entries: dict[Any, tuple[Value, Value]],
        source: Any = None,
        cls: type = dict,
        obj: Any = None,
    ) -> None:
        super().__init__(source)
        self.entries = entries
        self.cls = cls
        #: the real object of a dict subclass from the inputs (its instance attributes)
        self.obj = obj
        #: keys removed so far (an iterator tells a key removed and put back from no change)
        self.deletions = 0
        #: a dict from the inputs: its entries before the trace first changed it
        self.original: dict[Any, tuple[Value, Value]] | None = None
        #: a dict from the inputs: how many times the trace called its popitem()
        self.popped = 0
        #: whether the trace called its clear() (which frees the table, even of no keys)
        self.cleared = False

    @classmethod
    def from_pairs(cls, tx: Context, pairs: list[tuple[Value, Value]]) -> DictValue:
        out = cls({})
        for k, v in pairs:
            out.entries[k.hash_key(tx)] = (k, v)
        return out

    def describe(self) -> str:
        return f"a dict of {len(self.entries)}"

    def python_type(self) -> type:
        return self.cls

    def is_constant(self) -> bool:
        if self.cls not in (dict, collections.OrderedDict) and not _rebuildable_subclass(
            self.cls, self.obj
        ):
            return False
        return all(k.is_constant() and v.is_constant() for k, v in self.entries.values())

    def as_constant(self) -> Any:
        pairs = [(k.as_constant(), v.as_constant()) for k, v in self.entries.values()]
        return filled_dict(self.cls, pairs)

    def check_mutable(self, tx: Context) -> None:
        if self.source is not None:
            if self.cls not in (dict, collections.OrderedDict) and not mutable_input_dict(self.cls):
                raise Unsupported(f"mutating a {self.cls.__qualname__} that was passed in")
            # a dict from the inputs: its final contents are written back after the graph
            if self.original is None:
                self.original = dict(self.entries)
            tx.side_effects.mutate_container(self)

    def popitem_replay(self) -> tuple[int, list[tuple[Value, Value]]] | None:
        """The exact write-back of a dict from the inputs whose keys the trace changed by
        ``popitem()`` alone: that many ``dict.popitem`` calls on the real dict (which leave
        its table as Python's popitem does), then the pairs whose values the trace replaced.
        ``None`` when its keys changed otherwise (or never): the write-back is the contents."""
        original = self.original
        if not self.popped or original is None or self.cleared or self.cls is not dict:
            return None
        # every key removed by popitem and none added: the original keys less the last ones
        kept = len(original) - self.popped
        if self.deletions != self.popped or len(self.entries) != kept:
            return None
        assert list(self.entries) == list(original)[:kept]
        return self.popped, [p for k, p in self.entries.items() if p[1] is not original[k][1]]

    def unpack(self, tx: Context) -> list[Value]:
        return [k for k, _ in self.entries.values()]

    def iterate(self, tx: Context) -> Value:
        return DictIteratorValue(DictViewValue(self, "keys", TupleValue))

    def truth(self, tx: Context) -> bool:
        return bool(self.entries)

    def length(self, tx: Context) -> int:
        return len(self.entries)

    def getitem(self, tx: Context, key: Value) -> Value:
        k = key.hash_key(tx)
        if k not in self.entries:
            klass, missing = lookup_mro(self.cls, "__missing__")
            if isinstance(missing, types.FunctionType):  # ``Counter``'s: inlined
                return tx.call(class_attribute(tx, self.cls, "__missing__", self), [key], {})
            if klass is not None:
                raise Unsupported(f"{self.cls.__qualname__}.__missing__ (a missing key)")
            raise TracedException(cls=KeyError, args=(key,))
        return self.entries[k][1]

    def setitem(self, tx: Context, key: Value, value: Value) -> None:
        self.check_mutable(tx)
        k = key.hash_key(tx)
        old = self.entries.get(k)
        self.entries[k] = (old[0] if old else key, value)

    def delitem(self, tx: Context, key: Value) -> None:
        self.check_mutable(tx)
        k = key.hash_key(tx)
        if k not in self.entries:
            raise TracedException(cls=KeyError, args=(key,))
        del self.entries[k]
        self.deletions += 1

    def contains(self, tx: Context, item: Value) -> bool:
        return item.hash_key(tx) in self.entries

    def getattr(self, tx: Context, name: str) -> Value:
        # Python's order for a dict subclass: data descriptors of the class, the instance's
        # own attributes, other class attributes, dict's methods, then __getattr__.
        subclass = self.cls not in (dict, collections.OrderedDict)
        klass, raw = lookup_mro(self.cls, name) if subclass else (None, None)
        written_in_python = (
            klass is not None
            and klass.__module__ != "builtins"
            and klass is not collections.OrderedDict
        )
        if written_in_python and is_data_descriptor(raw):
            return class_attribute(tx, self.cls, name, self)  # type: ignore[return-value]
        instance = getattr(self.obj, "__dict__", None)
        if instance is not None and self.source is not None:
            pending = tx.side_effects.pending_attr(self.obj, name)
            if pending is not None:  # (assigned earlier in the trace)
                return pending
            attrs = AttrSource(self.source, "__dict__")
            if name in instance:
                return tx.wrap(instance[name], AttrSource(self.source, name))
            tx.guard_false(ContainsSource(attrs, name))
        if written_in_python:
            found = class_attribute(tx, self.cls, name, self)
            if found is not None:
                return found
        if name in _DICT_METHODS or (name == "move_to_end" and self.cls is collections.OrderedDict):
            return BoundBuiltinMethod(self, name)
        if has_special(dict, name):
            if self.cls is collections.OrderedDict and name not in _SAME_IN_ORDERED_DICT:
                raise Unsupported(f"the special attribute OrderedDict.{name}")
            return special_method(self, dict, name)
        if subclass:
            hooked = python_getattr_hook(tx, self.cls, self, name)
            if hooked is not None:
                return hooked
        raise attribute_missing(self.describe(), name)

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        """``d.name = value`` on a dict subclass's instance from the inputs: an attribute
        write of its ``__dict__``, replayed after the graph (as for a plain object)."""
        obj, cls = self.obj, self.cls
        klass, raw = lookup_mro(cls, name)
        if (
            self.source is None
            or not isinstance(getattr(obj, "__dict__", None), dict)
            or (klass is not None and is_data_descriptor(raw))
            or (cls.__setattr__ is not object.__setattr__ and not tx.plain_setattr(cls))
            or tx.known(obj.__dict__) is not None  # (a __dict__ the trace holds would not see it)
        ):
            raise Unsupported(f"setting attribute {name!r} of {self.describe()}")
        tx.record_attr_write(self, name, value)

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if is_special(name):
            return call_special(tx, self, dict, name, args, kwargs)
        none = ConstantValue(None)
        if name in _NO_ARGUMENTS and (args or kwargs):
            raise self._arguments_error(name, args, kwargs)
        if name in ("keys", "values", "items") and not args and not kwargs:
            return DictViewValue(self, name, TupleValue)
        if name == "get":
            k = args[0].hash_key(tx)
            if k in self.entries:
                return self.entries[k][1]
            return args[1] if len(args) > 1 else none
        if name == "copy":
            return DictValue(dict(self.entries), cls=self.copy_class())
        self.check_mutable(tx)
        if name in ("update", "__init__"):  # dict.__init__ on a subclass's super().__init__()
            if args:
                self.update_from(tx, args[0])
            for kname, v in kwargs.items():
                self.setitem(tx, ConstantValue(kname), v)
            return none
        if name == "pop":
            k = args[0].hash_key(tx)
            if k in self.entries:
                self.deletions += 1
                return self.entries.pop(k)[1]
            if len(args) > 1:
                return args[1]
            raise TracedException(cls=KeyError, args=(args[0],))
        if name == "setdefault":
            k = args[0].hash_key(tx)
            if k not in self.entries:
                self.entries[k] = (args[0], args[1] if len(args) > 1 else none)
            return self.entries[k][1]
        if name == "clear":
            self.cleared = True
            self.deletions += len(self.entries)
            self.entries.clear()
            return none
        if name == "popitem":
            return self._popitem(args, kwargs)
        if name == "move_to_end" and self.cls is collections.OrderedDict:
            return self._move_to_end(tx, args, kwargs)
        raise Unsupported(f"dict.{name}")

    def _arguments_error(self, name: str, args: list[Value], kwargs: dict) -> Exception:
        """Python's ``TypeError`` for a method that takes no arguments given some: the real
        method (dict's, or OrderedDict's own) raises it before it reads them."""
        owner = collections.OrderedDict if issubclass(self.cls, collections.OrderedDict) else dict
        try:
            getattr(owner(), name)(*[0] * len(args), **dict.fromkeys(kwargs, 0))
        except TypeError as exc:
            return TracedException(cls=TypeError, args=(ConstantValue(str(exc)),))
        return Unsupported(f"{owner.__name__}.{name} with arguments")

    def _popitem(self, args: list[Value], kwargs: dict) -> Value:
        """``dict.popitem()`` (the last pair) and ``OrderedDict.popitem(last=True)``."""
        if self.cls is collections.OrderedDict:
            last = _flag("popitem", "last", args, kwargs, 0)
            empty = "dictionary is empty"
        else:
            if args or kwargs:
                raise TracedException(
                    cls=TypeError,
                    args=(ConstantValue(f"dict.popitem() takes no arguments ({len(args)} given)"),),
                )
            last, empty = True, "popitem(): dictionary is empty"
        if not self.entries:
            raise TracedException(cls=KeyError, args=(ConstantValue(empty),))
        k = next(reversed(self.entries)) if last else next(iter(self.entries))
        key, value = self.entries.pop(k)
        self.deletions += 1
        if self.source is not None:
            # (the keys of a dict from the inputs are guarded in order: its last is known)
            self.popped += 1
        return TupleValue([key, value])

    def _move_to_end(self, tx: Context, args: list[Value], kwargs: dict) -> Value:
        if not args:
            raise Unsupported("OrderedDict.move_to_end without a key (TypeError)")
        last = _flag("move_to_end", "last", args, kwargs, 1)
        k = args[0].hash_key(tx)
        if k not in self.entries:
            raise TracedException(cls=KeyError, args=(args[0],))
        pair = self.entries.pop(k)
        if last:
            self.entries[k] = pair
        else:
            rest = list(self.entries.items())
            self.entries.clear()
            self.entries[k] = pair
            self.entries.update(rest)
        return ConstantValue(None)

    def copy_class(self) -> type:
        """The class of ``d.copy()`` and ``d | other``: dict's make a plain dict, even of a
        subclass; OrderedDict's make an OrderedDict."""
        if self.cls is collections.OrderedDict:
            return self.cls
        if issubclass(self.cls, collections.OrderedDict):
            raise Unsupported(f"copying a {self.cls.__qualname__} (its class's own copy)")
        return dict

    def update_from(self, tx: Context, other: Value) -> None:
        if isinstance(other, DictValue):
            for k, pair in other.entries.items():
                old = self.entries.get(k)
                self.entries[k] = (old[0] if old else pair[0], pair[1])
            return
        if _has_keys(tx, other):
            # a mapping: Python iterates ``other.keys()`` and reads each ``other[key]``
            for key in tx.unpack(tx.call(tx.getattr(other, "keys"), [], {})):
                self.setitem(tx, key, tx.getitem(other, key))
            return
        if other.is_constant() and not _iterable(other.as_constant()):
            message = f"'{type(other.as_constant()).__name__}' object is not iterable"
            raise TracedException(cls=TypeError, args=(ConstantValue(message),))
        for i, item in enumerate(other.unpack(tx)):
            if item.is_constant() and not _iterable(item.as_constant()):
                message = f"cannot convert dictionary update sequence element #{i} to a sequence"
                raise TracedException(cls=TypeError, args=(ConstantValue(message),))
            pair = item.unpack(tx)
            if len(pair) != 2:
                message = (
                    f"dictionary update sequence element #{i} has length {len(pair)}; 2 is required"
                )
                raise TracedException(cls=ValueError, args=(ConstantValue(message),))
            self.setitem(tx, pair[0], pair[1])


#: special methods an OrderedDict shares with dict (its own differ: ``__eq__``, ...)
_SAME_IN_ORDERED_DICT = frozenset(
    ["__getitem__", "__setitem__", "__delitem__", "__contains__", "__len__", "__iter__"]
)

#: dict's methods that take no arguments
_NO_ARGUMENTS = frozenset(["keys", "values", "items", "copy", "clear"])

_DICT_METHODS = frozenset(
    ["keys", "values", "items", "get", "copy", "update", "pop", "setdefault", "clear", "popitem"]
)


def _flag(method: str, name: str, args: list[Value], kwargs: dict, position: int) -> bool:
    """A boolean argument of an OrderedDict method, given by position or keyword."""
    rest = args[position:]
    if len(rest) > 1 or set(kwargs) - {name} or (rest and kwargs):
        raise Unsupported(f"OrderedDict.{method} with these arguments (TypeError)")
    flag = rest[0] if rest else kwargs.get(name, ConstantValue(True))
    if not flag.is_constant():
        raise Unsupported(f"OrderedDict.{method} with {flag.describe()} for {name}")
    return bool(flag.as_constant())


def _has_keys(tx: Context, other: Value) -> bool:
    """Whether ``dict.update(other)`` takes ``other`` as a mapping (it has ``keys``)."""
    if isinstance(other, (TupleValue, ListValue)):
        return False
    if other.is_constant():
        return hasattr(other.as_constant(), "keys")
    try:
        return other.hasattr(tx, "keys")
    except Unsupported:
        # an iterator or generator the trace cannot ask for attributes: a builtin type
        # whose instances have no ``__dict__`` has the attributes of its type alone
        cls = other.python_type()
        if cls.__flags__ & _HEAPTYPE or cls.__dictoffset__:
            raise
        return hasattr(cls, "keys")


def _iterable(obj: Any) -> bool:
    try:
        iter(obj)
    except TypeError:
        return False
    return True


def filled_dict(cls: type, pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """A ``cls`` holding ``pairs`` (a subclass's storage filled as dict's: ``Counter(pairs)``)."""
    if cls in (dict, collections.OrderedDict):
        return cls(pairs)  # type: ignore[no-any-return]
    out = dict.__new__(cls)
    dict.update(out, pairs)
    return out  # type: ignore[no-any-return]
