"""Compiled code keeps no reference to what an exception touched once the exception is gone,
and the traceback of an exception that leaves compiled code is eager's.

Eagerly, a tensor passed to a function that raises (and catches, or lets the exception out
to a caller that handles it) is freed as soon as the caller drops it: nothing but the
exception's traceback holds the frames, and nothing holds the exception afterwards. In
compiled code an exception also passes through the tracer's frames while tracing, and
through sapwood's generated entry function when the code runs; a frame that held the
exception it was part of the traceback of would make a reference cycle, and the tensor
would live until the cyclic garbage collector runs. These tests free the tensor with the
collector disabled.
"""

from __future__ import annotations

import contextlib
import gc
import traceback
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import sapwood_tracer


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


@pytest.fixture(autouse=True)
def _no_cyclic_collection() -> Iterator[None]:
    gc.collect()
    gc.disable()
    yield
    gc.enable()


class _IteratesParameters(torch.nn.Module):  # (StopIteration ends the loop, in the trace)
    def forward(self, x):
        for _ in self.parameters():
            pass
        return x


class _CatchesItsOwn(torch.nn.Module):
    @staticmethod
    def raises():
        raise RuntimeError("caught inside")

    def forward(self, x):
        try:  # noqa: SIM105 (the traced program's own handler is what is tested)
            self.raises()
        except RuntimeError:
            pass
        return x


class _Raises(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("leaves the call")


class _RaisesAfterABreak(torch.nn.Module):
    def forward(self, x):
        y = x + 1
        print("a graph break", end="")
        return y["not a tensor index"]


class _CatchesAcrossABreak(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        try:
            print("a graph break", end="")
            raise ValueError(y.shape)
        except ValueError:
            return y + 1


@pytest.mark.parametrize(
    "module",
    [_IteratesParameters, _CatchesItsOwn, _Raises, _RaisesAfterABreak, _CatchesAcrossABreak],
)
def test_the_input_dies_with_its_last_reference(module, capsys):
    def call_once() -> weakref.ref:
        model = sapwood_tracer.compile(module(), backend=_eager)
        x = torch.randn(4, 4)
        with contextlib.suppress(Exception):
            model(x)
        return weakref.ref(x)

    for _ in range(2):  # the first call traces, the second runs the cache entry
        assert call_once()() is None


def test_an_exception_keeps_its_frames_until_it_is_dropped():
    # (what eager Python does: the traceback holds the frame that holds x)
    def fn(x):
        y = x + 1
        print("a graph break", end="")
        raise KeyError(y.shape)

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    x = torch.randn(3)
    seen = weakref.ref(x)
    try:
        compiled(x)
    except KeyError as exc:
        kept = exc
    del x
    assert seen() is not None  # the user's frame in the traceback still has it
    del kept
    assert seen() is None


def _frames(exc: BaseException) -> list[tuple[str, str, str | None]]:
    return [(f.filename, f.name, f.line) for f in traceback.extract_tb(exc.__traceback__)]


def _raised(call: Any) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("it did not raise")


def _inner(a):
    raise ValueError(f"no {a}")


def _outer(b):
    return _inner(b + 1)


def _multiplies_strings(x):
    y = x * 2
    return y, "A" * "A"


def _breaks_then_raises(x):
    y = x * 2
    print("a graph break", end="")
    return _outer(y.shape[0])


@pytest.mark.parametrize("fn", [_outer, _multiplies_strings, _breaks_then_raises])
def test_a_traceback_shows_the_users_frames_as_eagerly(fn, capsys):
    arg = 4 if fn is _outer else torch.ones(2)
    eager = _raised(lambda: fn(arg))
    compiled = _raised(lambda: sapwood_tracer.compile(fn, backend=_eager)(arg))
    assert type(compiled) is type(eager) and str(compiled) == str(eager)
    assert _frames(compiled)[2:] == _frames(eager)[2:]  # (after _raised and the lambda)
    assert not any("sapwood" in name for name, _, _ in _frames(compiled))


def test_sapwoods_own_errors_keep_the_users_frames_or_all_when_verbose(monkeypatch):
    def fn(x):
        return x + 1, print("a graph break")

    error = _raised(
        lambda: sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)(torch.ones(1))
    )
    assert isinstance(error, sapwood_tracer.Unsupported)
    assert not any("sapwood_tracer" in name for name, _, _ in _frames(error))
    monkeypatch.setenv("SAPWOOD_VERBOSE_TRACEBACKS", "1")
    error = _raised(
        lambda: sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)(torch.ones(2))
    )
    assert any("sapwood_tracer" in name for name, _, _ in _frames(error))
