"""Guards skipped while the dict (or defaults tuple) they read is unchanged.

The fast check groups the guards on entries of one dict -- a module's instance dict, a
module's globals, a function's ``__defaults__`` -- and runs them only when the dict's version
tag (the tuple's identity) differs from the one they last passed with. Every test here calls
the compiled function at least twice before it changes something, so the tag was recorded
and the checks are being skipped, then changes the dict by each way Python offers and checks
that the call sees it (equal to eager). A hypothesis test does the same for random sequences
of changes.
"""

from __future__ import annotations

import sys
import types

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

import sapwood_tracer
from sapwood_tracer.guards import versions

X = torch.randn(2, 3)


def scale_of(x: torch.Tensor) -> float:
    return 2.0


def shifted(x: torch.Tensor, shift: float = 1.0, twice: bool = False) -> torch.Tensor:
    return x * 2 + shift if twice else x + shift


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(3)
        self.drop = torch.nn.Dropout(0.0)
        self.eps = 1e-5
        self.gain = 3
        self.mode = "sum"
        self.flag = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.drop(self.norm(x)) * self.gain + self.eps
        y = y * scale_of(x)
        y = shifted(y)
        if self.flag:
            y = y + 1
        return y.sum(-1) if self.mode == "sum" else y.mean(-1)


def _counting() -> tuple[list[object], object]:
    graphs: list[object] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        graphs.append(gm)
        return gm.forward

    return graphs, backend


def _warm(model: torch.nn.Module) -> object:
    sapwood_tracer.reset()
    _, backend = _counting()
    compiled = sapwood_tracer.compile(model, backend=backend)
    for _ in range(3):  # the tags are recorded by the first call that passes
        torch.testing.assert_close(compiled(X), model(X))
    return compiled


def _set_eps(m: Block) -> None:
    m.eps = 0.5


def _setattr(m: Block, name: str = "gain") -> None:
    setattr(m, name, 4)


def _object_setattr(m: Block) -> None:
    object.__setattr__(m, "mode", "mean")


def _dict_item(m: Block) -> None:
    m.__dict__["flag"] = False


def _dict_update(m: Block) -> None:
    m.__dict__.update(gain=5)


def _new_dict(m: Block) -> None:
    m.__dict__ = {**m.__dict__, "eps": 0.25}


def _delete_and_restore(m: Block) -> None:
    del m.flag
    m.flag = 0  # (an int now: the guard is type-exact)


def _instance_forward(m: Block) -> None:
    m.norm.forward = lambda x: x * 10


def _child_attribute(m: Block) -> None:
    m.norm.eps = 0.1


def _eval_mode(m: Block) -> None:
    m.drop.p = 0.5
    m.train()


CHANGES = [
    _set_eps,
    _setattr,
    _object_setattr,
    _dict_item,
    _dict_update,
    _new_dict,
    _delete_and_restore,
    _instance_forward,
    _child_attribute,
    _eval_mode,
]


@pytest.mark.parametrize("change", CHANGES, ids=[c.__name__.strip("_") for c in CHANGES])
def test_a_change_to_a_module_after_warm_calls_is_seen(change) -> None:
    model = Block().eval()
    compiled = _warm(model)
    change(model)
    torch.manual_seed(0)
    expected = model(X)
    torch.manual_seed(0)
    torch.testing.assert_close(compiled(X), expected)
    if not model.training:
        torch.testing.assert_close(compiled(X), expected)


def test_a_global_function_replaced_after_warm_calls_is_seen(monkeypatch) -> None:
    model = Block().eval()
    compiled = _warm(model)
    monkeypatch.setitem(globals(), "scale_of", lambda x: 5.0)
    torch.testing.assert_close(compiled(X), model(X))


def test_a_builtin_shadowed_by_a_global_after_warm_calls_is_seen() -> None:
    def total(x: torch.Tensor) -> torch.Tensor:
        return x * len(x.shape) + abs(-1)

    namespace = types.ModuleType("gated_globals")
    fn = types.FunctionType(total.__code__, namespace.__dict__, "total")
    namespace.__dict__["torch"] = torch
    sapwood_tracer.reset()
    _, backend = _counting()
    compiled = sapwood_tracer.compile(fn, backend=backend)
    for _ in range(3):
        torch.testing.assert_close(compiled(X), fn(X))
    namespace.__dict__["len"] = lambda s: 10
    torch.testing.assert_close(compiled(X), fn(X))
    name = "abs"
    setattr(namespace, name, lambda v: 100)  # (the module's own setattr)
    torch.testing.assert_close(compiled(X), fn(X))


def test_defaults_replaced_after_warm_calls_are_seen() -> None:
    model = Block().eval()
    compiled = _warm(model)
    saved = shifted.__defaults__
    try:
        shifted.__defaults__ = (1.0, True)  # equal first item, the second changed
        torch.testing.assert_close(compiled(X), model(X))
        shifted.__defaults__ = (1.0, True)  # a new tuple, equal: no recompile needed
        torch.testing.assert_close(compiled(X), model(X))
        shifted.__defaults__ = (7.0, False)
        torch.testing.assert_close(compiled(X), model(X))
    finally:
        shifted.__defaults__ = saved


def test_two_instances_of_one_class_share_the_trace_not_the_tags() -> None:
    a, b = Block().eval(), Block().eval()
    b.eps = 0.75
    sapwood_tracer.reset()
    _, backend = _counting()
    ca = sapwood_tracer.compile(a, backend=backend)
    cb = sapwood_tracer.compile(b, backend=backend)
    for _ in range(3):
        torch.testing.assert_close(ca(X), a(X))
        torch.testing.assert_close(cb(X), b(X))
    a.eps = 0.75
    torch.testing.assert_close(ca(X), a(X))
    b.eps = 1e-5
    torch.testing.assert_close(cb(X), b(X))


def test_the_probe_matches_the_interpreter() -> None:
    # inline values (3.13) keep an instance's attributes out of its dict's tag
    if versions.dict_version is None:
        pytest.skip("this torch has no dict_version")
    assert versions.instance_dicts_tagged == (sys.version_info < (3, 13))


ATTRIBUTES = {
    "eps": st.sampled_from([1e-5, 0.5, 0.0, -0.0, 2]),
    "gain": st.sampled_from([3, 4, 3.0, True]),
    "mode": st.sampled_from(["sum", "mean"]),
    "flag": st.sampled_from([True, False, 1, 0]),
}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(ATTRIBUTES)), st.data()),
        min_size=1,
        max_size=6,
    )
)
def test_random_changes_between_calls_always_match_eager(changes) -> None:
    model = Block().eval()
    compiled = _warm(model)
    for name, data in changes:
        value = data.draw(ATTRIBUTES[name])
        how = data.draw(st.sampled_from(["setattr", "dict", "object"]))
        if how == "setattr":
            setattr(model, name, value)
        elif how == "dict":
            model.__dict__[name] = value
        else:
            object.__setattr__(model, name, value)
        for _ in range(2):
            got, expected = compiled(X), model(X)
            assert type(got) is type(expected)
            torch.testing.assert_close(got, expected)


class Counting(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.scale = 1.5
        self.history: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count += 1
        return x * self.scale


COUNT = 0
LOG: list[int] = []


def bump() -> None:
    global COUNT
    COUNT += 1


def test_values_read_by_grouped_guards_are_those_before_the_replayed_writes() -> None:
    # The guards on ``count`` and ``scale`` are grouped; the value the program stored (the
    # count before its forward added one) must not be read again after the write is replayed
    def program(x: torch.Tensor, mod: Counting) -> tuple[torch.Tensor, int]:
        before = mod.count
        mod.history.append(min(before, 5))
        return mod(x), before

    sapwood_tracer.reset()
    _, backend = _counting()
    compiled = sapwood_tracer.compile(program, backend=backend)
    mine, theirs = Counting(), Counting()
    for _ in range(4):
        got, expected = compiled(X, mine), program(X, theirs)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]
    assert mine.history == theirs.history == [0, 1, 2, 3]
    assert mine.count == theirs.count == 4


def test_a_global_read_by_grouped_guards_is_the_one_before_the_replayed_write() -> None:
    def program(x: torch.Tensor) -> torch.Tensor:
        LOG.append(COUNT)
        bump()
        return x * COUNT

    global COUNT
    COUNT = 0
    LOG.clear()
    sapwood_tracer.reset()
    _, backend = _counting()
    compiled = sapwood_tracer.compile(program, backend=backend)
    for i in range(4):
        torch.testing.assert_close(compiled(X), X * (i + 1))
    assert LOG == [0, 1, 2, 3] and COUNT == 4


# -- reads that only a gated block needs run only with it ------------------------------------


class _CountingDict(dict):
    reads = 0

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        type(self).reads += 1
        return super().__getitem__(key)


def _gated_program(uses: list[tuple[bool, bool]]) -> list[str]:
    """A body in the fast path's shape: reads marked for gate ``t1``, the gate, a block that
    uses some of them, and a result that uses others."""
    from sapwood_tracer.guards.emitter import GATE, READ_FOR

    lines = [f"    v{i} = D[{i}]{READ_FOR}t1" for i in range(len(uses))]
    lines.append(f"    if OPEN:{GATE}t1")
    lines.append("        seen = []")
    lines += [f"        seen.append(v{i})" for i, (inside, _) in enumerate(uses) if inside]
    lines.append("        SEEN.extend(seen)")
    after = [f"v{i}" for i, (_, later) in enumerate(uses) if later]
    lines.append(f"    return ({''.join(a + ', ' for a in after)})")
    return lines


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=8), st.booleans())
def test_reads_only_a_gated_block_uses_move_into_it_and_nothing_changes(uses, open_gate):
    from sapwood_tracer.guards.emitter import sink_gated_reads

    lines = _gated_program(uses)
    results = []
    for body in (
        [line.split("  #")[0] for line in lines],  # as before: every read before the gate
        sink_gated_reads(lines),
    ):
        _CountingDict.reads = 0
        seen: list[int] = []
        scope = {"D": _CountingDict(enumerate(range(100, 100 + len(uses)))), "OPEN": open_gate}
        scope["SEEN"] = seen
        exec("def f():\n" + "\n".join(body) + "\n", scope)
        results.append((scope["f"](), seen, _CountingDict.reads))
    (before, seen_before, reads_before), (after, seen_after, reads_after) = results
    assert after == before and seen_after == seen_before
    # a read the result uses still runs on every call; one only the block uses, only with it
    needed = sum(1 for _, later in uses if later or open_gate)
    assert reads_after == needed <= reads_before == len(uses)


@pytest.mark.skipif(not versions.instance_dicts_tagged, reason="instance dicts are not gated here")
def test_a_module_attribute_only_its_guards_read_is_read_only_when_its_dict_changed():
    norm = torch.nn.LayerNorm(3)
    compiled = sapwood_tracer.compile(norm, backend=lambda gm, ex: gm.forward)
    compiled(X)
    compiled(X)
    (entry,) = [e for c in _caches() for e in c.entries]
    lines = [line.strip() for line in entry.fn.__sapwood_source__.splitlines()]
    gate = next(i for i, line in enumerate(lines) if line.startswith("if t") and " != " in line)
    # eps and elementwise_affine are read inside the block only: right before the gate are
    # the dict and its tag, right after it the reads
    assert lines[gate - 2].endswith(".__dict__") and lines[gate - 1].startswith("t")
    assert "[k" in lines[gate + 1] and "[k" in lines[gate + 2]
    norm.eps = 0.5
    torch.testing.assert_close(compiled(X), norm(X))


def _caches():  # type: ignore[no-untyped-def]
    from sapwood_tracer.api import cache

    return [c for c in cache._caches.values() if c.entries]
