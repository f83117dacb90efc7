"""``unittest``'s ``assertRaises`` inside a compiled function: on leaving, it calls
``traceback.clear_frames`` on the exception's traceback, which frees the locals of frames the
trace inlined (and so never made): nothing to do. It made the whole function run eagerly
("reads frames"), the most common refusal in PyTorch's own dynamo tests."""

from __future__ import annotations

import traceback
import unittest

import pytest
import torch

import sapwood_tracer

from .conftest import CountingBackend


class _Case(unittest.TestCase):
    def runTest(self) -> None:  # (unittest wants one)
        pass


def test_assert_raises_in_a_compiled_function_is_one_graph() -> None:
    case = _Case()

    def f(x: torch.Tensor) -> torch.Tensor:
        with case.assertRaises(TypeError) as caught:
            {}[[1]] = 2
        case.assertRaises(KeyError, {}.__getitem__, "a")
        return x + len(str(caught.exception))

    backend = CountingBackend()
    x = torch.zeros(1)
    torch.testing.assert_close(sapwood_tracer.compile(f, backend=backend, fullgraph=True)(x), f(x))
    assert backend.count == 1


def test_a_failing_assert_raises_fails_as_eagerly() -> None:
    case = _Case()

    def f(x: torch.Tensor) -> torch.Tensor:
        with case.assertRaises(KeyError):
            x = x + 1
        return x

    with pytest.raises(AssertionError, match="KeyError not raised"):
        sapwood_tracer.compile(f, backend=CountingBackend())(torch.zeros(1))


def test_clear_frames_of_a_real_traceback_is_refused() -> None:
    try:
        raise ValueError("outside")
    except ValueError as exc:
        tb = exc.__traceback__

    def f(x: torch.Tensor, tb: object) -> torch.Tensor:
        traceback.clear_frames(tb)
        return x

    with pytest.raises(sapwood_tracer.Unsupported, match=r"clear_frames|traceback"):
        sapwood_tracer.compile(f, backend=CountingBackend(), fullgraph=True)(torch.zeros(1), tb)
