"""Zero-argument ``super()`` after a graph break.

``super()`` with no arguments finds its instance as the calling frame's first local. A resume
function passes the stack first, so the rest of a method resumed there made ``super()`` fail
("__class__ cell not found", or the wrong instance) -- an error from sapwood reaching the
user on a common pattern: a module subclass whose ``forward`` prints, then calls
``super().forward``. The resume function now takes the instance as its first parameter.
"""

from __future__ import annotations

import torch

import sapwood


def _eager_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    return gm.forward


class _Scaled(torch.nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        print("between the graphs")
        return super().forward(y) + 1


def test_module_forward_calls_super_after_a_break(capsys: object) -> None:
    torch.manual_seed(0)
    m = _Scaled(3, 4)
    x = torch.randn(2, 3)
    report = sapwood.explain(m)(x)
    assert report.graph_count == 2
    assert not report.eager_functions
    compiled = sapwood.compile(m, backend=_eager_backend)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), m(x))


class _Base:
    def combine(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, str]:
        return a + b, type(self).__name__


class _Child(_Base):
    def combine(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, str]:
        a = a.sin()
        print("break inside the inlined method")
        out, name = super().combine(a, b)
        return out * 2, name


class _Grandchild(_Child):
    pass


def _combine(obj: _Base, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, str]:
    return obj.combine(a, b)


def _combine_alike(*objects: _Base) -> None:
    """``obj.combine`` compiled (the method inlined, breaking inside) and eager agree."""
    a, b = torch.randn(3), torch.randn(3)
    compiled = sapwood.compile(_combine, backend=_eager_backend)
    for obj in objects:
        got, expected = compiled(obj, a, b), _combine(obj, a, b)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1] == type(obj).__name__


def test_inlined_method_calls_super_after_a_break() -> None:
    _combine_alike(_Child(), _Grandchild(), _Child())


class _StackAtBreak(_Base):
    def combine(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, str]:
        # values on the stack when the print breaks: the tuple being built
        return (a.cos(), print("break with a value on the stack"), super().combine(a, b))  # type: ignore[return-value]


def test_super_after_a_break_with_values_on_the_stack() -> None:
    def fn(obj: _Base, a: torch.Tensor, b: torch.Tensor) -> object:
        return obj.combine(a, b)

    a, b = torch.randn(3), torch.randn(3)
    got = sapwood.compile(fn, backend=_eager_backend)(_StackAtBreak(), a, b)
    expected = fn(_StackAtBreak(), a, b)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] is None and expected[1] is None
    torch.testing.assert_close(got[2][0], expected[2][0])
    assert got[2][1] == expected[2][1] == "_StackAtBreak"


class _BareSuper(_Base):
    def combine(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, str]:
        print("break before a bare super()")
        parent = super()
        return parent.combine(a * 3, b)


def test_bare_super_object_after_a_break() -> None:
    _combine_alike(_BareSuper(), _BareSuper())


class _CapturedSelf(_Base):
    def combine(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, str]:
        name = lambda: type(self).__name__  # noqa: E731 - ``self`` becomes a cell
        print("break while self is a cell")
        out, _ = super().combine(a, b)
        return out, name()


def test_super_with_self_in_a_cell_runs_as_eager() -> None:
    _combine_alike(_CapturedSelf(), _CapturedSelf())


class _Looping(torch.nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for step in range(3):
            print("break in the loop", step)
            x = super().forward(x).tanh()
        return x


def test_super_in_a_loop_that_breaks() -> None:
    torch.manual_seed(1)
    m = _Looping(4, 4)
    x = torch.randn(2, 4)
    compiled = sapwood.compile(m, backend=_eager_backend)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), m(x))
