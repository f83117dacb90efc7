"""Shared fixtures of the tracer's tests.

* ``backend``: a counting eager backend (``backend.graphs`` lists the graphs it compiled).
* ``check``: the differential check — compile ``fn`` with the counting backend, call it on
  each argument tuple twice, compare every result with eager (structure, types, values),
  and assert the number of graphs compiled (one per distinct input signature by default).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

import sapwood_tracer


class CountingBackend:
    """An eager backend that records the graphs it was given."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.graphs.append(gm)
        return gm.forward

    @property
    def count(self) -> int:
        return len(self.graphs)


def assert_same(actual: Any, expected: Any, path: str = "result") -> None:
    """Structure, types and values equal (tensors: dtype, shape, values, requires_grad)."""
    assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
    if isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype, f"{path}: dtype"
        assert actual.shape == expected.shape, f"{path}: shape"
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad"
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5, equal_nan=True)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: length"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys"
        for k in expected:
            assert_same(actual[k], expected[k], f"{path}[{k!r}]")
    elif (
        hasattr(expected, "__dict__") and not isinstance(expected, type) and not callable(expected)
    ):
        assert_same(vars(actual), vars(expected), f"{path}.__dict__")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Any:
    sapwood_tracer.reset()
    yield
    sapwood_tracer.reset()


@pytest.fixture
def backend() -> CountingBackend:
    return CountingBackend()


@pytest.fixture
def check(backend: CountingBackend) -> Callable[..., Any]:
    def run(
        fn: Callable[..., Any],
        *arg_sets: Sequence[Any],
        graphs: int | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        compiled = sapwood_tracer.compile(fn, backend=backend)
        kwargs = kwargs or {}
        result = None
        for args in arg_sets:
            for _ in range(2):
                result = compiled(*args, **kwargs)
                assert_same(result, fn(*args, **kwargs))
        expected = len(arg_sets) if graphs is None else graphs
        assert backend.count == expected, f"{backend.count} graphs, expected {expected}"
        return result

    return run


@pytest.fixture
def same() -> Callable[[Any, Any], None]:
    return assert_same
