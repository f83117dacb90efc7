"""The entry binds a call's arguments as Python does (the values in binding order), on the
fast paths (positional arguments only, the rest from the defaults as they are at the call)
and the general one; a call Python rejects is rejected with the same kind of error."""

from __future__ import annotations

import inspect
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from sapwood_tracer.api.binding import binder


def plain(a, b):
    return a, b


def with_defaults(a, b=2, c=None):
    return a, b, c


def with_star(a, b=2, *rest, **extra):
    return a, b, rest, extra


def with_kwonly(a, b=2, *, c, d=4):
    return a, b, c, d


def with_varkw(a=None, b=1, **extra):
    return a, b, extra


def posonly(a, /, b=5, *rest):
    return a, b, rest


FUNCTIONS = [plain, with_defaults, with_star, with_kwonly, with_varkw, posonly]


def _python(fn: Any, args: tuple, kwargs: dict) -> tuple:
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.arguments.values())


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(FUNCTIONS),
    st.lists(st.integers(0, 9), max_size=5),
    st.dictionaries(st.sampled_from(["a", "b", "c", "d", "z"]), st.integers(10, 19), max_size=3),
)
def test_binding_equals_pythons(fn, args, kwargs) -> None:
    bind = binder(fn)
    try:
        expected = _python(fn, tuple(args), kwargs)
    except TypeError:
        with pytest.raises(TypeError):
            bind(tuple(args), kwargs)
        return
    assert bind(tuple(args), kwargs) == expected


def test_defaults_are_read_at_each_call() -> None:
    bind = binder(with_varkw)
    first = bind((1,), {})
    saved = with_varkw.__defaults__
    try:
        with_varkw.__defaults__ = (None, 7)
        assert bind((1,), {}) == (1, 7, {})
    finally:
        with_varkw.__defaults__ = saved
    assert first == (1, 1, {})


def test_each_call_gets_its_own_keyword_dict() -> None:
    bind = binder(with_varkw)
    a, b = bind((1,), {}), bind((1,), {})
    assert a[2] == {} and a[2] is not b[2]
