"""A dict subclass from the inputs mutated by the compiled function: a ``Counter`` or a
class written in Python that the model follows (its ``update``, ``__iadd__``, ``__delitem__``
inlined) is mutated in the graph and its final entries written back with dict's own
``clear`` and ``update`` (so ``Counter.update``, which adds, is not run again). An
``OrderedDict`` keeps its order outside dict's storage: it is written back with its own
``clear`` and ``update``. Classes that the model cannot follow stay a graph break. Each program runs compiled on one input and eagerly on an equal one; results and
the inputs afterwards must be the same."""

from __future__ import annotations

import copy
from collections import Counter, OrderedDict
from typing import Any

import pytest

import sapwood_tracer


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=lambda gm, example_inputs: gm.forward)


def _same_mutation(fn: Any, make: Any) -> None:
    compiled = _compiled(fn)
    for _ in range(2):  # the second call runs the cached trace
        mine, theirs = make(), make()
        got, expected = compiled(mine), fn(theirs)
        assert repr(got) == repr(expected)
        assert type(mine) is type(theirs) and repr(mine) == repr(theirs)
        assert list(mine.items()) == list(theirs.items())


def _whole(fn: Any, arg: Any) -> bool:
    report = sapwood_tracer.explain(fn)(arg)
    return not report.breaks and not report.eager_functions


def test_counter_methods_and_operators_mutate_an_input_counter():
    def fn(c):
        c.update("witch")
        c.subtract({"h": 1})
        c["q"] = 5
        c += Counter("bcc")
        del c["absent"]  # Counter's __delitem__ ignores a missing key
        return c["c"], len(c)

    _same_mutation(fn, lambda: Counter("which"))
    assert _whole(fn, Counter("which"))


def test_counter_in_place_operators_keep_the_input_object():
    def fn(c, d):
        c |= d
        c &= Counter("abbbz")
        c -= Counter("b")
        return c

    compiled = _compiled(fn)
    mine, theirs = Counter("aabc"), Counter("aabc")
    got = compiled(mine, Counter("zz"))
    assert got is mine and repr(mine) == repr(fn(theirs, Counter("zz")))


class Registry(dict):
    """A Python subclass whose update counts its calls and stores upper-case keys."""

    def update(self, pairs):
        for key, value in pairs:
            self[key.upper()] = value
        self.updates = getattr(self, "updates", 0) + 1


def test_a_python_subclass_with_its_own_update_is_written_back_by_dicts_update():
    def fn(r):
        r.update([("a", 1), ("b", 2)])
        r.pop("x")
        return sorted(r)

    def make():
        r = Registry(x=0)
        r.updates = 0
        return r

    _same_mutation(fn, make)


def test_an_input_ordered_dict_is_mutated_in_the_graph_and_keeps_its_order():
    def fn(d):
        d["z"] = 1
        d.move_to_end("a")
        d.popitem(last=False)
        return list(d)

    _same_mutation(fn, lambda: OrderedDict(a=1, b=2))
    assert _whole(fn, OrderedDict(a=1, b=2))


def test_an_ordered_dict_subclass_is_not_mutated_in_the_graph():
    class Ordered(OrderedDict):
        pass

    def fn(d):
        d["z"] = 1
        return list(d)

    _same_mutation(fn, lambda: Ordered(a=1, b=2))
    assert not _whole(fn, Ordered(a=1, b=2))


class LowerKeys(dict):
    """Overrides __setitem__, which the model applies without looking at the class."""

    def __setitem__(self, key, value):
        super().__setitem__(key.lower(), value)


@pytest.mark.parametrize("make", [lambda: LowerKeys(a=1)], ids=["own __setitem__"])
def test_an_input_subclass_the_model_cannot_follow_breaks_the_graph(make):
    def fn(d):
        d["B"] = 2
        return sorted(d)

    _same_mutation(fn, make)
    assert not _whole(fn, make())


def test_a_graph_break_after_mutating_an_input_counter_writes_it_back_first():
    def fn(c):
        c.update("xyz")
        seen = copy.copy(c)  # (copy: called eagerly at a graph break or inlined)
        c["x"] += 10
        return seen, c

    _same_mutation(fn, lambda: Counter("xx"))


class _Attributed(dict):
    pass


def _attributed() -> _Attributed:
    d = _Attributed(a=1)
    d.attr = 4
    return d


def test_an_attribute_assigned_to_a_dict_subclass_input_is_seen_and_written_back():
    def fn(d):
        before = d.attr
        d.attr = before + 10
        d["b"] = d.attr
        return before, d.attr

    _same_mutation(fn, _attributed)
    assert _whole(fn, _attributed())
    mine = _attributed()
    _compiled(fn)(mine)
    assert mine.attr == 14


def test_a_dict_subclass_with_its_own_setattr_stays_a_break():
    class Guarded(dict):
        def __setattr__(self, name, value):
            raise AttributeError(name)

    def fn(d):
        d.attr = 1
        return len(d)

    with pytest.raises(AttributeError):
        _compiled(fn)(Guarded())
