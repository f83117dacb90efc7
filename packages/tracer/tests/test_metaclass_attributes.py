"""Attributes of a class read in the trace follow Python's order: a data descriptor of the
metaclass, then the class's MRO, then the metaclass's other attributes (``__mro__`` of an
ABC, a metaclass method). ``hasattr`` on them answers as eagerly."""

from __future__ import annotations

import collections.abc
import functools
from typing import Any

import torch

import sapwood_tracer


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


class _Meta(type):
    @property
    def kind(cls) -> str:
        return "meta-property:" + cls.__name__

    def describe(cls) -> str:
        return "meta-method:" + cls.__name__

    def shadowed(cls) -> str:
        return "meta"


class _WithMeta(metaclass=_Meta):
    kind = "class attribute (loses to the metaclass property)"

    def shadowed(self) -> str:  # the class's own attribute wins over a metaclass method
        return "class"


def test_abc_class_has_its_mro_from_the_metaclass():
    def fn(x):
        abc = collections.abc.MutableMapping
        return hasattr(abc, "__mro__"), abc.__mro__, getattr(abc, "__bases__", None), x + 1

    got, expected = _compiled(fn)(torch.ones(1)), fn(torch.ones(1))
    assert got[:3] == expected[:3]
    assert got[0] is True


def test_singledispatch_composes_the_mro_with_abcs():
    def fn(x):
        bases = [collections.abc.Sequence, collections.abc.MutableMapping]
        return functools._compose_mro(dict, bases), x  # type: ignore[attr-defined]

    assert _compiled(fn)(1) == fn(1)


def test_metaclass_property_comes_before_the_class_attribute():
    def fn(cls):
        return cls.kind, cls.describe(), cls.shadowed(None)

    assert _compiled(fn)(_WithMeta) == fn(_WithMeta)
    assert fn(_WithMeta) == ("meta-property:_WithMeta", "meta-method:_WithMeta", "class")
