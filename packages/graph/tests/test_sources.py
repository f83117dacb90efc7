"""Sources: value semantics, Python-like rendering, and resolution against a frame."""

from __future__ import annotations

import types

import pytest

from sapwood_graph import (
    AttrSource,
    ClosureCellSource,
    DefaultArgSource,
    FunctionSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    SyntheticSource,
    TensorPropertySource,
    TypeSource,
)


def test_equal_descriptions_are_equal_and_hash_alike():
    a = ItemSource(AttrSource(LocalSource("self"), "layers"), 0)
    b = ItemSource(AttrSource(LocalSource("self"), "layers"), 0)
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1


def test_different_descriptions_are_different():
    assert LocalSource("x") != GlobalSource("x")
    assert ItemSource(LocalSource("x"), 0) != ItemSource(LocalSource("x"), "0")
    assert AttrSource(LocalSource("a"), "b") != AttrSource(LocalSource("a"), "c")


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (LocalSource("x"), "L['x']"),
        (GlobalSource("cfg"), "G['cfg']"),
        (FunctionSource(), "F"),
        (
            AttrSource(ItemSource(AttrSource(LocalSource("self"), "layers"), 0), "weight"),
            "L['self'].layers[0].weight",
        ),
        (ItemSource(GlobalSource("d"), "key"), "G['d']['key']"),
        (TypeSource(LocalSource("x")), "type(L['x'])"),
        (ClosureCellSource(FunctionSource(), "scale"), "F.__closure__['scale']"),
        (DefaultArgSource(FunctionSource(), 1), "F.__defaults__[1]"),
        (DefaultArgSource(FunctionSource(), "eps"), "F.__kwdefaults__['eps']"),
        (TensorPropertySource(LocalSource("x"), "size", 0), "L['x'].size()[0]"),
        (TensorPropertySource(LocalSource("x"), "stride", 1), "L['x'].stride()[1]"),
        (TensorPropertySource(LocalSource("x"), "storage_offset"), "L['x'].storage_offset()"),
        (SyntheticSource("tmp"), "<tmp>"),
    ],
)
def test_renders_as_a_python_like_expression(source, text):
    assert str(source) == text
    assert source.name == text


def test_root_and_base_follow_the_chain():
    leaf = AttrSource(ItemSource(LocalSource("xs"), 2), "grad")
    assert leaf.base == ItemSource(LocalSource("xs"), 2)
    assert leaf.root == LocalSource("xs")
    assert LocalSource("xs").base is None


def test_resolves_locals_globals_attributes_and_items():
    obj = types.SimpleNamespace(layers=[types.SimpleNamespace(weight=42)])
    f_locals = {"self": obj}
    f_globals = {"cfg": {"depth": 3}}
    assert (
        AttrSource(ItemSource(AttrSource(LocalSource("self"), "layers"), 0), "weight").resolve(
            f_locals, f_globals
        )
        == 42
    )
    assert ItemSource(GlobalSource("cfg"), "depth").resolve(f_locals, f_globals) == 3
    assert TypeSource(LocalSource("self")).resolve(f_locals, f_globals) is types.SimpleNamespace


def test_resolves_closure_cells_and_defaults_of_the_traced_function():
    scale = 5

    def fn(x, y=7, *, eps=0.5):
        return x * scale

    assert ClosureCellSource(FunctionSource(), "scale").resolve({}, {}, fn) == 5
    assert DefaultArgSource(FunctionSource(), 0).resolve({}, {}, fn) == 7
    assert DefaultArgSource(FunctionSource(), "eps").resolve({}, {}, fn) == 0.5


def test_resolves_tensor_properties():
    import torch

    t = torch.empty(3, 4)[:, 1:]
    assert TensorPropertySource(LocalSource("t"), "size", 1).resolve({"t": t}, {}) == 3
    assert TensorPropertySource(LocalSource("t"), "stride", 0).resolve({"t": t}, {}) == 4
    assert TensorPropertySource(LocalSource("t"), "storage_offset").resolve({"t": t}, {}) == 1


def test_resolution_fails_like_the_python_expression_would():
    with pytest.raises(KeyError):
        LocalSource("missing").resolve({}, {})
    with pytest.raises(AttributeError):
        AttrSource(LocalSource("x"), "nope").resolve({"x": 1}, {})
    with pytest.raises(LookupError):
        SyntheticSource("made_up").resolve({}, {})
    with pytest.raises(LookupError):
        FunctionSource().resolve({}, {})


def test_storage_offset_takes_no_index_and_size_needs_one():
    with pytest.raises(ValueError):
        TensorPropertySource(LocalSource("x"), "size")
    with pytest.raises(ValueError):
        TensorPropertySource(LocalSource("x"), "storage_offset", 0)


def test_sources_are_immutable():
    source = LocalSource("x")
    with pytest.raises(AttributeError):
        source.local_name = "y"  # type: ignore[misc]
