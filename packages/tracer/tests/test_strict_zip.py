"""``zip(..., strict=True)`` in compiled code takes the same items, raises the same
``ValueError`` (message included) at the same step, and leaves its arguments' iterators where
eager Python leaves them; rebuilt at a graph break, it is a strict zip still."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import sapwood_tracer


def _eager(gm: Any, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


def _zip_all(sizes: list[int]) -> Any:
    iterators = [iter(range(n)) for n in sizes]
    out: list[Any] = []
    try:
        for items in zip(*iterators, strict=True):
            out.append(items)
    except ValueError as exc:
        out.append(str(exc))
    out.append([next(it, "end") for it in iterators])  # where each argument stopped
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=4))
def test_strict_zip_matches_eager_python_on_any_lengths(sizes: list[int]):
    sapwood_tracer.reset()
    expected = _zip_all(sizes)
    report = sapwood_tracer.explain(_zip_all)(sizes)
    assert report.breaks == []
    assert _compiled(_zip_all)(sizes) == expected


def test_the_messages_name_the_arguments_as_cpython_does():
    def f(*args: Any) -> Any:
        try:
            return list(zip(*args, strict=True))
        except ValueError as exc:
            return str(exc)

    compiled = _compiled(f)
    for args in [
        ((1, 2, 3, 4), "abc"),
        ((1, 2), "abc"),
        ((1, 2), (1, 2), "abc"),
        ("ab", "ab", "a"),
    ]:
        assert compiled(*args) == f(*args)
        assert "zip() argument" in f(*args)


class _Failing:
    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        raise KeyError("from the argument")


def test_an_error_of_an_argument_passes_through():
    def f() -> Any:
        try:
            return list(zip([1], _Failing(), strict=True))
        except KeyError as exc:
            return repr(exc)

    assert sapwood_tracer.explain(f)().breaks == []
    assert _compiled(f)() == f()


@sapwood_tracer.disable
def _list_eagerly(it: Any) -> Any:
    try:
        return list(it)
    except ValueError as exc:
        return str(exc)


def test_a_strict_zip_passed_to_eager_code_is_rebuilt_strict():
    def f() -> Any:
        x, y, z = iter(range(5)), [0], iter(range(5))
        got = _list_eagerly(zip(x, y, z, strict=True))
        return got, list(x), list(z)

    report = sapwood_tracer.explain(f)()
    assert [b.reason for b in report.breaks][:1] == [
        "a call to _list_eagerly, which sapwood must not trace"
    ]
    assert (
        _compiled(f)()
        == f()
        == ("zip() argument 2 is shorter than argument 1", [2, 3, 4], [1, 2, 3, 4])
    )
