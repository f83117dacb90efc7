"""``torch.profiler.record_function`` blocks in compiled code.

Entering one ran ``torch.ops.profiler._record_function_enter_new``, whose result the trace
cannot hold: the block was a graph break, and the code in it ran eagerly. Inside a graph the
range now records nothing (as in torch.compile by default), with a warning once per name;
a graph break inside the block re-enters the real range around the eager part.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import sapwood
from sapwood_tracer.values import contexts


def _eager_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    return gm.forward


@pytest.fixture(autouse=True)
def _warn_again() -> None:
    contexts._RANGES_WARNED.clear()


def _range_only(x: torch.Tensor) -> torch.Tensor:
    with torch.profiler.record_function("sapwood-test-range"):
        y = x * 2
    return y + 1


def _range_with_break(x: torch.Tensor) -> torch.Tensor:
    with torch.autograd.profiler.record_function("sapwood-test-break", "extra"):
        y = x * 2
        torch.ones(1).tolist()  # (eager: a graph break inside the range)
        sapwood_graph_break()
        y = y + 1
    return y * 3


def sapwood_graph_break() -> None:
    print("graph break inside the profiler range")


def test_a_range_is_one_graph_with_a_warning() -> None:
    x = torch.randn(3)
    with pytest.warns(UserWarning, match="sapwood-test-range") as caught:
        report = sapwood.explain(_range_only)(x)
    assert report.graph_count == 1 and not report.breaks and not report.eager_functions
    assert all(w.filename == __file__ for w in caught)  # the user's line, not sapwood's
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per name
        torch.testing.assert_close(
            sapwood.compile(_range_only, backend=_eager_backend)(x), _range_only(x)
        )


def test_a_break_inside_a_range_keeps_the_range_around_the_eager_part() -> None:
    x = torch.randn(3)
    compiled = sapwood.compile(_range_with_break, backend=_eager_backend)
    with pytest.warns(UserWarning):
        torch.testing.assert_close(compiled(x), _range_with_break(x))
    report = sapwood.explain(_range_with_break)(x)
    assert report.graph_count == 2 and not report.eager_functions
    with torch.profiler.profile() as prof:
        torch.testing.assert_close(compiled(x), _range_with_break(x))
    names = [event.name for event in prof.events()]
    assert names.count("sapwood-test-break") >= 2  # the eager call's and the compiled call's


def test_the_range_object_used_in_the_block_is_a_break() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, str]:
        with torch.profiler.record_function("sapwood-test-object") as rf:
            y = x + 1
            kind = type(rf).__name__
        return y, kind

    x = torch.randn(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = sapwood.compile(fn, backend=_eager_backend)(x)
    expected = fn(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] == "record_function"
