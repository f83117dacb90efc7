"""Enum classes and members in traced code behave as eagerly: iterating over the class,
``len``, ``in``, ``reversed``, ``dir``, ``cls[name]`` and ``cls(value)`` give the real
members (computed by EnumType's own methods on constants, with no graph break), errors are
the same, and code of the user's (getters, methods, ``_missing_``) runs on every call, not
once at trace time."""

from __future__ import annotations

import enum
import sys
from contextlib import nullcontext
from typing import Any

import pytest
import torch

import sapwood_tracer


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


def _breaks(fn: Any, *args: Any) -> list[str]:
    report = sapwood_tracer.explain(fn)(*args)
    return [b.reason for b in report.breaks] + [r for _, r in report.eager_functions]


calls: list[str] = []


class Base(enum.Enum):
    @enum.property
    def first(self) -> str:
        calls.append(self.name)
        return f"{self.name} is first!"


class Color(Base):
    first = 1
    second = 2
    third = 3
    dupe = 3

    def shout(self) -> str:
        calls.append("shout")
        return self.name.upper()

    @property
    def lower(self) -> str:
        calls.append("lower")
        return self.name.lower()


class Perm(enum.Flag):
    R = 4
    W = 2
    X = 1


class Missing(enum.Enum):
    a = 1

    @classmethod
    def _missing_(cls, value: Any) -> Any:
        calls.append("missing")
        return cls.a


def _same_everywhere(fn: Any, *args: Any) -> Any:
    """``fn`` compiled gives eager's result (members identical) on two calls, and the user
    code it runs (recorded in ``calls``) runs on each."""
    calls.clear()
    expected = fn(*args)
    eager_calls = list(calls)
    compiled = _compiled(fn)
    for _ in range(2):
        calls.clear()
        got = compiled(*args)
        assert calls == eager_calls
        assert type(got) is type(expected)
        for g, e in zip(got, expected):
            assert g is e or (isinstance(e, torch.Tensor) and torch.equal(g, e)) or g == e
    return expected


def test_iterating_over_an_enum_class_gives_its_members_without_aliases():
    def fn(x):
        return list(Color), [m for m in Perm], tuple(reversed(Color)), x + 1

    _same_everywhere(fn, torch.ones(1))
    assert _breaks(fn, torch.ones(1)) == []


def test_len_in_and_truth_of_an_enum_class():
    def fn(x):
        return len(Color), len(Perm), Color.dupe in Color, Perm.R in Color, bool(Color), x + 1

    _same_everywhere(fn, torch.ones(1))
    assert _breaks(fn, torch.ones(1)) == []


def test_lookup_by_name_and_by_value_gives_the_member():
    def fn(x):
        return Color["dupe"], Color(2), Color(Color.first), Perm(6), Perm(0), x + 1

    _same_everywhere(fn, torch.ones(1))
    assert _breaks(fn, torch.ones(1)) == []


def test_a_bad_value_or_name_raises_as_eagerly():
    def by_value(x):
        try:
            Color(7)
        except ValueError as error:
            return str(error), x + 1

    def by_name(x):
        try:
            Color["purple"]
        except KeyError as error:
            return error.args, x + 1

    _same_everywhere(by_value, torch.ones(1))
    _same_everywhere(by_name, torch.ones(1))


def test_a_missing_hook_of_the_users_runs_on_every_call():
    def fn(x):
        return Missing(5), x + 1

    _same_everywhere(fn, torch.ones(1))


def test_an_enum_property_seen_from_the_class_is_the_member():
    def fn(x):
        return Color.first, Color.second, x + 1

    _same_everywhere(fn, torch.ones(1))
    assert _breaks(fn, torch.ones(1)) == []


def test_getters_and_methods_of_the_users_run_on_every_call():
    def fn(x):
        member = Color.second
        return [m.first for m in Color], member.shout(), member.lower, member.name, x + 1

    _same_everywhere(fn, torch.ones(1))
    assert _breaks(fn, torch.ones(1)) == []


def test_str_and_format_of_a_member_run_the_users_dunders_on_every_call():
    class Loud(enum.Enum):
        a = 1

        def __str__(self) -> str:
            calls.append("str")
            return self.name.title()

        def __format__(self, spec: str) -> str:
            calls.append("format")
            return "".join(reversed(self.name + "bc"))

    def fn(x):
        return str(Loud.a), format(Loud.a), f"{Loud.a}", x + 1

    _same_everywhere(fn, torch.ones(1))


def test_dir_of_an_enum_class_and_member():
    class Mixed(int, enum.Enum):
        one = 1

    def fn(x):
        return dir(Color), dir(Mixed), sorted(dir(Color.first)), x + 1

    _same_everywhere(fn, torch.ones(1))
    assert _breaks(fn, torch.ones(1)) == []


def test_str_join_takes_the_items_of_an_iterator():
    def fn(x, s):
        it = iter(s)
        next(it)
        return "".join(reversed(s)), "-".join(it), ",".join([s, s]), x + 1

    _same_everywhere(fn, torch.ones(1), "abc")
    assert _breaks(fn, torch.ones(1), "abc") == []


def test_adding_a_member_recompiles():
    class Growing(enum.Enum):
        a = 1

    def fn(x):
        return len(Growing), list(Growing), x + 1

    compiled = _compiled(fn)
    assert compiled(torch.ones(1))[0] == 1
    member = object.__new__(Growing)
    member._name_, member._value_ = "b", 2
    Growing._member_map_["b"] = member
    Growing._member_names_.append("b")
    got = compiled(torch.ones(1))
    assert got[0] == 2 and got[1] == [Growing.a, member]


@pytest.mark.parametrize("value", [torch.ones(1), 1.5])
def test_a_value_that_is_not_a_constant_or_not_a_member_is_handled(value):
    class Floats(float, enum.Enum):
        half = 1.5

    def fn(x, v):
        try:
            return Floats(v) if not isinstance(v, torch.Tensor) else None, x + 1
        except ValueError as error:
            return str(error), x + 1

    _same_everywhere(fn, torch.ones(1), value)


def test_a_class_method_of_a_builtin_base_is_a_new_bound_method_on_each_read():
    def fn(x):
        init = Color.__init_subclass__
        return init is not object.__init_subclass__, init is Color.__init_subclass__, x + 1

    _same_everywhere(fn, torch.ones(1))


class Shouting(enum.IntEnum):
    low = 1
    high = 2

    def __str__(self) -> str:
        calls.append("str")
        return self.name.upper()

    def __repr__(self) -> str:
        calls.append("repr")
        return f"<{self.name}>"

    def describe(self) -> str:
        return "described"


def test_conversions_and_formatting_of_a_member_run_the_users_code_on_every_call():
    def fn(x):
        member = Shouting.high
        return (
            f"{member!r}|{member!s}|{member:>6}",
            "%s and %r" % (member, member),  # noqa: UP031
            "{} {!r}".format(member, member),  # noqa: UP032
            repr(member),
            format(member, "<5"),
            x + 1,
        )

    _same_everywhere(fn, torch.ones(1))


def test_enum_code_calling_the_users_is_not_run_at_trace_time():
    # Enum.__format__ of a class with a __str__ of the user's calls it; so does str.format
    class Named(enum.Enum):
        a = 1

        def __str__(self) -> str:
            calls.append("str")
            return "named"

    def fn(x):
        return format(Named.a), "{}".format(Named.a), f"{Named.a!s:>9}", x + 1  # noqa: UP032

    _same_everywhere(fn, torch.ones(1))


def test_comparisons_and_keys_of_members_of_a_class_with_user_code():
    def fn(x):
        member = Shouting.high
        table = {Shouting.low: "low", member: "high"}
        return member == 2, member > Shouting.low, member is Shouting(2), table[member], x + 1

    _same_everywhere(fn, torch.ones(1))
    assert _breaks(fn, torch.ones(1)) == []


def test_a_value_that_is_not_a_member_in_an_enum_class_behaves_as_eagerly():
    # 3.11: TypeError (after a DeprecationWarning); 3.12 on: whether a member has that value
    def fn(x):
        try:
            found = 2 in Color, 9 in Color
        except TypeError:
            found = "TypeError"
        return found, x + 1

    with pytest.warns(DeprecationWarning) if sys.version_info < (3, 12) else nullcontext():
        _same_everywhere(fn, torch.ones(1))
