"""Objects whose class defines ``__getattribute__`` in Python: the hook is inlined, so the
guards read what it read (instance dict entries, class attributes) and never call it.

Each test compares with eager after every change the guards must notice; the hook is never
run by the compiled function's guard check (checked by the generated entry's source and by
a hook that counts its calls).
"""

from __future__ import annotations

import re

import pytest
import torch

import sapwood_tracer

X = torch.randn(3)


class Config:
    """An alias map in ``__getattribute__``, as ``transformers.PreTrainedConfig`` has."""

    attribute_map = {"width": "hidden_size"}

    def __init__(self) -> None:
        self.hidden_size = 4
        self.scale = 2.0

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    @property
    def doubled(self):
        return self.width * 2


def _reads(x, cfg):
    return x * cfg.scale + cfg.hidden_size + cfg.width + cfg.doubled


def _probes(x, cfg):
    if hasattr(cfg, "missing"):
        x = x + 1
    return x + getattr(cfg, "extra", 3) + getattr(cfg, "scale", 0)


def _only_entry():
    from sapwood_tracer.api import cache as _cache

    (cache,) = [c for c in _cache._caches.values() if c.entries]
    return cache.entries[-1]


def test_reads_aliases_and_properties_equal_eager(backend, same):
    cfg = Config()
    compiled = sapwood_tracer.compile(_reads, backend=backend)
    same(compiled(X, cfg), _reads(X, cfg))
    assert len(backend.graphs) == 1


def test_missing_attributes_via_hasattr_and_getattr_default(backend, same):
    cfg = Config()
    compiled = sapwood_tracer.compile(_probes, backend=backend)
    same(compiled(X, cfg), _probes(X, cfg))
    cfg.missing = True
    same(compiled(X, cfg), _probes(X, cfg))
    cfg.extra = 10
    same(compiled(X, cfg), _probes(X, cfg))
    assert len(backend.graphs) == 3


def test_instance_attribute_change_recompiles(backend, same):
    cfg = Config()
    compiled = sapwood_tracer.compile(_reads, backend=backend)
    same(compiled(X, cfg), _reads(X, cfg))
    cfg.hidden_size = 7
    same(compiled(X, cfg), _reads(X, cfg))
    cfg.scale = 0.5
    same(compiled(X, cfg), _reads(X, cfg))


def test_alias_map_change_recompiles(backend, same):
    class Mapped(Config):
        attribute_map = {"width": "hidden_size"}

    cfg = Mapped()
    compiled = sapwood_tracer.compile(_reads, backend=backend)
    same(compiled(X, cfg), _reads(X, cfg))
    Mapped.attribute_map = {"width": "scale"}
    same(compiled(X, cfg), _reads(X, cfg))
    Mapped.attribute_map["width"] = "hidden_size"
    same(compiled(X, cfg), _reads(X, cfg))


def test_class_change_recompiles(backend, same):
    class Plain(Config):
        pass

    cfg = Plain()
    compiled = sapwood_tracer.compile(_reads, backend=backend)
    same(compiled(X, cfg), _reads(X, cfg))
    Plain.scale = property(lambda self: 100.0)  # a data descriptor wins over the instance
    same(compiled(X, cfg), _reads(X, cfg))
    del Plain.scale
    probes = sapwood_tracer.compile(_probes, backend=backend)
    same(probes(X, cfg), _probes(X, cfg))
    Plain.missing = 1  # found on the class now
    same(probes(X, cfg), _probes(X, cfg))
    other = Config()
    same(compiled(X, other), _reads(X, other))


def test_class_attribute_read_through_the_hook(backend, same):
    class WithDefault(Config):
        bias = 5

    cfg = WithDefault()
    compiled = sapwood_tracer.compile(lambda x, c: x + c.bias, backend=backend)
    same(compiled(X, cfg), X + cfg.bias)
    cfg.bias = 6  # the instance shadows the class now
    same(compiled(X, cfg), X + cfg.bias)
    WithDefault.bias = 7
    del cfg.bias
    same(compiled(X, cfg), X + cfg.bias)


def _attribute_reads(entry_fn):
    """The attribute names the generated entry reads with ``getattr``/``hasattr``."""
    names = re.findall(r"\b(?:getattr|hasattr)\(\w+, (k\d+)\)", entry_fn.__sapwood_source__)
    return {entry_fn.__globals__[name] for name in names}


def test_the_instance_dict_through_the_hook(backend, same):
    def fn(x, c):
        names = sorted(c.__dict__)
        c.__dict__["scale"] = 5.0
        return x * c.scale + len(names) + c.__dict__["hidden_size"]

    cfg, eager_cfg = Config(), Config()
    compiled = sapwood_tracer.compile(fn, backend=backend)
    same(compiled(X, cfg), fn(X, eager_cfg))
    assert vars(cfg) == vars(eager_cfg)
    same(compiled(X, cfg), fn(X, eager_cfg))


def test_guards_do_not_run_the_hook(backend):
    cfg = Config()
    compiled = sapwood_tracer.compile(_reads, backend=backend)
    compiled(X, cfg)
    compiled(X, cfg)
    assert _attribute_reads(_only_entry().fn) <= {"fget"}  # (the property's getter)


class Counted:
    """A hook with a side effect: every lookup counts."""

    calls = [0]

    def __init__(self) -> None:
        self.scale = 3.0

    def __getattribute__(self, key):
        Counted.calls[0] += 1
        return object.__getattribute__(self, key)


def _counted_read(x, c):
    return x * c.scale + (1 if hasattr(c, "nothing") else 0)


def test_hook_with_side_effect_runs_as_often_as_in_eager(backend, same):
    cfg = Counted()
    Counted.calls[0] = 0
    expected = _counted_read(X, cfg)
    per_call = Counted.calls[0]
    compiled = sapwood_tracer.compile(_counted_read, backend=backend)
    same(compiled(X, cfg), expected)
    for _ in range(3):
        Counted.calls[0] = 0
        same(compiled(X, cfg), expected)
        assert Counted.calls[0] == per_call
    report = sapwood_tracer.explain(_counted_read)(X, cfg)
    assert any("changes state" in b.reason for b in report.breaks)


def _counted_probe(x, c):
    return x + (1 if hasattr(c, "nothing") else 0)


def test_hook_with_side_effect_on_a_missing_attribute(backend, same):
    cfg = Counted()
    Counted.calls[0] = 0
    expected = _counted_probe(X, cfg)
    per_call = Counted.calls[0]
    compiled = sapwood_tracer.compile(_counted_probe, backend=backend)
    same(compiled(X, cfg), expected)
    graphs = len(backend.graphs)
    for _ in range(3):
        Counted.calls[0] = 0
        same(compiled(X, cfg), expected)
        assert Counted.calls[0] == per_call
    assert len(backend.graphs) == graphs  # (no recompile per call on the count)


class Raising:
    """A hook that raises something other than AttributeError for one name."""

    def __init__(self) -> None:
        self.scale = 2.0

    def __getattribute__(self, key):
        if key == "forbidden":
            raise KeyError(key)
        return object.__getattribute__(self, key)


def test_hook_raising_other_errors_raises_them(backend, same):
    cfg = Raising()

    def fn(x, c):
        try:
            return x * c.forbidden
        except KeyError:
            return x * c.scale

    same(sapwood_tracer.compile(fn, backend=backend)(X, cfg), fn(X, cfg))


def test_hook_then_getattr_on_attribute_error(backend, same):
    class Fallback(Config):
        def __getattr__(self, key):
            return 11

    cfg = Fallback()
    compiled = sapwood_tracer.compile(lambda x, c: x + c.anything + c.width, backend=backend)
    same(compiled(X, cfg), X + cfg.anything + cfg.width)


def test_object_getattribute_is_the_generic_lookup(backend, same):
    class Dynamic:
        def __init__(self) -> None:
            self.scale = 2.0

        def __getattr__(self, key):
            return 100.0

    def fn(x, c):
        try:
            object.__getattribute__(c, "absent")
        except AttributeError:
            x = x + 1  # (no __getattr__ in the generic lookup)
        return x * object.__getattribute__(c, "scale") + c.absent

    obj = Dynamic()
    same(sapwood_tracer.compile(fn, backend=backend)(X, obj), fn(X, obj))

    def aliased(x, c):
        try:
            object.__getattribute__(c, "width")  # (the alias is the hook's, not the object's)
        except AttributeError:
            return x + c.width
        return x

    cfg = Config()
    same(sapwood_tracer.compile(aliased, backend=backend)(X, cfg), aliased(X, cfg))
    assert len(backend.graphs) == 2  # (one each: no graph break)


def test_transformers_config_read_through_its_instance_dict(backend, same):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=8, num_attention_heads=2, num_hidden_layers=1)

    def fn(x, c):
        out = x * c.hidden_size + c.num_attention_heads
        if getattr(c, "vision_feature_layer", None) is not None:
            out = out + 1
        return out + (1 if c.use_cache else 0)

    compiled = sapwood_tracer.compile(fn, backend=backend)
    same(compiled(X, cfg), fn(X, cfg))
    text = _only_entry().fn.__sapwood_source__
    assert "getattr(" not in text and "hasattr(" not in text
    cfg.use_cache = not cfg.use_cache
    same(compiled(X, cfg), fn(X, cfg))
    cfg.vision_feature_layer = -1
    same(compiled(X, cfg), fn(X, cfg))


def test_transformers_config_guards_read_the_instance_dict():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=8, num_attention_heads=2, num_hidden_layers=1)
    report = sapwood_tracer.explain(lambda x, c: x * c.hidden_size)(X, cfg)
    guards = [g for _, listed in report.guards for g in listed]
    assert not any("hasattr" in g and "L['c']" in g for g in guards)
    assert any("object.__getattribute__(L['c'], '__dict__')['hidden_size']" in g for g in guards)
