"""``zip(..., strict=True)``: a lazy iterator that checks, where its shortest argument ends,
that every argument ends there, as CPython's does.

CPython's strict zip takes the items of one step in argument order. When argument ``i`` (not
the first) ends first, the step's items taken so far are dropped and it raises ``ValueError:
zip() argument i+1 is shorter than argument(s) ...``. When the first ends, it asks each later
argument for one more item, in order, and raises ``... is longer than ...`` at the first that
has one; if none has, the zip ends. Errors other than ``StopIteration`` from an argument pass
through. The zip keeps no state of its own: asked again, it starts a step again.
"""

from __future__ import annotations

from ..values.base import Context, IteratorRecipe, IteratorValue, Value
from ..values.containers import TupleValue
from ..values.exceptions import python_error

__all__ = ["StrictZipIterator", "strict_zip_of"]


def strict_zip_of(*iterables: object) -> zip:
    """``zip(*iterables, strict=True)``: the recipe of a strict zip rebuilt at a graph break
    (a recipe passes positional arguments only)."""
    return zip(*iterables, strict=True)


def _arguments(i: int) -> str:
    """How CPython names the arguments before the ``i``-th (0-based): ``argument 1`` or
    ``arguments 1-i``."""
    return "argument 1" if i == 1 else f"arguments 1-{i}"


class StrictZipIterator(IteratorValue):
    __slots__ = ("sources",)

    def __init__(self, sources: list[IteratorValue]) -> None:
        super().__init__(None)
        self.sources = sources

    def python_type(self) -> type:
        return zip

    def describe(self) -> str:
        return "a zip(strict=True) iterator"

    def rebuild(self) -> IteratorRecipe | None:
        if any(it.source is None and it.rebuild() is None for it in self.sources):
            return None
        return IteratorRecipe(strict_zip_of, tuple(self.sources))

    def next_value(self, tx: Context) -> Value | None:
        if not self.sources:
            return None
        parts: list[Value] = []
        for i, it in enumerate(self.sources):
            item = it.next_value(tx)
            if item is None:
                if i:
                    raise python_error(
                        ValueError, f"zip() argument {i + 1} is shorter than {_arguments(i)}"
                    )
                break
            parts.append(item)
        else:
            return TupleValue(parts)
        for i in range(1, len(self.sources)):
            if self.sources[i].next_value(tx) is not None:
                raise python_error(
                    ValueError, f"zip() argument {i + 1} is longer than {_arguments(i)}"
                )
        return None
