"""Pythons the tracer does not know are never compiled silently wrong or silently eager."""

from __future__ import annotations

import warnings

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import Unsupported, UnsupportedPythonWarning
from sapwood_tracer.api import entry
from sapwood_tracer.interpreter import registry


def _fn(x, scale=2):
    return (x + 1).relu() * scale


@pytest.fixture
def counting_backend():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    backend.graphs = graphs
    return backend


@pytest.fixture
def unknown_python(request, monkeypatch):
    version = request.param
    monkeypatch.setattr(registry, "running_version", lambda: version)
    monkeypatch.setattr(entry, "_python_warned", False)
    sapwood_tracer.reset()
    yield version
    sapwood_tracer.reset()


@pytest.mark.parametrize("unknown_python", [(3, 14), (3, 10)], indirect=True)
def test_an_unknown_python_warns_once_at_compile_and_runs_eagerly(unknown_python, counting_backend):
    major, minor = unknown_python
    with pytest.warns(UnsupportedPythonWarning, match=rf"Python {major}\.{minor} is not supported"):
        compiled = sapwood_tracer.compile(_fn, backend=counting_backend)
    x = torch.randn(5)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), _fn(x))
        torch.testing.assert_close(compiled(x, scale=3), _fn(x, scale=3))
    assert counting_backend.graphs == []  # nothing was compiled
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second compile() does not warn again
        sapwood_tracer.compile(_fn, backend=counting_backend)


@pytest.mark.parametrize("unknown_python", [(3, 14)], indirect=True)
def test_explain_names_the_unknown_python_as_the_reason(unknown_python):
    report = sapwood_tracer.explain(_fn)(torch.randn(3))
    assert report.graph_count == 0
    [(function, reason)] = report.eager_functions
    assert function == "_fn"
    assert "Python 3.14 is not supported" in reason and "3.11, 3.12, 3.13" in reason
    assert "Run eagerly as a whole" in str(report)


@pytest.mark.parametrize("unknown_python", [(3, 14)], indirect=True)
def test_fullgraph_on_an_unknown_python_is_a_typed_error(unknown_python, counting_backend):
    with pytest.warns(UnsupportedPythonWarning):
        compiled = sapwood_tracer.compile(_fn, backend=counting_backend, fullgraph=True)
    with pytest.raises(Unsupported, match=r"Python 3\.14 is not supported"):
        compiled(torch.randn(3))


def test_the_running_python_is_supported_and_warns_nothing():
    assert registry.running_version() in registry.SUPPORTED_PYTHONS
    assert registry.unsupported_python() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsupportedPythonWarning)
        sapwood_tracer.compile(_fn, backend=lambda gm, ex: gm.forward)


def test_a_free_threaded_build_runs_eagerly_with_a_warning(monkeypatch, counting_backend):
    import sysconfig

    real = sysconfig.get_config_var
    monkeypatch.setattr(
        sysconfig, "get_config_var", lambda name: 1 if name == "Py_GIL_DISABLED" else real(name)
    )
    monkeypatch.setattr(entry, "_python_warned", False)
    sapwood_tracer.reset()
    with pytest.warns(UnsupportedPythonWarning, match="free-threaded build"):
        compiled = sapwood_tracer.compile(_fn, backend=counting_backend)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), _fn(x))
    assert counting_backend.graphs == []
    sapwood_tracer.reset()
