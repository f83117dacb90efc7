"""Dict subclasses written in Python (``collections.Counter``, user classes) built inside the
compiled function: their ``__init__`` and methods inlined, ``__missing__`` on a missing key,
their ``__delitem__`` for ``del``, ``Counter``'s counting loop; classes the model cannot follow
exactly are a graph break. Each program is compiled and compared with eager (result, type,
and that nothing ran eagerly where the construct is modelled)."""

from __future__ import annotations

import collections
import operator
from collections import Counter, OrderedDict
from typing import Any

import pytest
import torch

import sapwood_tracer


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _same(fn: Any, *args: Any, whole: bool = True) -> Any:
    expected = fn(*args)
    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=whole)
    got = compiled(*args)
    assert repr(got) == repr(expected)
    assert type(got) is type(expected)
    return got


def test_counter_built_from_a_string_counts_its_letters():
    def fn():
        c = Counter("abcaba")
        return c, len(c), list(c.items()), c["b"], c.get("z", 10), c.total()

    got = _same(fn)
    assert type(got[0]) is Counter


def test_counter_built_from_keywords_and_a_mapping():
    def fn():
        return Counter(a=3, b=2, c=0), Counter({"a": 1, "b": 2}), Counter(self=42, iterable=None)

    _same(fn)


def test_counter_missing_key_reads_zero_without_storing_it():
    def fn():
        c = Counter("ab")
        return c["z"], "z" in c, c

    _same(fn)


def test_counter_augmented_assignment_on_missing_and_present_keys():
    def fn():
        c = Counter("abca")
        c["a"] += 1
        c["b"] -= 2
        c["d"] -= 2
        c["f"] += 4
        return c

    _same(fn)


def test_del_of_a_missing_key_uses_counters_delitem():
    def fn():
        c = Counter("abc")
        del c["c"]
        del c["c"]  # Counter.__delitem__ ignores a missing key
        operator.delitem(c, "zz")
        return c

    _same(fn)


def test_counter_update_subtract_and_init_again():
    def fn():
        c = Counter()
        c.update(dict(a=5, b=3))
        c.update(c=1)
        c.update(Counter("a" * 5 + "b" * 3))
        c.subtract("aab")
        c.__init__("cdc")
        return c

    _same(fn)


def test_counter_of_tensor_counts_is_rebuilt_as_a_counter():
    def fn(x):
        c = Counter(a=x, b=x + 1)
        c.update({"a": x})
        return c

    got = _same(fn, torch.tensor(2.0))
    assert type(got) is Counter


def test_counter_arithmetic_of_counters_built_in_the_trace():
    def fn():
        p, q = Counter(a=3, b=-2, c=0), Counter(a=1, d=4)
        return p + q, p - q, p | q, p & q, +p, -p, p == q, Counter("ab") == Counter("ba")

    _same(fn)


def test_count_elements_into_a_dict_and_an_ordered_dict():
    count = collections._count_elements  # type: ignore[attr-defined]

    def fn():
        d: dict[str, int] = {}
        count(d, "abracadabra")
        m: OrderedDict[str, int] = OrderedDict()
        count(m, list("abracadabra"))
        return d, m

    _same(fn)


class _Registry(dict):
    def __init__(self, *names: str) -> None:
        super().__init__()
        for n in names:
            self[n] = len(self)

    def __missing__(self, key: str) -> str:
        return f"<{key}>"

    def names(self) -> list[str]:
        return sorted(self)


def test_user_dict_subclass_with_init_missing_and_methods():
    def fn():
        r = _Registry("b", "a")
        return r, r["a"], r["zz"], r.names(), isinstance(r, dict)

    got = _same(fn)
    assert type(got[0]) is _Registry


class _LoudDelete(dict):
    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        super().__setitem__("deleted", key)


def test_user_dict_subclass_delitem_is_inlined():
    def fn():
        d = _LoudDelete(a=1, b=2)
        del d["a"]
        return d

    _same(fn)


class _OwnContains(dict):
    def __contains__(self, key: object) -> bool:
        return True

    def __bool__(self) -> bool:
        return False


def test_an_input_whose_class_overrides_in_and_truth_is_not_taken_as_a_dict():
    def fn(d):
        return "zz" in d, bool(d)

    expected = fn(_OwnContains(a=1))
    assert sapwood_tracer.compile(fn, backend=_eager)(_OwnContains(a=1)) == expected


class _OwnGetitem(dict):
    def __getitem__(self, key: str) -> int:
        return 7


class _WithAttributes(Counter):
    def __init__(self, *args: Any) -> None:
        self.called = False
        super().__init__(*args)


@pytest.mark.parametrize("cls", [_OwnGetitem, _WithAttributes])
def test_subclasses_the_model_cannot_follow_break_the_graph(cls: type):
    def fn():
        d = cls()
        d["a"] = 1
        return d["a"], getattr(d, "called", None)

    with pytest.raises(sapwood_tracer.Unsupported):
        _same(fn)
    _same(fn, whole=False)


def test_counter_constructed_with_too_many_arguments_raises_type_error():
    def fn():
        try:
            Counter((), ())
        except TypeError as exc:
            return str(exc)
        return None

    _same(fn, whole=False)  # a bad call's TypeError is a graph break


_REPRS: list[str] = []


class _LoggedRepr(dict):
    def __repr__(self) -> str:
        _REPRS.append("repr")
        return "logged"


def test_repr_of_a_subclass_with_its_own_repr_runs_on_every_call():
    def fn():
        return repr(_LoggedRepr(a=1))

    with pytest.raises(sapwood_tracer.Unsupported):
        sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)()
    compiled = sapwood_tracer.compile(fn, backend=_eager)
    _REPRS.clear()
    assert [compiled(), compiled()] == ["logged", "logged"]
    assert _REPRS == ["repr", "repr"]


class _Shifted(dict):
    """A ``__setitem__`` of its own: ``d[k] = v`` runs it, dict's own methods never do."""

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value + 1)


def test_a_setitem_of_the_class_runs_for_stores_and_not_for_dicts_own_methods():
    def fn(x: torch.Tensor) -> tuple:
        d = _Shifted(x=5 * x)  # dict's __init__: no __setitem__
        d["y"] = 10
        d.update(z=1)  # dict's update: no __setitem__
        d.setdefault("w", 2)
        return d, type(d).__name__

    got = _same(fn, torch.randn(3))
    assert got[0]["y"] == 11 and got[0]["z"] == 1 and got[0]["w"] == 2


def test_an_input_of_a_class_with_its_own_setitem_is_not_mutated_by_the_trace():
    def fn(x: torch.Tensor, d: dict) -> torch.Tensor:
        d["z"] = 3
        return x + 1

    strict = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    with pytest.raises(sapwood_tracer.Unsupported, match="mutating a _Shifted"):
        strict(torch.ones(1), _Shifted(a=1))
    lenient = sapwood_tracer.compile(fn, backend=_eager)
    ours, theirs = _Shifted(a=1), _Shifted(a=1)
    torch.testing.assert_close(lenient(torch.ones(1), ours), fn(torch.ones(1), theirs))
    assert ours == theirs == {"a": 1, "z": 4}
