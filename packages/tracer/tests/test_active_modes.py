"""A compiled function called while a torch function or dispatch mode of the program's is
active runs eagerly (``api/modes.py``): the mode sees exactly the calls eager code makes,
never sapwood's own (fake tensors, metadata, the backend's compile), and a graph traced
under one mode is never served under another."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import sapwood_tracer
from sapwood_tracer import ModeFallbackWarning
from sapwood_tracer.api import modes

LOG: list[str] = []


class LoggingFunctions(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        LOG.append(func.__name__)
        return func(*args, **(kwargs or {}))


class SinIsCos(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func in (torch.sin, torch.Tensor.sin):
            func = torch.cos
        return func(*args, **(kwargs or {}))


class LoggingOps(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        LOG.append(str(func))
        return func(*args, **(kwargs or {}))


def _fn(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).sin() + 1


def _aot_eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    from torch._functorch.aot_autograd import aot_module_simplified

    return aot_module_simplified(gm, example_inputs, fw_compiler=lambda g, _: g.forward)


@pytest.mark.parametrize("mode", [LoggingFunctions, LoggingOps])
def test_a_mode_sees_what_eager_code_makes_it_see(mode: Any) -> None:
    modes._warned.discard(_fn.__code__)  # (warned once per code: once per parameter here)
    compiled = sapwood_tracer.compile(_fn, backend=_aot_eager)
    x = torch.randn(3)
    compiled(x)  # (a cached entry from outside the mode)
    for _ in range(2):
        with mode():
            LOG.clear()
            want = _fn(x)
            seen = list(LOG)
            LOG.clear()
            with pytest.warns(ModeFallbackWarning) if _ == 0 else _no_warning():
                got = compiled(x)
            assert seen == LOG
        torch.testing.assert_close(got, want)


def test_a_graph_made_under_one_mode_is_not_served_under_another() -> None:
    compiled = sapwood_tracer.compile(_fn, backend=_aot_eager)
    x = torch.randn(3)
    with SinIsCos():
        torch.testing.assert_close(compiled(x), (x * 2).cos() + 1)
    with LoggingFunctions():
        torch.testing.assert_close(compiled(x), _fn(x))
    torch.testing.assert_close(compiled(x), _fn(x))


def test_explain_names_the_mode_and_fullgraph_refuses() -> None:
    x = torch.randn(3)
    with LoggingOps():
        report = sapwood_tracer.explain(_fn)(x)
    assert any("TorchDispatchMode (LoggingOps)" in why for _, why in report.eager_functions)
    strict = sapwood_tracer.compile(_fn, backend=_aot_eager, fullgraph=True)
    with LoggingFunctions(), pytest.raises(sapwood_tracer.Unsupported, match="TorchFunctionMode"):
        strict(x)


class _no_warning:
    def __enter__(self) -> None:
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("error", ModeFallbackWarning)

    def __exit__(self, *exc: object) -> None:
        self._catch.__exit__(*exc)


def test_the_default_device_modes_are_traced_not_refused() -> None:
    """``torch.set_default_device`` / ``with torch.device(...)`` (torch's ``DeviceContext``
    modes) are traced: factory functions without a device get the mode's, guarded."""
    counting: list[int] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        counting.append(1)
        return gm.forward

    def fn(x: torch.Tensor) -> Any:
        return x + torch.ones(3), torch.zeros(2).device, torch.get_default_device()

    compiled = sapwood_tracer.compile(fn, backend=backend)
    x = torch.randn(3)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", ModeFallbackWarning)  # (never eager for these)
        for device in (None, "cpu", "meta", "meta", "cpu"):
            with torch.device(device) if device else _nothing():
                arg = torch.randn(3) if device == "meta" else x
                got, want = compiled(arg), fn(arg)
            assert got[1:] == want[1:] and got[0].device == want[0].device
    assert len(counting) == 3  # (no mode, cpu, meta: each traced once)
    report = sapwood_tracer.explain(fn)
    with torch.device("meta"):
        guards = report(torch.randn(3)).guards[0][1]
    assert "torch_state.default_device == device(type='meta')" in guards


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_vmap_and_grad_of_a_compiled_function_run_it_eagerly() -> None:
    # (before, the trace took functorch's batched wrappers as inputs and the backend failed)
    from torch.func import grad, vmap

    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x * 3).cos()

    compiled = sapwood_tracer.compile(fn, backend=_aot_eager)
    xs, x = torch.randn(4, 3), torch.randn(3)
    with pytest.warns(ModeFallbackWarning, match="torch.func transform"):
        torch.testing.assert_close(vmap(compiled)(xs), vmap(fn)(xs))
    got = grad(lambda v: compiled(v).sum())(x)
    torch.testing.assert_close(got, grad(lambda v: fn(v).sum())(x))
    torch.testing.assert_close(compiled(x), fn(x))


def test_an_entry_made_under_the_default_device_mode_does_not_serve_another_mode() -> None:
    def fn(x: torch.Tensor) -> Any:
        return x + torch.ones(3), torch._C._is_torch_function_mode_enabled()

    compiled = sapwood_tracer.compile(fn, backend=_aot_eager)
    x = torch.randn(3)
    assert compiled(x)[1] is fn(x)[1] is False
    with torch.device("cpu"):
        assert compiled(x)[1] is fn(x)[1] is True  # (traced under the device mode)
        with LoggingFunctions():
            LOG.clear()
            fn(x)
            seen = list(LOG)
            LOG.clear()
            compiled(x)
            assert seen == LOG == ["ones", "add"]
