"""Sets passed in and changed by the compiled code end exactly as they would eagerly: the same
members and the same iteration order (which depends on the set's history), through graph
breaks too; what would observe the order of such a set inside the trace is a graph break."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import sapwood_tracer


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


keys = st.one_of(st.integers(-40, 40), st.sampled_from(["a", "b", "spam", "", "zz"]))
key_lists = st.lists(keys, max_size=12)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), keys),
        st.tuples(st.just("discard"), keys),
        st.tuples(st.just("remove_present"), keys),
        st.tuples(st.sampled_from(["update", "difference_update"]), key_lists),
        st.tuples(
            st.sampled_from(["intersection_update", "symmetric_difference_update"]), key_lists
        ),
        st.tuples(st.sampled_from(["ior", "iand", "isub", "ixor"]), key_lists),
        st.tuples(st.just("update_set"), key_lists),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("break"), st.none()),
    ),
    max_size=10,
)


def _run(s: set, ops: list[tuple[str, Any]], x: torch.Tensor) -> Any:
    sizes = []
    for name, arg in ops:
        if name == "add":
            s.add(arg)
        elif name == "discard":
            s.discard(arg)
        elif name == "remove_present":
            if arg in s:
                s.remove(arg)
        elif name == "ior":
            s |= set(arg)
        elif name == "iand":
            s &= set(arg)
        elif name == "isub":
            s -= set(arg)
        elif name == "ixor":
            s ^= set(arg)
        elif name == "update_set":
            s.update(set(arg))
        elif name == "clear":
            s.clear()
        elif name == "break":
            sapwood_tracer.graph_break()
        else:
            getattr(s, name)(arg)
        sizes.append(len(s))
        x = x + len(s)
    return x, sizes, 3 in s


def _program(ops: list[tuple[str, Any]]) -> Any:
    # one function per operation list (the ops are unrolled at trace time from a constant)
    def fn(s, x):
        return _run(s, ops, x)

    return fn


@settings(max_examples=25, deadline=None)
@given(key_lists, operations)
def test_a_set_passed_in_ends_as_eagerly_in_members_and_order(start, ops):
    sapwood_tracer.reset()  # (every program shares one code object: no recompile limit)
    fn = _program(ops)
    x = torch.zeros(1)
    eager_set, compiled_set = set(start), set(start)
    want = fn(eager_set, x)
    got = _compiled(fn)(compiled_set, x)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    assert compiled_set == eager_set
    assert list(compiled_set) == list(eager_set)
    # compiled, not run eagerly: the set's changes were replayed
    sapwood_tracer.reset()
    report = sapwood_tracer.explain(fn)(set(start), x)
    assert not report.eager_functions, str(report)
    assert not any("a set" in b.reason for b in report.breaks), str(report)


def _grow_then_read(s, x):
    s.add(1000)
    s |= {1, 2, 3}
    s.discard(2)
    return x + len(s), 1000 in s, s >= {1, 3}


def test_changing_a_set_passed_in_stays_in_one_graph():
    s, t = {5, 6}, {5, 6}
    x = torch.ones(2)
    report = sapwood_tracer.explain(_grow_then_read)(s, x)
    assert not report.breaks and not report.eager_functions, str(report)
    got = _compiled(_grow_then_read)(t, x)
    want = _grow_then_read({5, 6}, x)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    assert list(t) == list(s) == list({5, 6} | {1000, 1, 3})


def _iterate_after_change(s):
    s.add(3)
    return [k for k in s]


def test_iterating_a_changed_set_passed_in_is_a_graph_break_with_its_reason():
    report = sapwood_tracer.explain(_iterate_after_change)({1, 2})
    assert any("iteration order of a set from the inputs" in b.reason for b in report.breaks)
    s = {1, 2}
    assert _compiled(_iterate_after_change)(s) == _iterate_after_change({1, 2})
    assert s == {1, 2, 3}


def _alias(a, b):
    a.add(9)
    return 9 in b, len(b)


def test_one_set_passed_twice_is_one_value():
    s = {1}
    assert _compiled(_alias)(s, s) == (True, 2)
    assert s == {1, 9}
    t, u = {1}, {1}
    assert _compiled(_alias)(t, u) == (False, 1)
    assert t == {1, 9} and u == {1}


def _missing(s):
    try:
        s.remove("absent")
    except KeyError as exc:
        return exc.args
    return None


def test_removing_a_missing_member_raises_keyerror_and_changes_nothing():
    s = {"a"}
    assert _compiled(_missing)(s) == ("absent",)
    assert s == {"a"}
    report = sapwood_tracer.explain(_missing)({"a"})
    assert not report.breaks, str(report)


def _pop(s):
    return s.pop()


def test_pop_of_a_set_passed_in_runs_eagerly_with_its_reason():
    s, t = {4, 5, 6}, {4, 5, 6}
    assert _compiled(_pop)(s) == _pop(t) and s == t
    report = sapwood_tracer.explain(_pop)({4, 5, 6})
    assert any("set.pop() of a set that was passed in" in b.reason for b in report.breaks)


@sapwood_tracer.disable
def _eager_check(value: Any, allowed: list[Any]) -> None:
    assert value in allowed


def _loop_with_break(s, x):
    seen = []
    for v in s:
        _eager_check(v, list(s))  # a graph break inside the loop over the set
        seen.append(v)
        x = x + 1
    return x, seen, type(iter(s)).__name__


@pytest.mark.parametrize("members", [[], [1], ["a", "b", "c", 1, 2], list(range(40))])
def test_a_loop_over_a_set_passed_in_goes_on_after_a_break_in_its_body(members):
    x = torch.zeros(1)
    s = set(members)
    got = _compiled(_loop_with_break)(s, x)
    want = _loop_with_break(set(members), x)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    report = sapwood_tracer.explain(_loop_with_break)(set(members), x)
    assert not report.eager_functions, str(report)


def _grow_while_looping(s):
    out = []
    for v in s:
        _eager_check(v, list(s))
        out.append(v)
        if len(out) == 2:
            s.add(99)
    return out


def test_a_set_changed_while_a_loop_with_a_break_runs_over_it_fails_as_eagerly():
    with pytest.raises(RuntimeError, match="changed size") as eager:
        _grow_while_looping({1, 2, 3})
    s = {1, 2, 3}
    with pytest.raises(RuntimeError, match="changed size") as compiled:
        _compiled(_grow_while_looping)(s)
    assert str(compiled.value) == str(eager.value) and s == {1, 2, 3, 99}


def _length_hints(s):
    it = iter(s)
    before = it.__length_hint__()
    next(it)
    after = it.__length_hint__()
    for _ in it:
        pass
    return before, after, it.__length_hint__()


def test_a_set_iterator_hints_its_length_as_pythons():
    assert _compiled(_length_hints)({4, 5, 6}) == _length_hints({4, 5, 6}) == (3, 2, 0)
    report = sapwood_tracer.explain(_length_hints)({4, 5, 6})
    assert not report.breaks, str(report)


def _set_with_history(x, start, removed, added):
    s = set(start)
    for k in removed:
        s.discard(k)
    s |= set(added)
    return x + 1, s


@given(key_lists, key_lists, key_lists)
@settings(max_examples=30, deadline=None)
def test_a_set_made_in_the_trace_comes_back_in_its_eager_order(start, removed, added):
    sapwood_tracer.reset()
    x = torch.zeros(1)
    got = _compiled(_set_with_history)(x, start, removed, added)
    want = _set_with_history(x, start, removed, added)
    assert got[1] == want[1] and list(got[1]) == list(want[1])
