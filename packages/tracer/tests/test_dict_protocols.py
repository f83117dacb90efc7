"""Dicts as Python's protocols use them, compiled whole (``fullgraph=True``) and compared with
eager: ``dict(mapping)`` and ``update`` of mappings and of pairs (with Python's errors), item
deletion on user mappings, ``popitem`` of a dict that was passed in (written back to the real
dict), the special methods called by name (``d.__or__(x)``) and ``reversed()`` of views."""

from __future__ import annotations

import collections
import copy
import sys
from typing import Any

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import Unsupported


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _same_as_eager(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` compiled whole gives what eager gives; inputs end alike (deep copies are
    given to each run)."""
    eager_args = copy.deepcopy(args)
    expected = fn(*eager_args)
    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    got = compiled(*args)
    _equal(got, expected)
    _equal(args, eager_args)
    return got


def _equal(a: Any, b: Any) -> None:
    assert type(a) is type(b), (a, b)
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            _equal(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b), (a, b)
        for k in a:
            _equal(a[k], b[k])
    else:
        assert a == b, (a, b)


def _breaks(fn: Any, *args: Any) -> None:
    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    with pytest.raises(Unsupported):
        compiled(*args)


def _caught(call: Any) -> tuple[str, str]:
    try:
        call()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return "no error", ""


# ----------------------------------------------------------------- dict(mapping), update
def test_dict_of_a_mapping_reads_its_keys_and_items():
    def fn(x):
        chain = collections.ChainMap({"a": 1, "b": 2}, {"b": 20, "c": 30})
        d = {"z": 0}
        d.update(chain)
        e = {}
        e |= collections.UserDict(q=1)
        return x + 1, dict(chain), dict(chain.items()), dict(collections.UserDict(a=1)), d, e

    _same_as_eager(fn, torch.ones(1))


def test_dict_of_iterators_of_pairs():
    def fn(x):
        return (
            x + 1,
            dict(zip("ab", [1, 2])),
            dict((k, 1) for k in "ab"),
            dict(enumerate("ab")),
            dict(map(lambda k: (k, 2), "ab")),
            dict((("a", 1), "bc")),
        )

    _same_as_eager(fn, torch.ones(1))


def test_dict_update_with_bad_elements_raises_pythons_errors():
    def fn(x):
        d = {"a": 0}
        out = [
            _caught(lambda: dict([(1,)])),
            _caught(lambda: dict([("k", 1), 1])),
            _caught(lambda: d.update([("b", 1), (1, 2, 3)])),
        ]
        return x + 1, out, d  # (the pairs before the bad one are in)

    _same_as_eager(fn, torch.ones(1))


def test_item_deletion_on_a_user_mapping_calls_its_delitem():
    class Log:
        def __init__(self):
            self.deleted = []

        def __delitem__(self, key):
            self.deleted.append(key)

    def fn(x):
        chain = collections.ChainMap()
        chain["a"] = 1
        child = chain.new_child()
        child["a"] = 2
        child["b"] = 3
        del child["a"]
        log = Log()
        del log[3]
        return x + 1, child.maps, dict(child), log.deleted, _caught(lambda: child.__delitem__("a"))

    _same_as_eager(fn, torch.ones(1))


# ----------------------------------------------------------------- special methods by name
def test_dict_merge_special_methods_with_operands_that_are_no_dicts():
    def fn(x):
        a = {0: 0, 1: 1, 2: 1}
        out = [a.__or__(None), a.__or__(()), a.__or__("BAD"), a.__ror__(""), a.__or__({5: 5})]
        out.append(a.__ror__({5: 5}))
        out.append(_caught(lambda: a.__ior__(None)))
        out.append(_caught(lambda: a.__ior__(5)))
        out.append(_caught(lambda: a.__ior__("BAD")))
        out.append(a.__ior__(()) is a)
        out.append(a.__ior__(""))
        out.append(a.__ior__([(7, 7)]))
        out.append(a.__ior__(collections.ChainMap({8: 8})))
        return x + 1, out, a

    _same_as_eager(fn, torch.ones(1))


def test_dict_ior_by_name_on_an_input_is_written_back():
    def fn(x, a):
        return x + 1, a.__ior__([(1, 2)]), a.__or__(None)

    _same_as_eager(fn, torch.ones(1), {0: 1})


# ----------------------------------------------------------------- popitem of an input dict
def _pop_twice(x, d):
    return x + 1, d.popitem(), d.popitem()


def test_popitem_of_an_input_dict_is_last_in_first_out_and_written_back():
    compiled = sapwood_tracer.compile(_pop_twice, backend=_eager, fullgraph=True)
    for make in (lambda: {"a": 1, "b": 2, "c": 3}, lambda: {"c": 3, "a": 1, "b": 2}):
        got_input, want_input = make(), make()
        got, want = compiled(torch.ones(1), got_input), _pop_twice(torch.ones(1), want_input)
        assert got[1:] == want[1:] and list(got_input.items()) == list(want_input.items())
    assert sapwood_tracer.explain(_pop_twice)(torch.ones(1), {"a": 1, "b": 2}).breaks == []


def test_popitem_of_an_input_dict_leaves_pythons_table():
    # a shared-key instance dict is combined by popitem, at its table's size
    class Point:
        pass

    def instance_dict():
        p = Point()
        p.x, p.y, p.z = 1, 2, 3
        return p.__dict__

    def fn(x, d):
        item = d.popitem()
        d["x"] = 10  # a value replaced in place
        return x + 1, item

    got_input, want_input = instance_dict(), instance_dict()
    got = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)(torch.ones(1), got_input)
    assert got[1:] == fn(torch.ones(1), want_input)[1:]
    assert list(got_input.items()) == list(want_input.items())
    assert sys.getsizeof(got_input) == sys.getsizeof(want_input)


def test_popitem_of_an_input_dict_among_other_changes():
    def fn(x, d):
        d.pop("a")
        first = d.popitem()
        d["new"] = 5
        second = d.popitem()
        d.setdefault("z", 0)
        return x + 1, first, second, _caught(lambda: {}.popitem())

    _same_as_eager(fn, torch.ones(1), {"a": 1, "b": 2, "c": 3, "d": 4})


def test_popitem_of_an_empty_input_dict_raises_key_error():
    def fn(x, d):
        return x + 1, _caught(d.popitem)

    _same_as_eager(fn, torch.ones(1), {})


def test_popitem_of_an_input_dict_across_a_graph_break():
    def fn(x, d):
        first = d.popitem()
        print("a graph break")
        return x + 1, first, d.popitem()

    eager_input, compiled_input = {"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 2, "c": 3}
    want = fn(torch.ones(1), eager_input)
    got = sapwood_tracer.compile(fn, backend=_eager)(torch.ones(1), compiled_input)
    assert got[1:] == want[1:] and list(compiled_input.items()) == list(eager_input.items())


# ----------------------------------------------------------------- reversed() of dicts and views
def test_reversed_dicts_and_views():
    def fn(x):
        d = {"a": 1, "b": 2, "c": 3}
        return (
            x + 1,
            list(reversed(d)),
            list(reversed(d.keys())),
            list(reversed(d.values())),
            list(reversed(d.items())),
            list(reversed({}.items())),
            [type(reversed(v)).__name__ for v in (d, d.keys(), d.values(), d.items())],
        )

    _same_as_eager(fn, torch.ones(1))


def test_a_reversed_dict_iterator_fails_once_the_dict_changed_size():
    def fn(x):
        d = {"a": 1, "b": 2}
        r = reversed(d.values())
        out = [next(r)]
        d["z"] = 1
        out.append(_caught(lambda: next(r)))
        del d["z"]  # (the size is back: Python's iterator still fails)
        out.append(_caught(lambda: next(r)))
        empty = {}
        it = reversed(empty.items())
        out.append(_caught(lambda: next(it)))
        empty[1] = 2  # (an exhausted iterator stays so)
        out.append(_caught(lambda: next(it)))
        return x + 1, out

    _same_as_eager(fn, torch.ones(1))


def test_a_reversed_view_of_an_input_dict():
    def fn(x, d):
        return x + 1, list(reversed(d.items())), [k for k in reversed(d)]

    _same_as_eager(fn, torch.ones(1), {"a": 1, "b": 2, "c": 3})


def test_a_live_reversed_dict_iterator_across_a_graph_break():
    def fn(x, d):
        r = reversed(d.items())
        first = next(r)
        seen = []
        for k in reversed(d):
            seen.append(k)
            print("a graph break inside the loop")
        return x + 1, first, list(r), seen

    eager_input, compiled_input = {"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 2, "c": 3}
    want = fn(torch.ones(1), eager_input)
    compiled = sapwood_tracer.compile(fn, backend=_eager)
    got = compiled(torch.ones(1), compiled_input)
    assert got[1:] == want[1:]
    report = sapwood_tracer.explain(fn)(torch.ones(1), {"a": 1, "b": 2, "c": 3})
    # the live iterator is carried into each resume function (as a forward one is); the
    # loop's next item is taken from the real one there
    assert report.graph_count >= 1
    assert all(
        b.reason.startswith(("print()", "the next item of a real dict_reversekeyiterator"))
        for b in report.breaks
    ), str(report)


def test_reversed_of_an_ordered_dicts_view_breaks():
    def fn(x, d):
        return x + 1, list(reversed(d.items()))

    _breaks(fn, torch.ones(1), collections.OrderedDict(a=1))


# ----------------------------------------------------------------- methods' names and arguments
def test_dict_methods_that_take_no_arguments_raise_pythons_type_error():
    def fn(x):
        d = {"a": 1}
        od = collections.OrderedDict(a=1)
        calls = [lambda: d.keys(None), lambda: d.items(1, 2), lambda: d.values(a=1)]
        calls += [lambda: d.copy(1), lambda: d.clear(1), lambda: od.keys(1)]
        return x + 1, [_caught(call) for call in calls], d

    _same_as_eager(fn, torch.ones(1))


def test_the_name_of_a_builtin_method():
    def fn(x):
        d, xs = {"a": 1}, [1]
        return x + 1, d.keys.__name__, xs.append.__name__, d.__contains__.__name__

    _same_as_eager(fn, torch.ones(1))


@pytest.mark.parametrize("case", ["popped_put_back", "popped_then_cleared", "insert_and_pop"])
def test_popitem_of_an_input_dict_with_keys_added_or_cleared(case):
    def fn(x, d, case):
        out = [d.popitem()]
        if case == "popped_put_back":
            d["k"] = 1
            out.append(d.popitem())
        elif case == "popped_then_cleared":
            d.clear()
        else:
            d["k"] = 1
            d["j"] = 2
            out += [d.popitem(), d.popitem(), d.popitem()]
        return x + 1, out

    _same_as_eager(
        fn, torch.ones(1), {"a": 1} if case != "insert_and_pop" else {"a": 1, "b": 2}, case
    )


def test_an_input_dict_emptied_by_popitem_then_cleared_frees_its_table():
    def fn(x, d):
        d.popitem()
        d.clear()
        return x + 1

    got_input, want_input = {"a": 1}, {"a": 1}
    sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)(torch.ones(1), got_input)
    fn(torch.ones(1), want_input)
    assert got_input == want_input and sys.getsizeof(got_input) == sys.getsizeof(want_input)


# ----------------------------------------------------------------- views passed in
def test_views_passed_in_read_their_dict():
    def fn(x, keys, values, items):
        return x + 1, sorted(keys), list(values), list(items), "a" in keys, keys & {"a", "q"}

    d = {"a": 1, "b": 2}
    views = (d.keys(), d.values(), d.items())
    want = fn(torch.ones(1), *views)
    got = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)(torch.ones(1), *views)
    _equal(got, want)


@pytest.mark.parametrize("view_first", [True, False])
def test_a_view_passed_in_sees_changes_to_its_dict(view_first):
    def fn(x, first, second):
        d, keys = (second, first) if view_first else (first, second)
        d["c"] = 3
        seen = list(keys)
        del d["a"]
        return x + 1, seen, list(keys), len(keys), keys

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    for _ in range(2):
        got_dict, want_dict = {"a": 1, "b": 2}, {"a": 1, "b": 2}
        got_args = (got_dict.keys(), got_dict) if view_first else (got_dict, got_dict.keys())
        want_args = (want_dict.keys(), want_dict) if view_first else (want_dict, want_dict.keys())
        got, want = compiled(torch.ones(1), *got_args), fn(torch.ones(1), *want_args)
        assert got[1:4] == want[1:4] and got_dict == want_dict
        assert got[4] is got_args[0 if view_first else 1]  # the very view passed in


def test_a_view_of_another_dict_than_its_argument_is_told_apart():
    def fn(x, d, keys):
        d["c"] = 3
        return x + 1, list(keys)

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    same = {"a": 1}
    assert compiled(torch.ones(1), same, same.keys())[1] == ["a", "c"]
    other, shown = {"a": 1}, {"b": 2}
    assert compiled(torch.ones(1), other, shown.keys())[1] == ["b"]


def test_a_view_of_an_ordered_dict_passed_in_breaks():
    # dict.keys(od) shows the dict's own order, not the OrderedDict's
    def fn(x, keys):
        return x + 1, list(keys)

    od = collections.OrderedDict(a=1, b=2)
    od.move_to_end("a")
    _breaks(fn, torch.ones(1), dict.keys(od))


def test_a_view_live_across_a_graph_break():
    def fn(x):
        d = {"a": 1, "b": 2}
        keys = d.keys()
        print("a graph break")
        d["c"] = 3
        return x + 1, sorted(keys), "c" in keys

    want = fn(torch.ones(1))
    got = sapwood_tracer.compile(fn, backend=_eager)(torch.ones(1))
    assert got[1:] == want[1:]
    report = sapwood_tracer.explain(fn)(torch.ones(1))
    # the print alone; the resume function (which gets the view) is traced
    assert len(report.breaks) == 1 and not report.eager_functions, str(report)


def test_a_live_ordered_dict_iterator_across_a_graph_break_keeps_its_order():
    def fn(x):
        od = collections.OrderedDict(a=1, b=2, c=3)
        od.move_to_end("a")
        it = iter(od.items())
        first = next(it)
        print("a graph break")
        return x + 1, first, list(it), type(it).__name__, type(iter({})).__name__

    want = fn(torch.ones(1))
    got = sapwood_tracer.compile(fn, backend=_eager)(torch.ones(1))
    assert got[1:] == want[1:]
