"""``cls[args]`` in traced code: builtin generics (``list[int]``) and classes whose
``__class_getitem__`` is ``types.GenericAlias`` (``collections.abc`` subclasses such as
torch's ``OrderedSet``, in ``cast(OrderedSet[T], ...)``) make their alias while tracing; a class
without the hook raises Python's TypeError. Before, indexing a class was a graph break."""

from __future__ import annotations

import collections.abc
import typing
from typing import Any

import pytest
import torch

import sapwood_tracer

from .conftest import CountingBackend

T = typing.TypeVar("T")


class Bag(collections.abc.MutableSet):
    def __init__(self, items: Any = ()) -> None:
        self._items = dict.fromkeys(items)

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __iter__(self) -> Any:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: Any) -> None:
        self._items[item] = None

    def discard(self, item: Any) -> None:
        self._items.pop(item, None)


class OwnHook:
    def __class_getitem__(cls, item: Any) -> str:
        return f"own {item}"


def _same_compiled(fn: Any, *args: Any) -> Any:
    expected = fn(*args)
    backend = CountingBackend()
    got = sapwood_tracer.compile(fn, backend=backend, fullgraph=True)(*args)
    assert backend.count == 1
    return got, expected


def test_generic_aliases_are_made_while_tracing() -> None:
    def f(x: torch.Tensor) -> Any:
        items = typing.cast(Bag[T], Bag([1, 2]))
        return x + len(items), list[int], dict[str, list[int]], Bag[T], tuple[int, ...]

    got, expected = _same_compiled(f, torch.zeros(1))
    assert got[1:] == expected[1:]
    torch.testing.assert_close(got[0], expected[0])


def test_a_class_without_the_hook_raises_pythons_type_error() -> None:
    def f(x: torch.Tensor) -> Any:
        try:
            int[3]
        except TypeError as exc:
            return x + 1, str(exc)
        return x, ""

    got, expected = _same_compiled(f, torch.zeros(1))
    assert got[1] == expected[1] == "type 'int' is not subscriptable"


def test_a_class_with_its_own_hook_is_refused() -> None:
    def f(x: torch.Tensor) -> Any:
        return x, OwnHook[int]

    with pytest.raises(sapwood_tracer.Unsupported, match="own __class_getitem__"):
        sapwood_tracer.compile(f, backend=CountingBackend(), fullgraph=True)(torch.zeros(1))
