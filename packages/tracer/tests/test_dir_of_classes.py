"""``dir()`` of a class in the trace: ``type.__dir__``'s names of the class and of every class
its bases reach, folded and guarded on the names each class written in Python has, so a class
that gains an attribute later traces again. Compared with eager."""

from __future__ import annotations

from collections import UserDict, UserString
from typing import Any

import pytest
import torch

import sapwood_tracer


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


class _Base:
    a = 1


class _Derived(_Base):
    def method(self) -> int:
        return 2


def test_dir_of_user_and_library_classes_is_folded():
    def fn(x, cls):
        return x + 1, dir(cls), set(dir(UserString)) >= set(dir(str))

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    for cls in (_Derived, UserDict, dict):
        assert compiled(torch.ones(1), cls)[1:] == fn(torch.ones(1), cls)[1:]


def test_dir_of_a_class_sees_an_attribute_added_to_a_base_later():
    class Base:
        pass

    class Derived(Base):
        pass

    def fn(x):
        return x + 1, dir(Derived)

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    assert compiled(torch.ones(1))[1] == dir(Derived)
    Base.added = 3  # type: ignore[attr-defined]
    assert "added" in compiled(torch.ones(1))[1]
    assert compiled(torch.ones(1))[1] == dir(Derived)


class _Meta(type):
    def __dir__(cls) -> list[str]:
        return ["custom"]


class _WithMeta(metaclass=_Meta):
    pass


def test_dir_of_a_class_whose_metaclass_defines_dir_breaks():
    def fn(x):
        return x + 1, dir(_WithMeta)

    with pytest.raises(sapwood_tracer.Unsupported):
        sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)(torch.ones(1))
    got = sapwood_tracer.compile(fn, backend=_eager)(torch.ones(1))
    assert got[1] == ["custom"]
