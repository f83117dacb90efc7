"""Builtin containers' methods and special methods, compiled whole (``fullgraph=True``) and
compared with eager; constructs that differ from Python stay graph breaks."""

from __future__ import annotations

import collections
from typing import Any

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import Unsupported
from sapwood_tracer.api import events


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _same_as_eager(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` compiled whole gives what eager gives (result or exception)."""
    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    try:
        expected = fn(*args)
    except Exception as exc:
        with pytest.raises(type(exc)) as info:
            compiled(*args)
        assert str(info.value) == str(exc)
        return info.value
    got = compiled(*args)
    assert _equal(got, expected)
    return got


def _equal(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _breaks(fn: Any, *args: Any) -> None:
    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    with pytest.raises(Unsupported):
        compiled(*args)


# ----------------------------------------------------------------- special methods
def test_list_special_methods_called_on_the_list():
    def fn(x):
        xs = [1, 2, 3]
        xs.__setitem__(0, 10)
        xs.__delitem__(1)
        ys = xs.__add__([4])
        ys.__iadd__((5, 6))
        return (
            x + 1,
            xs.__getitem__(0),
            xs.__contains__(3),
            xs.__len__(),
            list(xs.__iter__()),
            list(xs.__reversed__()),
            ys,
            xs.__mul__(2),
            xs.__rmul__(2),
            xs.__eq__([10, 3]),
            xs.__lt__([11]),
        )

    _same_as_eager(fn, torch.ones(2))


def test_unbound_special_methods_of_builtin_types():
    def fn(x):
        d = {"a": 1}
        dict.__setitem__(d, "b", 2)
        return (
            x * 2,
            list.__getitem__([1, 2], 1),
            dict.__contains__(d, "b"),
            dict.__getitem__(d, "a"),
            tuple.__len__((1, 2, 3)),
            tuple.__getitem__((1, 2, 3), slice(1, None)),
            d,
        )

    _same_as_eager(fn, torch.ones(2))


def test_a_special_method_on_a_foreign_operand_returns_not_implemented_or_breaks():
    def same_type(x):
        return x + 1, {}.__lt__({}), [1].__eq__([1]), (1,).__ne__((2,))

    _same_as_eager(same_type, torch.ones(1))

    def foreign(x):
        return x + 1, [1].__eq__((1,))

    _breaks(foreign, torch.ones(1))


def test_a_special_method_called_with_wrong_arguments_raises_pythons_type_error():
    def fn(x):
        out = []
        for call in (lambda: {}.__contains__(), lambda: [].__getitem__(), lambda: [].__len__(1)):
            try:
                call()
            except TypeError as exc:
                out.append(str(exc))
        return x + 1, out

    _same_as_eager(fn, torch.ones(1))


def test_special_methods_exist_for_hasattr_and_getattr():
    def fn(x):
        return (
            x + 1,
            hasattr([], "__len__"),
            hasattr({}, "__contains__"),
            hasattr((), "__getitem__"),
            hasattr([], "__missing_attribute__"),
        )

    _same_as_eager(fn, torch.ones(1))


def test_an_unmodelled_special_attribute_breaks_instead_of_missing():
    def fn(x):
        return x + 1, [].__sizeof__()

    _breaks(fn, torch.ones(1))


def test_an_unbound_method_on_the_wrong_type_breaks():
    def fn(x):
        return x + 1, list.count((1, 2, 1), 1)

    _breaks(fn, torch.ones(1))


def test_list_init_refills_the_list():
    def fn(x):
        xs = [1, 2, 3]
        xs.__init__()
        ys = [1]
        ys.__init__((4, 5))
        return x + 1, xs, ys

    _same_as_eager(fn, torch.ones(1))


def test_a_bound_special_method_passed_out_is_the_real_one():
    def fn(x):
        d = {"a": 1}
        return x + 1, d.__contains__, d

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    _, contains, d = compiled(torch.ones(1))
    d["b"] = 2
    assert contains("b") and not contains("c")


def test_ordered_dict_special_methods_that_differ_from_dicts_break():
    def fn(x):
        od = collections.OrderedDict(a=1)
        return x + 1, od.__eq__(collections.OrderedDict(a=1))

    _breaks(fn, torch.ones(1))


# ----------------------------------------------------------------- sets
def test_set_methods_returning_new_sets_iterate_in_pythons_order():
    def fn(x):
        s = {5, 1, 9, 33, 17}
        t = frozenset("abc")
        return (
            x + 1,
            list(s.union([2, 65], (129,))),
            list(s.intersection({1, 9, 100})),
            list(s.difference([1], {9})),
            list(s.symmetric_difference([9, 10])),
            sorted(t.union("cd")),
            type(t.union("d")).__name__,
            s.isdisjoint([2, 3]),
            s.issubset(range(40)),
            s.issuperset([1, 5]),
            t.copy() is t,
        )

    _same_as_eager(fn, torch.ones(1))


def test_set_in_place_methods_and_pop():
    def fn(x):
        s = set(range(10))
        s.intersection_update([1, 2, 3, 4, 5])
        s.difference_update({2})
        s.symmetric_difference_update([5, 6])
        s.update("ab")
        popped = s.pop()
        t = {1, 2}
        t.clear()
        u = {3}
        u.__init__([7, 8])
        return x + 1, sorted(map(str, s)), popped, t, list(u)

    _same_as_eager(fn, torch.ones(1))


def test_set_members_equal_but_of_different_types_keep_pythons_choice():
    def fn(x):
        a = {1, 2}
        b = {1.0, 3}
        b.add(True)
        return x + 1, [repr(v) for v in a & b], [repr(v) for v in a.union(b)]

    _same_as_eager(fn, torch.ones(1))


def test_set_methods_raise_pythons_errors():
    def fn(x):
        out = []
        for call in (
            lambda: set().pop(),
            lambda: {1}.union(5),
            lambda: {1}.isdisjoint(),
            lambda: {1}.difference([[]]),
            lambda: set().__init__(a=1),
            lambda: {1}.remove(2),
        ):
            try:
                call()
            except (TypeError, KeyError) as exc:
                out.append((type(exc).__name__, str(exc)))
        return x + 1, out

    _same_as_eager(fn, torch.ones(1))


def test_set_special_methods_and_comparisons():
    def fn(x):
        s = {1, 2}
        return (
            x + 1,
            s.__contains__(1),
            s.__contains__(frozenset()),
            {frozenset({1})}.__contains__({1}),
            s.__len__(),
            s.__or__({3}),
            s.__le__({1, 2, 3}),
            s < {1, 2, 3},
            s == frozenset([2, 1]),
            s >= {5},
        )

    _same_as_eager(fn, torch.ones(1))


def test_frozenset_has_no_mutating_methods():
    def fn(x):
        return x + 1, hasattr(frozenset(), "add"), hasattr(set(), "add")

    _same_as_eager(fn, torch.ones(1))


def test_set_pop_of_non_constant_members_breaks():
    class Thing:
        pass

    def fn(x, a, b):
        s = {a, b}
        return x + 1, s.pop()

    _breaks(fn, torch.ones(1), Thing(), Thing())


# ----------------------------------------------------------------- dict subclasses
class _Dict(dict):
    pass


class _DictWithMethod(dict):
    def extra(self) -> int:
        return 1


def test_a_dict_subclass_that_defines_nothing_is_constructed_in_the_trace():
    def fn(x):
        d = _Dict(a=1)
        d["b"] = 2
        e = _Dict([(1, 2)])
        return x + 1, d, type(d).__name__, type(d.copy()).__name__, e, isinstance(e, dict)

    got = _same_as_eager(fn, torch.ones(1))
    assert type(got[1]) is _Dict


def test_copy_and_or_of_dicts_keep_pythons_classes():
    def fn(x):
        od = collections.OrderedDict(a=1)
        d = _Dict(b=2)
        return (
            x + 1,
            type(od.copy()).__name__,
            type(od | {"c": 3}).__name__,
            type(d | {"c": 3}).__name__,
            type({} | d).__name__,
        )

    _same_as_eager(fn, torch.ones(1))


def test_a_dict_subclass_that_defines_methods_is_built_with_its_methods_inlined():
    def fn(x):
        d = _DictWithMethod(a=1)
        return x + 1, d.extra(), type(d).__name__, d

    _same_as_eager(fn, torch.ones(1))


def test_or_with_an_ordered_dict_on_the_right_breaks():
    def fn(x):
        return x + 1, {"a": 1} | collections.OrderedDict(b=2)

    _breaks(fn, torch.ones(1))


def test_a_set_input_with_builtin_function_members():
    import operator

    def fn(x, s):
        return x + 1, s.isdisjoint({0}), s & {operator.add, 5}, list(s), operator.add in s

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    for s in ({0, "zero", operator.add}, {operator.add}, {operator.sub, 1}):
        assert _equal(compiled(torch.ones(1), s), fn(torch.ones(1), s))


# ----------------------------------------------------------------- builtin functions
def test_functions_of_a_fresh_copy_of_the_operator_c_module():
    from test.support import import_helper

    fresh = import_helper.import_fresh_module("operator", fresh=["_operator"])

    def fn(x):
        xs = [1, 2]
        fresh.setitem(xs, 0, 5)
        return x + 1, fresh.add(2, 3), fresh.lt(1, 2), fresh.getitem(xs, 0), fresh.neg(4)

    _same_as_eager(fn, torch.ones(1))


def test_operator_functions_with_wrong_arguments_raise_pythons_type_error():
    import operator

    def fn(x):
        out = []
        for call in (lambda: operator.add(1), lambda: operator.neg(), lambda: operator.lt(a=1)):
            try:
                call()
            except TypeError as exc:
                out.append(str(exc))
        return x + 1, out

    _same_as_eager(fn, torch.ones(1))


# ----------------------------------------------------------------- dict methods
def test_dict_popitem_is_last_in_first_out():
    def fn(x):
        d = {"a": 1, "b": 2}
        d["c"] = 3
        first = d.popitem()
        out = []
        for call in (lambda: {}.popitem(), lambda: d.popitem(1)):
            try:
                call()
            except (KeyError, TypeError) as exc:
                out.append((type(exc).__name__, str(exc)))
        return x + 1, first, d, out

    _same_as_eager(fn, torch.ones(1))


def test_ordered_dict_popitem_and_move_to_end():
    def fn(x):
        od = collections.OrderedDict([("a", 1), ("b", 2), ("c", 3)])
        od.move_to_end("a")
        od.move_to_end("c", last=False)
        od.move_to_end("b", False)
        first = od.popitem(last=False)
        last = od.popitem()
        out = []
        for call in (lambda: od.move_to_end("zz"), lambda: collections.OrderedDict().popitem()):
            try:
                call()
            except KeyError as exc:
                out.append(str(exc))
        return x + 1, first, last, list(od.items()), out

    _same_as_eager(fn, torch.ones(1))


def test_a_dict_moved_to_end_while_iterated_breaks():
    def fn(x):
        od = collections.OrderedDict(a=1, b=2)
        for k in od:
            od.move_to_end(k)
        return x + 1

    _breaks(fn, torch.ones(1))


def test_a_dict_subclass_input_mutated_is_written_back():
    def fn(x, d):
        d["z"] = 26
        del d["a"]
        return x + 1

    d = _Dict(a=1, b=2)
    expected = _Dict(a=1, b=2)
    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    compiled(torch.ones(1), d)
    fn(torch.ones(1), expected)
    assert list(d.items()) == list(expected.items()) and type(d) is _Dict


def test_operator_sequence_functions():
    import operator

    def fn(x):
        a = [4, 3, 2, 1]
        operator.delitem(a, 1)
        it = iter("leave")
        found = operator.indexOf(it, "a")
        out = []
        for call in (lambda: operator.indexOf([1], 5), lambda: operator.concat(1, 2)):
            try:
                call()
            except (ValueError, TypeError) as exc:
                out.append(str(exc))
        return (
            x + 1,
            a,
            found,
            next(it),
            operator.countOf([1, 2, 1, {}], 1),
            operator.countOf([{}, 1, {}], {}),
            operator.concat([1], [2]),
            operator.concat("py", "thon"),
            operator.inv(4),
            out,
        )

    _same_as_eager(fn, torch.ones(1))


def test_pure_builtins_fold_on_constants():
    import struct
    import sys

    def fn(x):
        return (
            x + 1,
            sys.intern("abc"),
            struct.unpack("<i", struct.pack("<i", 7)),
            struct.calcsize("<q"),
            float.fromhex("0x1.8p1"),
            int.from_bytes(b"\x01\x00", "little"),
            bool.from_bytes(b"\x00", "big"),
            bool.__new__(bool, 1),
            int.__new__(int, "12"),
            "upper" in dir("s"),
            "append" in dir(list),
            bool(dict),
            bool(len),
        )

    _same_as_eager(fn, torch.ones(1))


def test_new_of_a_builtin_class_for_a_subclass_breaks():
    class MyInt(int):
        pass

    def fn(x):
        return x + 1, int.__new__(MyInt, 3)

    _breaks(fn, torch.ones(1))


def test_an_interpreter_setting_read_is_guarded():
    import sys

    def fn(x):
        return x + sys.get_int_max_str_digits()

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    before = sys.get_int_max_str_digits()
    try:
        assert compiled(torch.zeros(1)).item() == before
        sys.set_int_max_str_digits(before + 1000)
        assert compiled(torch.zeros(1)).item() == before + 1000
    finally:
        sys.set_int_max_str_digits(before)


# ----------------------------------------------------------------- iterators
def test_iter_of_a_callable_and_a_sentinel():
    def fn(x):
        state = [0]

        def counter():
            state[0] += 1
            return state[0]

        def stops():
            state[0] += 1
            if state[0] > 8:
                raise StopIteration
            return state[0]

        it = iter(counter, 4)
        first = list(it)
        after = list(it)  # exhausted: the callable is not called again
        more = list(iter(stops, 100))
        try:
            iter(5, 1)
        except TypeError as exc:
            error = str(exc)
        return x + 1, first, after, more, state[0], error, type(it).__name__

    _same_as_eager(fn, torch.ones(1))


class _Squares:
    """The old sequence protocol: ``__getitem__`` and no ``__iter__``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __getitem__(self, i: int) -> int:
        if i >= self.n:
            raise IndexError(i)
        return i * i


class _StopsWithStopIteration:
    def __getitem__(self, i: int) -> int:
        if i == 2:
            raise StopIteration
        return i


class _RaisesOther:
    def __getitem__(self, i: int) -> int:
        raise ValueError(i)


def test_iterating_an_object_with_getitem_and_no_iter():
    def fn(x):
        it = iter(_Squares(4))
        first = next(it)
        rest = list(it)
        try:
            list(_RaisesOther())
        except ValueError as exc:
            error = exc.args
        return (
            x + 1,
            first,
            rest,
            list(it),
            list(_StopsWithStopIteration()),
            max(_Squares(3)),
            tuple(_Squares(2)),
            error,
            type(it).__name__,
        )

    _same_as_eager(fn, torch.ones(1))


class _AlwaysEq:
    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False


class _NeverEq:
    def __eq__(self, other: object) -> bool:
        return False


class _Plain:
    pass


class _Base:
    def __eq__(self, other: object) -> bool:
        return False


class _Derived(_Base):
    def __eq__(self, other: object) -> bool:
        return True


def test_membership_and_count_use_the_objects_own_eq():
    def fn(x):
        always, never, plain = _AlwaysEq(), _NeverEq(), _Plain()
        a = [0, 1, 2] * 3
        return (
            x + 1,
            a.count(always),
            [always, always].count(1),
            [always, always].count(never),
            [never, never].count(always),
            (never, never).count(never),
            [plain, 1].index(1),
            always in (1, 2),
            [1] == always,  # noqa: SIM300 (the list's __eq__ first)
            (1,) == always,  # noqa: SIM300
            [1] == (1,),
            _Base() == _Derived(),
            plain in [1, 2],
        )

    _same_as_eager(fn, torch.ones(1))


def test_list_remove_and_index_with_an_eq_object():
    def fn(x):
        a = [5, 6, 7]
        a.remove(_AlwaysEq())
        return x + 1, a, [3, 4].index(_AlwaysEq())

    _same_as_eager(fn, torch.ones(1))


def _break_here() -> None:
    sapwood_tracer.graph_break()


def test_a_graph_break_inside_loops_over_the_new_iterators():
    def fn(x):
        state = [0]

        def counter():
            state[0] += 1
            return state[0]

        seen = []
        for v in iter(counter, 4):
            _break_here()
            seen.append(v)
        squares = iter(_Squares(5))
        next(squares)
        for v in squares:
            _break_here()
            seen.append(v)
        return x + 1, seen, state

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    skipped: list[Any] = []
    stop = events.listen(lambda kind, data: skipped.append(data) if kind == "skip" else None)
    try:
        assert _equal(compiled(torch.ones(1)), fn(torch.ones(1)))
        assert _equal(compiled(torch.ones(1)), fn(torch.ones(1)))
    finally:
        stop()
    assert not skipped  # the loops go on compiled after each break, nothing runs eagerly


def test_unpacking_an_iterator_pulls_only_what_python_pulls():
    def fn(x):
        calls = [0]

        def counter():
            calls[0] += 1
            return calls[0]

        a, b = iter(_Squares(2))
        try:
            _c, _d = iter(counter, 100)
        except ValueError as exc:
            error = str(exc)
        try:
            _e, _f, _g = len
        except TypeError as exc:
            not_iterable = str(exc)
        return x + 1, a, b, error, calls[0], not_iterable

    _same_as_eager(fn, torch.ones(1))


class _Countdown:
    def __init__(self, n: int) -> None:
        self.n = n
        self.iter_calls = 0

    def __iter__(self) -> _Countdown:
        self.iter_calls += 1
        return self

    def __next__(self) -> int:
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        return self.n


def test_a_graph_break_inside_a_loop_over_a_user_iterator():
    def fn(x):
        it = _Countdown(3)
        seen = []
        for i, v in enumerate(it):
            _break_here()
            seen.append((i, v))
        return x + 1, seen, it.iter_calls, it.n

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    skipped: list[Any] = []
    stop = events.listen(lambda kind, data: skipped.append(data) if kind == "skip" else None)
    try:
        assert _equal(compiled(torch.ones(1)), fn(torch.ones(1)))
        assert _equal(compiled(torch.ones(1)), fn(torch.ones(1)))
    finally:
        stop()
    assert not skipped


def _dict_ior_pairs(x, d):
    c = {0: 0}
    c |= [(1, 1), (2, 2)]
    d |= [("k", 5)]
    o = collections.OrderedDict(a=1)
    o |= [("b", 2)]
    return x + 1, c, o


def test_dict_in_place_or_takes_what_update_takes():
    import sapwood_tracer

    d1, d2 = {"z": 0}, {"z": 0}
    x = torch.ones(1)
    got = sapwood_tracer.compile(_dict_ior_pairs, backend=lambda gm, ex: gm.forward)(x, d1)
    want = _dict_ior_pairs(x, d2)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:] and d1 == d2
    assert list(got[2].items()) == list(want[2].items())
    report = sapwood_tracer.explain(_dict_ior_pairs)(x, {"z": 0})
    assert not report.breaks, str(report)
