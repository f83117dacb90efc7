"""Python containers: tuples, lists, dicts, slices and named tuples (sets: :mod:`.sets`).

Invariants:

* Items are values. A container created during the trace is mutable in place (list.append,
  dict.__setitem__, ...); those mutations are private to the trace, because the object does
  not exist outside it until the outputs are rebuilt.
* A container that came from the inputs (it has a source) is guarded on its type and length
  (dicts: on their keys, in order); mutating it would be a side effect visible to the caller,
  which this release refuses with :class:`Unsupported`.
"""

from __future__ import annotations

import collections
import types
from typing import Any

from sapwood_graph import AttrSource

from ..errors import TracedException, Unsupported
from ..guards.sources import ContainsSource
from .attributes import class_attribute, is_data_descriptor, lookup_mro
from .base import (
    BoundBuiltinMethod,
    ConstantValue,
    Context,
    Value,
    attribute_missing,
)
from .dict_storage import mutable_input_dict
from .dunders import call_special, has_special, is_special, special_method
from .list_iterators import ListValueIterator, SliceValue, list_iterator_at
from .views import DictIteratorValue, DictViewValue

__all__ = [
    "DictValue",
    "ListValue",
    "ListValueIterator",
    "NamedTupleValue",
    "SliceValue",
    "TupleValue",
    "filled_dict",
    "list_iterator_at",
]


def _index(tx: Context, key: Value) -> Any:
    if isinstance(key, SliceValue):
        return key.as_slice()
    if not key.is_constant() and key.python_type() is int:
        # a symbolic int: a Python list needs the number, so it is specialised (guarded);
        # an int the trace cannot know refuses in as_constant()
        return key.as_constant()
    if not key.is_constant():
        raise Unsupported(f"indexing a Python sequence with {key.describe()}")
    k = key.as_constant()
    if not isinstance(k, (int, slice)):
        if hasattr(k, "__index__"):
            return k.__index__()
        raise Unsupported(f"indexing a Python sequence with {type(k).__name__}")
    return k


def _index_range(n: int, args: list[Value], kwargs: dict[str, Value]) -> range:
    """The positions ``seq.index(x[, start[, stop]])`` looks at, as Python clamps them."""
    if not args or len(args) > 3 or kwargs:
        raise Unsupported("index() without one to three positional arguments")
    bounds = [b.as_constant() for b in args[1:]]
    if not all(isinstance(b, int) for b in bounds):
        raise Unsupported("index() with bounds that are not ints")
    start = bounds[0] if bounds else None
    stop = bounds[1] if len(bounds) > 1 else None
    return range(n)[start:stop]


class _SequenceValue(Value):
    __slots__ = ("items",)

    def __init__(self, items: list[Value], source: Any = None) -> None:
        super().__init__(source)
        self.items = items

    def is_constant(self) -> bool:
        return all(v.is_constant() for v in self.items)

    def unpack(self, tx: Context) -> list[Value]:
        return list(self.items)

    def truth(self, tx: Context) -> bool:
        return bool(self.items)

    def length(self, tx: Context) -> int:
        return len(self.items)

    def _new(self, items: list[Value]) -> Value:
        raise NotImplementedError

    def getitem(self, tx: Context, key: Value) -> Value:
        index = _index(tx, key)
        if isinstance(index, slice):
            items = self.items[index]  # (all of an exact tuple, in order: CPython hands it back)
            whole = len(items) == len(self.items) and index.indices(len(items))[2] == 1
            return self if whole and self.python_type() is tuple else self._new(items)
        try:
            return self.items[index]
        except IndexError:
            kind = "list" if isinstance(self, ListValue) else "tuple"
            raise TracedException(
                cls=IndexError, args=(ConstantValue(f"{kind} index out of range"),)
            ) from None


def _not_in_list(item: Value) -> Value:
    if item.is_constant():
        return ConstantValue(f"{item.as_constant()!r} is not in list")
    return ConstantValue("list.index(x): x not in list")


class TupleValue(_SequenceValue):
    """A tuple."""

    __slots__ = ()

    def describe(self) -> str:
        return f"a tuple of {len(self.items)}"

    def python_type(self) -> type:
        return tuple

    def as_constant(self) -> Any:
        return tuple(v.as_constant() for v in self.items)

    def _new(self, items: list[Value]) -> Value:
        return TupleValue(items)

    def getattr(self, tx: Context, name: str) -> Value:
        if name in ("count", "index"):
            return BoundBuiltinMethod(self, name)
        if has_special(tuple, name):
            return special_method(self, tuple, name)
        raise attribute_missing(self.describe(), name)

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if is_special(name):
            return call_special(tx, self, tuple, name, args, kwargs)
        if name == "count":
            return ConstantValue(sum(tx.equal(v, args[0]) for v in self.items))
        for i in _index_range(len(self.items), args, kwargs):
            if tx.equal(self.items[i], args[0]):
                return ConstantValue(i)
        raise TracedException(
            cls=ValueError, args=(ConstantValue("tuple.index(x): x not in tuple"),)
        )


class NamedTupleValue(TupleValue):
    """A ``collections.namedtuple`` (or ``typing.NamedTuple``, or torch structseq) instance."""

    __slots__ = ("cls",)

    def __init__(self, cls: type, items: list[Value], source: Any = None) -> None:
        super().__init__(items, source)
        self.cls = cls

    def describe(self) -> str:
        return f"a {self.cls.__name__}"

    def python_type(self) -> type:
        return self.cls

    def fields(self) -> tuple[str, ...]:
        fields = getattr(self.cls, "_fields", None)
        if fields is None:  # torch.return_types structseq
            fields = tuple(getattr(self.cls, "__match_args__", ()))
        return tuple(fields)

    def as_constant(self) -> Any:
        values = [v.as_constant() for v in self.items]
        if hasattr(self.cls, "_make"):
            return self.cls._make(values)
        return self.cls(values)

    def _new(self, items: list[Value]) -> Value:
        return TupleValue(items)

    def getattr(self, tx: Context, name: str) -> Value:
        fields = self.fields()
        if name in fields:
            return self.items[fields.index(name)]
        found = class_attribute(tx, self.cls, name, self)
        if found is not None:
            return found
        return super().getattr(tx, name)


class ListValue(_SequenceValue):
    """A list."""

    __slots__ = ()

    def describe(self) -> str:
        return f"a list of {len(self.items)}"

    def python_type(self) -> type:
        return list

    def as_constant(self) -> Any:
        return [v.as_constant() for v in self.items]

    def _new(self, items: list[Value]) -> Value:
        return ListValue(items)

    def check_mutable(self, tx: Context) -> None:
        if self.source is not None:
            # a list from the inputs: its final contents are written back after the graph
            tx.side_effects.mutate_container(self)

    def iterate(self, tx: Context) -> Value:
        return ListValueIterator(self, 0)

    def getattr(self, tx: Context, name: str) -> Value:
        if name in _LIST_METHODS or name == "__init__":
            return BoundBuiltinMethod(self, name)
        if has_special(list, name):
            return special_method(self, list, name)
        raise attribute_missing(self.describe(), name)

    def setitem(self, tx: Context, key: Value, value: Value) -> None:
        self.check_mutable(tx)
        index = _index(tx, key)
        if isinstance(index, slice):
            self.items[index] = value.unpack(tx)
        else:
            self.items[index] = value

    def delitem(self, tx: Context, key: Value) -> None:
        self.check_mutable(tx)
        del self.items[_index(tx, key)]

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if is_special(name):
            return call_special(tx, self, list, name, args, kwargs)
        none = ConstantValue(None)
        if name in ("index", "count", "copy"):
            pass
        else:
            self.check_mutable(tx)
        if kwargs and name != "sort":
            raise Unsupported(f"list.{name} with keyword arguments")
        if name == "__init__":  # list.__init__(xs[, iterable]): empties xs, then extends it
            if len(args) > 1:
                raise Unsupported("list.__init__ with more than one argument (TypeError)")
            items = args[0].unpack(tx) if args else []
            self.items[:] = items
            return none
        if name == "append":
            self.items.append(args[0])
            return none
        if name == "extend":
            self.items.extend(args[0].unpack(tx))
            return none
        if name == "insert":
            self.items.insert(args[0].as_constant(), args[1])
            return none
        if name == "pop":
            return self.items.pop(*(a.as_constant() for a in args))
        if name == "clear":
            self.items.clear()
            return none
        if name == "reverse":
            self.items.reverse()
            return none
        if name == "copy":
            return ListValue(list(self.items))
        if name == "index":
            for i in _index_range(len(self.items), args, kwargs):
                if tx.equal(self.items[i], args[0]):
                    return ConstantValue(i)
            raise TracedException(cls=ValueError, args=(_not_in_list(args[0]),))
        if name == "count":
            return ConstantValue(sum(tx.equal(v, args[0]) for v in self.items))
        if name == "remove":
            for i, v in enumerate(self.items):
                if tx.equal(v, args[0]):
                    del self.items[i]
                    return none
            raise TracedException(
                cls=ValueError, args=(ConstantValue("list.remove(x): x not in list"),)
            )
        if name == "sort":
            if args or not all(_sortable(v) for v in self.items):
                raise Unsupported("list.sort of non-constant items")
            key = kwargs.get("key")
            reverse = kwargs.get("reverse", ConstantValue(False)).as_constant()
            if key is not None:
                keyed = [(tx.call(key, [v], {}).as_constant(), i) for i, v in enumerate(self.items)]
                order = [i for _, i in sorted(keyed, reverse=reverse)]
                self.items[:] = [self.items[i] for i in order]
            else:
                self.items.sort(key=lambda v: v.as_constant(), reverse=reverse)
            return none
        raise Unsupported(f"list.{name}")


_LIST_CHANGERS = ("append", "extend", "insert", "pop", "clear", "reverse", "remove", "sort")
_LIST_METHODS = frozenset((*_LIST_CHANGERS, "copy", "index", "count"))


def _sortable(v: Value) -> bool:
    """Whether ``v`` compares as a constant: one, a symbolic int (specialised), or a tuple of
    such (a symbolic float stays unknown)."""
    if type(v) is TupleValue:
        return all(_sortable(item) for item in v.items)
    return v.is_constant() or v.python_type() is int


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

    __slots__ = ("cls", "deletions", "entries", "obj")

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
            if self.cls is not dict and not mutable_input_dict(self.cls):
                raise Unsupported(f"mutating a {self.cls.__qualname__} that was passed in")
            # a dict from the inputs: its final contents are written back after the graph
            tx.side_effects.mutate_container(self)

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
            _, hook = lookup_mro(self.cls, "__getattr__")
            if isinstance(hook, types.FunctionType):  # inlined; its AttributeError is "missing"
                method = class_attribute(tx, self.cls, "__getattr__", self)
                assert method is not None
                return tx.call(method, [ConstantValue(name)], {})
        raise attribute_missing(self.describe(), name)

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if is_special(name):
            return call_special(tx, self, dict, name, args, kwargs)
        none = ConstantValue(None)
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
            self.deletions += len(self.entries)
            self.entries.clear()
            return none
        if name == "popitem":
            return self._popitem(args, kwargs)
        if name == "move_to_end" and self.cls is collections.OrderedDict:
            return self._move_to_end(tx, args, kwargs)
        raise Unsupported(f"dict.{name}")

    def _popitem(self, args: list[Value], kwargs: dict) -> Value:
        """``dict.popitem()`` (the last pair) and ``OrderedDict.popitem(last=True)``."""
        if self.source is not None:
            # written back as clear() + update(), the dict would not have the table popitem
            # leaves (a shared-key instance dict is combined): sys.getsizeof tells them apart
            raise Unsupported("popitem() of a dict that was passed in")
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
        for item in other.unpack(tx):
            key, value = item.unpack(tx)
            self.setitem(tx, key, value)


#: special methods an OrderedDict shares with dict (its own differ: ``__eq__``, ...)
_SAME_IN_ORDERED_DICT = frozenset(
    ["__getitem__", "__setitem__", "__delitem__", "__contains__", "__len__", "__iter__"]
)

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


def filled_dict(cls: type, pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """A ``cls`` holding ``pairs`` (a subclass's storage filled as dict's: ``Counter(pairs)``)."""
    if cls in (dict, collections.OrderedDict):
        return cls(pairs)  # type: ignore[no-any-return]
    out = dict.__new__(cls)
    dict.update(out, pairs)
    return out  # type: ignore[no-any-return]
