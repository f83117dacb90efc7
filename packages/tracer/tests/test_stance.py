"""torch.compiler.set_stance is obeyed by sapwood's compiled functions, or refused."""

from __future__ import annotations

import pytest
import torch

import sapwood_tracer
from sapwood_tracer.api.stance import StanceNotSupported


class _Counting:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, gm, example_inputs):
        self.count += 1
        return gm.forward


def _fn(x):
    return x.sin() + 1


def test_force_eager_runs_without_compiling_or_looking_up() -> None:
    backend = _Counting()
    compiled = sapwood_tracer.compile(_fn, backend=backend)
    x = torch.ones(3)
    with torch.compiler.set_stance("force_eager"):
        torch.testing.assert_close(compiled(x), _fn(x))
    assert backend.count == 0
    compiled(x)
    assert backend.count == 1


def test_eager_on_recompile_uses_the_cache_and_never_traces() -> None:
    backend = _Counting()
    compiled = sapwood_tracer.compile(_fn, backend=backend, dynamic=False)
    compiled(torch.ones(3))
    with torch.compiler.set_stance("eager_on_recompile"):
        for x in (torch.ones(3), torch.ones(5), torch.ones(7)):
            torch.testing.assert_close(compiled(x), _fn(x))
    assert backend.count == 1


def test_fail_on_recompile_raises_naming_the_function_and_guard() -> None:
    backend = _Counting()
    compiled = sapwood_tracer.compile(_fn, backend=backend, dynamic=False)
    compiled(torch.ones(3))
    with torch.compiler.set_stance("fail_on_recompile"):
        torch.testing.assert_close(compiled(torch.ones(3)), _fn(torch.ones(3)))
        with pytest.raises(RuntimeError, match=r"fail_on_recompile.*_fn.*guard that failed"):
            compiled(torch.ones(5))
    compiled(torch.ones(5))  # back to the default: traced
    assert backend.count == 2


@pytest.mark.parametrize(
    "kwargs",
    [{"stance": "eager_then_compile"}, {"stance": "default", "force_backend": "eager"}],
)
def test_stances_sapwood_lacks_are_refused(kwargs) -> None:
    compiled = sapwood_tracer.compile(_fn, backend=_Counting())
    with (
        torch.compiler.set_stance(**kwargs),
        pytest.raises(StanceNotSupported, match="sapwood does not implement"),
    ):
        compiled(torch.ones(3))
    torch.testing.assert_close(compiled(torch.ones(3)), _fn(torch.ones(3)))
