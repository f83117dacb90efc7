"""Views of a dict (``keys()``, ``values()``, ``items()``) and the iterator over a dict or
one of its views.

Invariant: a view reads its dict value at each use (it is live, as Python's is), and the
iterator checks the dict at each step, failing as Python's does once the dict changed size.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from ..errors import TracedException, Unsupported
from .base import ConstantValue, Context, IteratorRecipe, IteratorValue, Value

__all__ = ["DictIteratorValue", "DictViewValue", "dict_iterator_at"]


class DictViewValue(Value):
    """``d.keys()``, ``d.values()``, ``d.items()``: a live view of the dict value (its
    length, membership and iteration follow later changes); anything else a view offers
    (set operations, comparisons) is computed on real views when constant, else refused."""

    __slots__ = ("kind", "owner", "pair")

    def __init__(self, owner: Any, kind: str, pair: Callable[[list[Value]], Value]) -> None:
        super().__init__(None)
        self.owner = owner  # a DictValue
        self.kind = kind
        self.pair = pair  # makes the (key, value) tuples of items()

    def describe(self) -> str:
        return f"dict_{self.kind} of {self.owner.describe()}"

    def python_type(self) -> type:
        return type(getattr({}, self.kind)())

    def is_constant(self) -> bool:
        return self.owner.is_constant()

    def as_constant(self) -> Any:
        return getattr(self.owner.as_constant(), self.kind)()

    def unpack(self, tx: Context) -> list[Value]:
        entries = self.owner.entries.values()
        if self.kind == "keys":
            return [k for k, _ in entries]
        if self.kind == "values":
            return [v for _, v in entries]
        return [self.pair([k, v]) for k, v in entries]

    def iterate(self, tx: Context) -> Value:
        return DictIteratorValue(self)

    def truth(self, tx: Context) -> bool:
        return bool(self.owner.entries)

    def length(self, tx: Context) -> int:
        return len(self.owner.entries)

    def contains(self, tx: Context, item: Value) -> bool:
        if self.kind == "keys":
            return item.hash_key(tx) in self.owner.entries
        return super().contains(tx, item)


class DictIteratorValue(IteratorValue):
    """Iterating a dict or one of its views, forward or (``reversed()``) backward: like
    Python's iterator, it fails once the dict changed size; keys changed without a change of
    size are refused (Python's answer depends on its hash table)."""

    __slots__ = ("deletions", "keys", "position", "reverse", "view")

    def __init__(self, view: DictViewValue, reverse: bool = False) -> None:
        super().__init__(None)
        self.view = view
        self.keys: list[Any] | None = list(view.owner.entries)
        self.deletions = view.owner.deletions
        self.position = 0
        self.reverse = reverse

    def describe(self) -> str:
        return f"{'a reversed' if self.reverse else 'an'} iterator over {self.view.describe()}"

    def python_type(self) -> type:
        empty = collections.OrderedDict() if _ordered(self.view.owner.cls) else {}
        return type(_real_iterator(empty, self.view.kind, self.reverse))

    def next_value(self, tx: Context) -> Value | None:
        keys, entries = self.keys, self.view.owner.entries
        if keys is None:  # exhausted: it stays so
            return None
        if len(entries) != len(keys) or self.deletions < 0:
            self.deletions = -1  # (Python's iterator fails from now on, whatever the size)
            raise TracedException(
                cls=RuntimeError,
                args=(ConstantValue("dictionary changed size during iteration"),),
            )
        if self.changed():
            raise Unsupported("a dict whose keys changed while it was iterated")
        if self.position >= len(keys):
            self.keys = None
            return None
        index = len(keys) - 1 - self.position if self.reverse else self.position
        k, v = entries[keys[index]]
        self.position += 1
        if self.view.kind == "keys":
            return k
        return v if self.view.kind == "values" else self.view.pair([k, v])

    def changed(self) -> bool:
        owner = self.view.owner
        return owner.deletions != self.deletions or list(owner.entries) != self.keys

    def remaining(self) -> list[Value] | None:
        if self.keys is None:
            return []
        if self.changed():
            return None
        items = self.view.unpack(None)  # type: ignore[arg-type]
        return items[::-1][self.position :] if self.reverse else items[self.position :]

    def rebuild(self) -> IteratorRecipe | None:
        # the real iterator over the real view, moved on to where this one is: it sees what
        # the code after a graph break does to the dict, as Python's would
        if self.keys is None:
            return IteratorRecipe(iter, ((),))
        if self.changed():
            return None
        kind, position = ConstantValue(self.view.kind), ConstantValue(self.position)
        args = (self.view.owner, kind, position, ConstantValue(self.reverse))
        return IteratorRecipe(dict_iterator_at, args)


def _ordered(cls: type) -> bool:
    return issubclass(cls, collections.OrderedDict)


def _real_iterator(mapping: dict[Any, Any], kind: str, reverse: bool) -> Any:
    # dict's view (OrderedDict's for one), as the trace's: not a subclass's own keys()
    owner = collections.OrderedDict if _ordered(type(mapping)) else dict
    view = getattr(owner, kind)(mapping)
    return reversed(view) if reverse else iter(view)


def dict_iterator_at(mapping: dict[Any, Any], kind: str, position: int, reverse: bool) -> Any:
    """An iterator over ``mapping.<kind>()`` (``reversed()`` of it if ``reverse``) that has
    yielded ``position`` items (made again at a graph break while one is live)."""
    iterator = _real_iterator(mapping, kind, reverse)
    for _ in range(position):
        next(iterator)
    return iterator
