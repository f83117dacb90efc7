"""Resume codes hold what can run from their resume point, and the way on after an eager call
that raises is made only when one raises; results and exceptions always equal eager's."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import sapwood_tracer
from sapwood_tracer.api import events


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


def _captured_exits(fn: Any, *args: Any) -> tuple[Any, list[Any]]:
    exits: list[Any] = []

    def seen(kind: str, data: dict[str, Any]) -> None:
        if kind == "capture" and data["entry"].exit is not None:
            exits.append(data["entry"].exit)

    stop = events.listen(seen)
    try:
        result = fn(*args)
    finally:
        stop()
    return result, exits


@sapwood_tracer.disable
def _check(value: Any) -> Any:
    if isinstance(value, str) or (type(value) is int and value < 0):
        raise ValueError(value)
    return value


def _straight(x):
    x = x + 1
    _check(1)
    x = x * 2
    _check(2)
    x = x - 3
    _check(3)
    return x


def test_a_resume_code_in_straight_line_code_leaves_out_what_came_before():
    x = torch.ones(3)
    result, exits = _captured_exits(_compiled(_straight), x)
    assert torch.equal(result, _straight(x))
    sizes = [len(e.continuations[0].code.co_code) for e in exits]
    assert len(sizes) == 3
    # each later resume point has less left to run: its code is shorter
    assert sizes[0] > sizes[1] > sizes[2]
    assert sizes[0] < len(_straight.__code__.co_code)


def _loop(x, items):
    total = 0
    for item in items:
        total += _check(item)  # a break inside the loop: the loop's head is before it
        x = x + total
    return x, total


@pytest.mark.parametrize("items", [[], [1], [1, 2, 3], list(range(10))])
def test_a_loop_that_breaks_keeps_its_head_before_the_resume_point(items):
    x = torch.zeros(2)
    got = _compiled(_loop)(x, items)
    want = _loop(x, items)
    assert torch.equal(got[0], want[0]) and got[1] == want[1]


def _handled(x, values):
    log = []
    for v in values:
        try:
            log.append(_check(v))
        except ValueError as exc:
            log.append(f"caught {exc}")
            x = x + 1
        else:
            x = x * 2
        finally:
            log.append("finally")
    return x, log


@pytest.mark.parametrize("values", [[1, 2], ["a"], [1, "b", 3], ["a", "b"]])
def test_an_eager_call_that_raises_goes_on_in_the_original_handlers(values):
    x = torch.ones(2)
    got = _compiled(_handled)(x, values)
    want = _handled(x, values)
    assert torch.equal(got[0], want[0]) and got[1] == want[1]


def _raising(x, v):
    x = x + 1
    y = _check(v)
    return x * 2, y


def test_the_way_on_after_a_raise_is_made_only_when_the_call_raises():
    compiled = _compiled(_raising)
    x = torch.ones(2)
    made: list[Any] = []
    for v in (5, 6, 7, 8):  # (the int may specialise once, then is symbolic)
        got, exits = _captured_exits(compiled, x, v)
        assert torch.equal(got[0], _raising(x, v)[0]) and got[1] == v
        made += exits
    assert made and all(e.on_error is not None and not e.on_error.made for e in made)
    captures: list[str] = []
    stop = events.listen(lambda kind, data: captures.append(kind))
    try:
        with pytest.raises(ValueError, match="-1"):
            compiled(x, -1)
    finally:
        stop()
    assert "capture" not in captures  # an entry made before served it
    assert [e.on_error.made for e in made].count(True) == 1


def _uncaught(x, v):
    x = x + 1
    _check(v)
    return x


def test_an_exception_from_a_breaking_call_reaches_the_caller_as_eagerly():
    compiled = _compiled(_uncaught)
    x = torch.ones(2)
    with pytest.raises(ValueError, match="oops") as info:
        compiled(x, "oops")
    with pytest.raises(ValueError, match="oops") as eager_info:
        _uncaught(x, "oops")
    assert type(info.value) is type(eager_info.value) and info.value.args == eager_info.value.args
