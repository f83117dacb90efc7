"""The iterator over a list value, and slices whose bounds are values (re-exported by
:mod:`.containers`)."""

from __future__ import annotations

from typing import Any

from .base import ConstantValue, Context, IteratorRecipe, IteratorValue, Value

__all__ = ["ListValueIterator", "SliceValue", "list_iterator_at"]


def list_iterator_at(items: list[Any], index: int) -> Any:
    """A list iterator over ``items`` that has already produced ``index`` items: how a graph
    break inside a loop over a list continues that very iteration (it sees what the rest of
    the loop stores into or appends to the list, as the original iteration would)."""
    iterator = iter(items)
    iterator.__setstate__(index)  # type: ignore[attr-defined]
    return iterator


class ListValueIterator(IteratorValue):
    """``iter(a_list)``: reads the list as it is at each step, as CPython's list iterator
    does, so items stored or appended during the loop are seen."""

    __slots__ = ("done", "index", "target")

    def __init__(self, target: Any, index: int) -> None:
        super().__init__(None)
        self.target = target
        self.index = index
        self.done = False  # once exhausted, it stays so even if the list grows (as CPython's)

    def describe(self) -> str:
        return "a list iterator"

    def python_type(self) -> type:
        return type(iter([]))

    def next_value(self, tx: Context) -> Value | None:
        items = self.target.items
        if self.done or self.index >= len(items):
            self.done = True
            return None
        value = items[self.index]
        self.index += 1
        return value

    def remaining(self) -> list[Value] | None:
        return [] if self.done else list(self.target.items[self.index :])

    def rebuild(self) -> IteratorRecipe | None:
        if self.done:
            return IteratorRecipe(iter, ((),))
        return IteratorRecipe(list_iterator_at, (self.target, ConstantValue(self.index)))


class SliceValue(Value):
    """A slice whose bounds are values (constants or None)."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[Value]) -> None:
        super().__init__(None)
        self.parts = parts

    def describe(self) -> str:
        return "a slice"

    def python_type(self) -> type:
        return slice

    def is_constant(self) -> bool:
        return all(p.is_constant() for p in self.parts)

    def as_slice(self) -> slice:
        return slice(*(p.as_constant() for p in self.parts))

    def as_constant(self) -> Any:
        return self.as_slice()
