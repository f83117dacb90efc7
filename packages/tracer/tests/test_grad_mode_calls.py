"""``torch.set_grad_enabled(b)`` called as a function, then a graph break or a return.

The call switches the global mode for the rest of the program, as eager code does. The
graph now ends in the mode it began with and the entry sets the mode the program left for
real after it (before the eager part of a break): the function compiles on both sides of
the break instead of running eagerly as a whole.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import sapwood


def _eager_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    return gm.forward


@pytest.fixture(autouse=True)
def _grad_mode_restored() -> Iterator[None]:
    before = torch.is_grad_enabled()
    yield
    torch.set_grad_enabled(before)


def _switch_off_then_on(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, bool]:
    torch.set_grad_enabled(False)
    y = x * 2
    print("graph break with grad disabled")
    z = y + 1
    inside = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    return z * x, z, inside


def _leave_off(x: torch.Tensor) -> torch.Tensor:
    torch.set_grad_enabled(False)
    return x * 3


def _two_switches(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    torch.set_grad_enabled(False)
    a = x + 1
    torch.set_grad_enabled(True)
    b = a * x
    torch.set_grad_enabled(False)
    print("graph break after two switches")
    return b + a, torch.is_grad_enabled()


def _switch_inside_with(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    with torch.enable_grad():
        torch.set_grad_enabled(False)
        y = x * 2
        print("graph break inside the with block")
    return y + 1, torch.is_grad_enabled()


def _run(fn: object, x: torch.Tensor, start: bool) -> tuple[object, bool]:
    torch.set_grad_enabled(start)
    out = fn(x)  # type: ignore[operator]
    return out, torch.is_grad_enabled()


def _same(got: object, expected: object) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor)
        torch.testing.assert_close(got, expected)
        assert got.requires_grad == expected.requires_grad
    elif isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for a, b in zip(got, expected):
            _same(a, b)
    else:
        assert got == expected


@pytest.mark.parametrize(
    "fn", [_switch_off_then_on, _leave_off, _two_switches, _switch_inside_with]
)
@pytest.mark.parametrize("start", [True, False])
def test_grad_mode_left_by_the_program_equals_eager(fn: object, start: bool) -> None:
    x = torch.randn(3, requires_grad=True)
    compiled = sapwood.compile(fn, backend=_eager_backend)
    for _ in range(2):  # the traced call, then the cached one
        got, mode_after = _run(compiled, x, start)
        expected, expected_after = _run(fn, x, start)
        _same(got, expected)
        assert mode_after == expected_after


def test_a_switch_before_a_break_compiles_both_sides() -> None:
    x = torch.randn(3, requires_grad=True)
    torch.set_grad_enabled(True)
    report = sapwood.explain(_switch_off_then_on)(x)
    assert report.graph_count == 2
    assert not report.eager_functions
    torch.set_grad_enabled(True)
    got = sapwood.compile(_switch_off_then_on, backend=_eager_backend)(x)
    got[0].sum().backward()
    grad, x.grad = x.grad, None
    torch.set_grad_enabled(True)
    _switch_off_then_on(x)[0].sum().backward()
    torch.testing.assert_close(grad, x.grad)


def test_a_function_that_leaves_grad_off_is_one_graph() -> None:
    x = torch.randn(3, requires_grad=True)
    torch.set_grad_enabled(True)
    report = sapwood.explain(_leave_off)(x)
    assert report.graph_count == 1 and not report.breaks and not report.eager_functions
    assert not torch.is_grad_enabled()
