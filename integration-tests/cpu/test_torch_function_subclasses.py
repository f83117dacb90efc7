"""Tensor subclasses with a ``__torch_function__`` of their own (issue 35): the method is
inlined, so a function that takes one compiles to one graph, as with torch.compile. Each
case is compared with eager: the values, the classes of the results, and what the user's
``__torch_function__`` saw (the calls it logged), on the first and on a cached call.
Before, any such input made the whole frame run eagerly."""

from __future__ import annotations

import operator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zoo import CountingBackend

import sapwood
import sapwood_tracer

LOG: list[str] = []


class Logging(torch.Tensor):
    """Logs the name of each function torch hands it."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        LOG.append(func.__name__)
        return super().__torch_function__(func, types, args, kwargs)


class Scaled(torch.Tensor):
    """Runs the function without dispatch, multiplies what ``add`` gives by 10, keeps its
    class and tags each result with the function's name."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        if func in (torch.add, torch.Tensor.add):
            out = out * 10
        if isinstance(out, torch.Tensor) and not isinstance(out, Scaled):
            out = out.as_subclass(Scaled)
            out.tag = func.__name__
        return out


class Keeps(torch.Tensor):
    """No ``__torch_function__`` of its own: torch's default keeps the class through
    operations. It adds a method and a property."""

    def doubled(self) -> torch.Tensor:
        return self * 2

    @property
    def first(self) -> torch.Tensor:
        return self[0]


class NDimTen(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func == torch.Tensor.ndim.__get__:
            return 10
        return super().__torch_function__(func, types, args, kwargs)


class SigmoidIsExp(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func == torch.Tensor.sigmoid:
            return super().__torch_function__(torch.Tensor.exp, types, args, kwargs)
        return super().__torch_function__(func, types, args, kwargs)


class Base(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        LOG.append(f"{cls.__name__}:{func.__name__}")
        return super().__torch_function__(func, types, args, kwargs)


class Derived(Base):
    pass


class Rewrapped(torch.Tensor):
    """Makes its results with its own ``__new__`` (``_make_subclass``), as older code does."""

    @staticmethod
    def __new__(cls, data: torch.Tensor) -> Rewrapped:  # type: ignore[misc]
        return torch.Tensor._make_subclass(cls, data)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        LOG.append(func.__name__)
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
        return cls(out) if isinstance(out, torch.Tensor) else out


def _same(got: Any, want: Any) -> None:
    if isinstance(want, torch.Tensor):
        assert type(got) is type(want), (type(got), type(want))
        torch.testing.assert_close(got, want, equal_nan=True)
        assert got.__dict__ == want.__dict__
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        assert got == want


def _check(fn: Any, *args: Any, backend: Any = None) -> CountingBackend:
    """``fn`` compiled and eager give the same results, and the user's methods see the same
    calls, on a first (tracing) and a second (cached) call; returns the graph counter."""
    counter = CountingBackend()
    compiled = sapwood.compile(fn, backend=backend or counter)
    LOG.clear()
    want = fn(*args)
    want_log = list(LOG)
    for _ in range(2):
        LOG.clear()
        got = compiled(*args)
        assert want_log == LOG
        with torch._C.DisableTorchFunctionSubclass():  # (comparing logs nothing)
            _same(got, want)
    return counter


def _torch_graphs(fn: Any, *args: Any) -> int | None:
    """torch.compile's graph count on the same call; None where torch.compile raises
    (torch 2.13's Dynamo recurses without end on ``Scaled``)."""
    torch._dynamo.reset()
    counter = CountingBackend()
    try:
        torch.compile(fn, backend=counter)(*args)
    except Exception:
        return None
    return counter.count


def _basic(x: torch.Tensor) -> Any:
    y = (x * 2).sin() + 1
    return y, y.shape, torch.relu(y), F.relu(y).sum(dim=0)


@pytest.mark.parametrize("cls", [Logging, Scaled, Keeps])
def test_one_graph_as_with_torch_and_what_eager_gives(cls: type) -> None:
    x = torch.randn(3).as_subclass(cls)
    counter = _check(_basic, x)
    assert counter.count == 1
    assert _torch_graphs(_basic, x) in (1, None if cls is Scaled else 1)


def test_a_class_that_makes_its_results_with_make_subclass() -> None:
    def f(x: torch.Tensor) -> Any:
        y = x * 2 + 1
        return y, y.requires_grad

    assert _check(f, torch.randn(3).as_subclass(Rewrapped)).count == 1
    leaf = torch.Tensor._make_subclass(Rewrapped, torch.randn(3), True)
    assert _check(f, leaf).count == 1  # (made detached, as _make_subclass makes it)


def test_the_log_names_what_eager_torch_names() -> None:
    x = torch.randn(3).as_subclass(Logging)
    _check(_basic, x)
    LOG.clear()
    _basic(x)
    assert LOG == ["mul", "sin", "add", "__get__", "relu", "relu", "sum"]


def test_operators_metadata_indexing_and_lists() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> Any:
        return (
            w + x, x - w, w * x, 1 - x, 2**x, x @ w, -x, abs(x), x > 0, x > 0,
            x[0], x[1:], x.dim(), len(x), x.size(0), x.dtype,
            torch.cat([x, x]), torch.stack((x, w)), x.split(1), x.max(0),
            [r for r in x],
        )  # fmt: skip

    for cls in (Logging, Scaled, Keeps):
        counter = _check(f, torch.randn(3).as_subclass(cls), torch.randn(3))
        assert counter.count == 1


def test_the_class_own_methods_and_properties_are_inlined() -> None:
    def f(x: Keeps) -> Any:
        return x.doubled(), x.first

    assert _check(f, torch.randn(3).as_subclass(Keeps)).count == 1


def test_what_torch_hands_the_method_is_what_eager_hands_it() -> None:
    def f(x: torch.Tensor) -> Any:
        return x.ndim + 1, x.sigmoid()

    for cls in (NDimTen, SigmoidIsExp):
        assert _check(f, torch.randn(3).as_subclass(cls)).count == 1


def test_subclasses_go_before_their_bases_and_in_argument_order() -> None:
    def f(a: torch.Tensor, b: torch.Tensor) -> Any:
        return a + b, torch.add(b, a), torch.mul(a, 2)

    base, derived = torch.randn(3).as_subclass(Base), torch.randn(3).as_subclass(Derived)
    for args in ((base, derived), (derived, base), (torch.randn(3), derived)):
        assert _check(f, *args).count == 1


def test_in_place_results_are_the_object_itself() -> None:
    def f(x: torch.Tensor) -> Any:
        y = x.clone()
        z = y.add_(1)
        y += 2
        return z is y, y, z

    for cls in (Logging, Keeps):
        _check(f, torch.randn(3).as_subclass(cls))


def test_attributes_the_method_sets_come_out_with_the_result() -> None:
    def f(x: torch.Tensor) -> Any:
        y = x + 1
        return y.tag, y

    x = torch.randn(3).as_subclass(Scaled)
    out = sapwood.compile(f, backend=CountingBackend())(x)
    assert out[0] == "add" and out[1].tag == "add" and type(out[1]) is Scaled


def test_input_attributes_are_read_and_guarded() -> None:
    def f(x: torch.Tensor) -> Any:
        return x * x.scale

    counter = CountingBackend()
    compiled = sapwood.compile(f, backend=counter)
    x = torch.randn(3).as_subclass(Keeps)
    x.scale = 2.0
    _same(compiled(x), f(x))
    x.scale = 3.0
    _same(compiled(x), f(x))
    assert counter.count == 2


def test_dispatch_off_inside_disable_torch_function_subclass() -> None:
    def f(x: torch.Tensor) -> Any:
        with torch._C.DisableTorchFunctionSubclass():
            y = x + 1
            enabled = torch._C._is_torch_function_enabled()
        return type(y) is torch.Tensor, y, enabled, x.as_subclass(torch.Tensor) * 2

    assert _check(f, torch.randn(3).as_subclass(Logging)).count == 1


def test_a_call_made_with_dispatch_off_traces_again() -> None:
    counter = CountingBackend()
    compiled = sapwood.compile(_basic, backend=counter)
    x = torch.randn(3).as_subclass(Logging)
    compiled(x)
    with torch._C.DisableTorchFunctionSubclass():
        LOG.clear()
        got = compiled(x)
        assert LOG == [] and type(got[0]) is torch.Tensor
    assert counter.count == 2


def test_another_class_traces_again() -> None:
    counter = CountingBackend()
    compiled = sapwood.compile(_basic, backend=counter)
    for cls in (Logging, Keeps, Logging):
        x = torch.randn(3).as_subclass(cls)
        LOG.clear()  # (the trace appends to LOG: its length is guarded, as torch does)
        got, want = compiled(x), _basic(x)
        with torch._C.DisableTorchFunctionSubclass():
            _same(got, want)
    assert counter.count == 2


def test_a_break_inside_the_disabled_block_resumes_inside_it() -> None:
    def f(x: torch.Tensor) -> Any:
        with torch._C.DisableTorchFunctionSubclass():
            y = x + 1
            print("break")
            z = y * x
        return y, z, x * 3

    report = sapwood.explain(f)(torch.randn(3).as_subclass(Logging))
    assert report.break_count == 1
    _check(f, torch.randn(3).as_subclass(Logging))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_backward_matches_eager_and_no_user_code_runs_while_compiling(backend: str) -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return ((x * w).sin() + 1).sum()

    def grads(fn: Any) -> tuple[Any, list[str], torch.Tensor, torch.Tensor]:
        x = torch.Tensor._make_subclass(Logging, torch.ones(3), True)
        w = torch.full((3,), 0.5, requires_grad=True)
        LOG.clear()
        loss = fn(x, w)
        loss.backward()
        assert x.grad is not None and w.grad is not None
        return loss, list(LOG), x.grad, w.grad

    want = grads(f)
    got = grads(sapwood.compile(f, backend=backend))
    _same(got[0], want[0])
    assert got[1] == want[1]
    torch.testing.assert_close(got[2], want[2])
    torch.testing.assert_close(got[3], want[3])


def test_a_module_called_on_one_compiles_to_one_graph() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    x = torch.randn(5, 3).as_subclass(Logging)
    counter = _check(model, x)
    assert counter.count == 1 == _torch_graphs(model, x)
    strict = sapwood.compile(model, backend=CountingBackend(), fullgraph=True)
    _same(strict(x), model(x))


def test_new_sizes_trace_again_and_stay_right() -> None:
    counter = CountingBackend()
    compiled = sapwood.compile(_basic, backend=counter)
    for n in (3, 5, 7):
        x = torch.randn(n, 2).as_subclass(Logging)
        LOG.clear()
        got, want = compiled(x), _basic(x)
        with torch._C.DisableTorchFunctionSubclass():
            _same(got, want)
    assert counter.count == 2  # (the third size is traced with a symbolic size)


class PlainMethod(torch.Tensor):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return NotImplemented


def test_what_is_not_modelled_breaks_with_its_reason() -> None:
    x = torch.randn(3).as_subclass(PlainMethod)
    strict = sapwood.compile(lambda t: t + 1, backend=CountingBackend(), fullgraph=True)
    with pytest.raises(sapwood_tracer.Unsupported, match="not a classmethod"):
        strict(x)


# -- random programs ---------------------------------------------------------------------------
_UNARY = [
    lambda t: t.sin(),
    lambda t: torch.exp(t),
    lambda t: -t,
    lambda t: t * 2,
    lambda t: 1 - t,
    lambda t: t.sum(dim=0, keepdim=True),
    lambda t: F.relu(t),
    lambda t: t[0:2],
    lambda t: t.T,
    lambda t: t.clone().add_(1),
    lambda t: t.reshape(-1)[:3],
    lambda t: torch.where(t > 0, t, 0.0),
    lambda t: _broken(t),
    lambda t: t.as_subclass(torch.Tensor) + 1,
    lambda t: t.add_(1) if isinstance(t, (Logging, Keeps)) else t,
]


def _broken(t: torch.Tensor) -> torch.Tensor:
    """A graph break with the tensor live across it."""
    y = t * 3
    sapwood_tracer.graph_break()
    return y - t


_BINARY = [
    operator.add,
    operator.mul,
    operator.sub,
    lambda a, b: torch.maximum(a, torch.as_tensor(b)),
    torch.add,
]


@st.composite
def _programs(draw: Any) -> list[tuple[str, int, int]]:
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            steps.append(("u", draw(st.integers(0, len(_UNARY) - 1)), 0))
        else:
            steps.append(("b", draw(st.integers(0, len(_BINARY) - 1)), draw(st.integers(0, 2))))
    return steps


def _program(steps: list[tuple[str, int, int]]) -> Any:
    def run(x: torch.Tensor, w: torch.Tensor) -> Any:
        values = [x]
        for kind, index, other in steps:
            t = values[-1]
            if kind == "u":
                values.append(_UNARY[index](t))
            else:
                operand = (w, x, 2.0)[other]
                if isinstance(operand, torch.Tensor) and operand.shape != t.shape:
                    operand = 2.0
                values.append(_BINARY[index](t, operand))
        return values[-1], [type(v).__name__ for v in values]

    return run


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_programs(), st.sampled_from([Logging, Scaled, Keeps, Rewrapped]))
def test_random_programs_match_eager(steps: list[tuple[str, int, int]], cls: type) -> None:
    x, w = torch.randn(4, 4).as_subclass(cls), torch.randn(4, 4)
    _check(_program(steps), x, w)
    report = sapwood.explain(_program(steps))(x, w)
    reasons = [b.reason for b in report.breaks] + [why for _, why in report.eager_functions]
    assert not [r for r in reasons if "internal error" in r or "sapwood bug" in r], reasons
