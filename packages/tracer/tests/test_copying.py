"""``copy.deepcopy`` and ``copy.copy`` of plain objects inside compiled code, against eager.

Plain objects (user classes with a ``__dict__`` and no copying or pickling hooks of their
own), lists, dicts and tuples are copied in the trace: one graph, values equal to eager's,
and the same sharing — what the original shares (or a cycle) the copy shares, what comes
back atomic or unchanged is the very object. Anything else stays a graph break.
"""

from __future__ import annotations

import copy

import torch

import sapwood_tracer


class Config:
    def __init__(self, scale, layers, extra=None):
        self.scale = scale
        self.layers = layers
        self.extra = extra


class Empty:
    pass


class Derived(Config):
    pass


def _breaks(fn, *args):
    sapwood_tracer.reset()
    report = sapwood_tracer.explain(fn)(*args)
    sapwood_tracer.reset()
    return report.breaks


def test_deepcopy_of_an_object_made_in_the_trace(check):
    def fn(x):
        cfg = Config(2.0, [1, [2, 3]], {"k": (4, [5])})
        twin = copy.deepcopy(cfg)
        twin.layers[1].append(9)
        twin.extra["k"][1].append(6)
        return x * twin.scale, cfg, twin, type(twin) is Config, twin is not cfg

    check(fn, (torch.randn(3),))
    assert not _breaks(fn, torch.randn(3))


def test_deepcopy_keeps_sharing_and_cycles(check):
    def fn(x):
        shared = [1]
        cfg = Config(1.5, [shared, shared], {"again": shared, "t": (1, "s")})
        cfg.me = cfg
        twin = copy.deepcopy(cfg)
        return (
            x + twin.scale,
            twin.me is twin,
            twin.layers[0] is twin.layers[1] is twin.extra["again"],
            twin.layers[0] is shared,
            twin.extra["t"] is cfg.extra["t"],  # a tuple of atoms comes back itself
            twin.layers,
        )

    check(fn, (torch.randn(2),))
    assert not _breaks(fn, torch.randn(2))


def test_deepcopy_of_an_input_object_leaves_it_alone(check):
    def fn(x, cfg):
        twin = copy.deepcopy(cfg)
        twin.layers.append(len(twin.layers))
        twin.scale = 3.0
        return x * cfg.scale, twin, twin.layers is cfg.layers, cfg.layers

    check(
        fn,
        (torch.randn(2), Config(2.0, [1, 2])),
        (torch.randn(2), Config(2.0, [1, 2])),
        graphs=1,  # another object of the same shape: the same graph
    )
    assert not _breaks(fn, torch.randn(2), Config(2.0, [1, 2]))


def test_deepcopy_of_inputs_follows_their_aliasing():
    def fn(x, a, b):
        pair = copy.deepcopy([a, b])
        return x + 1, pair[0] is pair[1], pair[0].layers is pair[1].layers

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    one, other = Config(1.0, [1]), Config(1.0, [1])
    shared = Config(1.0, [1])
    for args in ((one, other), (shared, shared), (one, other)):
        got, expected = compiled(torch.ones(2), *args), fn(torch.ones(2), *args)
        assert got[1:] == expected[1:]
    assert not _breaks(fn, torch.ones(2), one, other)


def test_deepcopy_of_an_input_object_whose_attributes_alias(check):
    def fn(x, cfg):
        twin = copy.deepcopy(cfg)
        return x + 1, twin.layers is twin.extra, twin.layers

    items = [1, 2]
    check(fn, (torch.randn(2), Config(1.0, items, items)))
    assert not _breaks(fn, torch.randn(2), Config(1.0, items, items))


def test_deepcopy_of_an_empty_and_a_derived_object(check):
    def fn(x, e):
        made = Derived(1.0, [2])
        return x + 1, copy.deepcopy(e), copy.deepcopy(Empty()), copy.deepcopy(made)

    check(fn, (torch.randn(2), Empty()))
    assert not _breaks(fn, torch.randn(2), Empty())


def test_deepcopy_records_slot_names_on_the_class_as_eager():
    class Fresh:
        def __init__(self):
            self.v = [1]

    def fn(x):
        return x + 1, copy.deepcopy(Fresh()).v

    sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)(torch.ones(1))
    assert Fresh.__dict__.get("__slotnames__") == []


def test_copy_copy_is_shallow(check):
    def fn(x, cfg):
        made = copy.copy(Config(2.0, [1]))
        twin = copy.copy(cfg)
        twin.scale = 5.0
        return x + cfg.scale, twin, twin.layers is cfg.layers, twin is cfg, made

    check(fn, (torch.randn(2), Config(2.0, [1, 2])))
    assert not _breaks(fn, torch.randn(2), Config(2.0, [1]))


class OwnDeepcopy(Config):
    def __deepcopy__(self, memo):
        return "mine"


class Slotted:
    __slots__ = ("v",)

    def __init__(self):
        self.v = [1]


def test_a_class_with_its_own_deepcopy_is_copied_by_it(check):
    def fn(x, a):
        return x + 1, copy.deepcopy(a)

    check(fn, (torch.ones(2), OwnDeepcopy(1, 2)))


def test_objects_with_slots_break_the_graph_and_match_eager():
    def fn(x):
        return x + 1, copy.deepcopy(Slotted()).v

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    assert compiled(torch.ones(2))[1:] == fn(torch.ones(2))[1:] == ([1],)
    assert any("__reduce_ex__" in b.reason for b in _breaks(fn, torch.ones(2)))


def test_a_class_that_gains_a_deepcopy_hook_is_copied_by_it():
    class Growing:
        def __init__(self):
            self.v = [1]

    def fn(x, a):
        return x + 1, copy.deepcopy(a)

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    assert compiled(torch.ones(1), Growing())[1].v == [1]
    Growing.__deepcopy__ = lambda self, memo: "hooked"
    assert compiled(torch.ones(1), Growing())[1] == fn(torch.ones(1), Growing())[1] == "hooked"


def test_deepcopy_of_a_tensor_or_with_a_memo_breaks_and_matches_eager():
    def fn(x, t):
        memo = {}
        return x + 1, copy.deepcopy(t), copy.deepcopy([1], memo), len(memo)

    t = torch.randn(2)
    got = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)(torch.ones(2), t)
    expected = fn(torch.ones(2), t)
    torch.testing.assert_close(got[1], expected[1])
    assert got[1] is not t and got[2:] == expected[2:]


def test_deepcopy_of_an_input_tuple_holding_a_list_matches_eager():
    def fn(x, cfg):
        twin = copy.deepcopy(cfg)
        twin.layers[1].append(3)
        return x + 1, twin.layers, cfg.layers, twin.layers is cfg.layers

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    got = compiled(torch.ones(2), Config(1.0, (1, [2])))
    expected = fn(torch.ones(2), Config(1.0, (1, [2])))
    assert got[1:] == expected[1:]
