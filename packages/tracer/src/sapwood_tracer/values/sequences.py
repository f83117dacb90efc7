"""Python sequences: tuples, lists, slices and named tuples (dicts: :mod:`.dicts`, sets:
:mod:`.sets`).

Invariants:

* Items are values. A container created during the trace is mutable in place (list.append,
  dict.__setitem__, ...); those mutations are private to the trace, because the object does
  not exist outside it until the outputs are rebuilt.
* A list that came from the inputs (it has a source) is guarded on its type and length; its
  mutations are written back after the graph (its final contents).
"""

from __future__ import annotations

import operator
import sys
from typing import Any

from ..errors import TracedException, Unsupported
from .attributes import class_attribute, indexes_in_python
from .base import (
    BoundBuiltinMethod,
    BuiltinValue,
    ConstantValue,
    Context,
    Value,
    attribute_missing,
    folds_for_real,
)
from .dunders import call_special, has_special, is_special, special_method
from .list_iterators import ListValueIterator, SliceValue, list_iterator_at

__all__ = [
    "ListValue",
    "ListValueIterator",
    "NamedTupleValue",
    "SliceValue",
    "TupleValue",
    "list_iterator_at",
]


def _index(tx: Context, key: Value) -> Any:
    """The int or slice a list or tuple takes ``key`` as (``PyNumber_AsSsize_t``: an int
    that does not fit a ``Py_ssize_t`` is CPython's IndexError, naming the key's type)."""
    if isinstance(key, SliceValue):
        return key.as_slice() if key.is_constant() else _slice_of(tx, key)
    if not key.is_constant() and key.python_type() is int:
        # a symbolic int: a Python list needs the number, so it is specialised (guarded);
        # an int the trace cannot know refuses in as_constant()
        return key.as_constant()
    if not key.is_constant() and indexes_in_python(key):
        # an object of the user's: its __index__ inlined and checked, as operator.index does
        index = tx.call_builtin(BuiltinValue(operator.index), [key], {}).as_constant()
        return _fitting(index, key.python_type())
    if not key.is_constant():
        raise Unsupported(f"indexing a Python sequence with {key.describe()}")
    k = key.as_constant()
    if not isinstance(k, (int, slice)):
        if hasattr(k, "__index__") and folds_for_real(k, "__index__"):
            return _fitting(k.__index__(), type(k))
        raise Unsupported(f"indexing a Python sequence with {type(k).__name__}")
    return k if isinstance(k, slice) else _fitting(k, type(k))


def _fitting(index: int, kind: type) -> int:
    if -sys.maxsize - 1 <= index <= sys.maxsize:
        return index
    message = f"cannot fit '{kind.__name__}' into an index-sized integer"
    raise TracedException(cls=IndexError, args=(ConstantValue(message),))


#: CPython's words for a slice bound that is no int, None or object with ``__index__``
_NOT_A_SLICE_INDEX = "slice indices must be integers or None or have an __index__ method"


def _slice_of(tx: Context, key: SliceValue) -> slice:
    """The slice a Python sequence takes ``key`` as: each bound an int or None, those of the
    user's objects by their ``__index__`` (inlined), in CPython's order (step, start, stop);
    the sequence clamps and checks the numbers as for any slice."""
    parts = key.parts + [ConstantValue(None)] * (3 - len(key.parts))
    bounds: dict[int, Any] = {}
    for position in (2, 0, 1):
        part = parts[position]
        if part.is_constant() or part.python_type() is int:
            bound = part.as_constant()  # (a symbolic int is specialised)
            indexable = bound is None or hasattr(type(bound), "__index__")
        elif indexes_in_python(part):
            bound = tx.call_builtin(BuiltinValue(operator.index), [part], {}).as_constant()
            indexable = True
        elif hasattr(part.python_type(), "__index__"):
            raise Unsupported(f"a slice bound of {part.describe()}")
        else:
            indexable = False
        if not indexable:
            raise TracedException(cls=TypeError, args=(ConstantValue(_NOT_A_SLICE_INDEX),))
        bounds[position] = bound
    return slice(bounds[0], bounds[1], bounds[2])


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
            self.items.extend(args[0].collect(tx))
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
