"""The backend registry: names, decorators, errors and entry-point plugins."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator

import pytest
import torch

import sapwood_backend
from sapwood_backend import registry


@pytest.fixture
def clean_registry() -> Iterator[None]:
    saved = dict(registry._registered)
    yield
    registry._registered.clear()
    registry._registered.update(saved)
    registry._forget_entry_points()


def _identity_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    return gm.forward


def test_builtin_backends_are_listed() -> None:
    assert {"eager", "aot_eager", "inductor", "cudagraphs"} <= set(sapwood_backend.list_backends())


def test_register_as_bare_decorator_uses_the_function_name(clean_registry: None) -> None:
    @sapwood_backend.register_backend
    def my_backend(gm, example_inputs):
        return gm.forward

    assert sapwood_backend.lookup_backend("my_backend") is my_backend
    assert "my_backend" in sapwood_backend.list_backends()


def test_register_with_an_explicit_name(clean_registry: None) -> None:
    sapwood_backend.register_backend(_identity_backend, name="renamed")
    assert sapwood_backend.lookup_backend("renamed") is _identity_backend


def test_registering_a_taken_name_is_an_error(clean_registry: None) -> None:
    with pytest.raises(sapwood_backend.BackendError, match="already registered"):
        sapwood_backend.register_backend(_identity_backend, name="eager")


def test_replace_overrides_a_taken_name(clean_registry: None) -> None:
    sapwood_backend.register_backend(_identity_backend, name="eager", replace=True)
    assert sapwood_backend.lookup_backend("eager") is _identity_backend


def test_registering_something_not_callable_is_an_error(clean_registry: None) -> None:
    with pytest.raises(sapwood_backend.BackendError, match="callable"):
        sapwood_backend.register_backend(42, name="number")  # type: ignore[call-overload]


@pytest.mark.parametrize("bad_name", ["", "has space", "a-b", 3])
def test_a_backend_name_must_be_identifier_like(clean_registry: None, bad_name: object) -> None:
    with pytest.raises(sapwood_backend.BackendError, match="name"):
        sapwood_backend.register_backend(_identity_backend, name=bad_name)  # type: ignore[arg-type]


def test_a_callable_is_its_own_backend() -> None:
    assert sapwood_backend.lookup_backend(_identity_backend) is _identity_backend


def test_unknown_name_lists_known_backends_and_suggests_a_close_one() -> None:
    with pytest.raises(sapwood_backend.UnknownBackendError) as caught:
        sapwood_backend.lookup_backend("indcutor")
    message = str(caught.value)
    assert "'indcutor'" in message
    assert "Did you mean 'inductor'" in message
    assert "aot_eager" in message
    assert isinstance(caught.value, ValueError)


def test_a_backend_that_is_neither_name_nor_callable_is_an_error() -> None:
    with pytest.raises(sapwood_backend.BackendError, match="name or a callable"):
        sapwood_backend.lookup_backend(3.5)  # type: ignore[arg-type]


class _FakeEntryPoint:
    def __init__(self, name: str, value: str, loader) -> None:
        self.name = name
        self.value = value
        self._loader = loader

    def load(self):
        return self._loader()


def _install_entry_points(monkeypatch: pytest.MonkeyPatch, points: list[_FakeEntryPoint]) -> None:
    def fake_entry_points(*, group: str):
        assert group == sapwood_backend.ENTRY_POINT_GROUP
        return points

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    registry._forget_entry_points()


def test_entry_point_backends_are_listed_and_loaded_on_first_use(
    clean_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[str] = []

    def load():
        loads.append("plugin")
        return _identity_backend

    _install_entry_points(monkeypatch, [_FakeEntryPoint("plugin", "pkg.mod:fn", load)])
    assert "plugin" in sapwood_backend.list_backends()
    assert loads == []
    assert sapwood_backend.lookup_backend("plugin") is _identity_backend
    assert sapwood_backend.lookup_backend("plugin") is _identity_backend
    assert loads == ["plugin"]


def test_a_broken_plugin_is_reported_by_name_and_spares_the_others(
    clean_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode():
        raise ImportError("no module named 'missing_dep'")

    _install_entry_points(
        monkeypatch,
        [
            _FakeEntryPoint("broken", "broken_pkg:backend", explode),
            _FakeEntryPoint("fine", "fine_pkg:backend", lambda: _identity_backend),
        ],
    )
    with pytest.raises(sapwood_backend.BackendError, match=r"broken_pkg:backend.*missing_dep"):
        sapwood_backend.lookup_backend("broken")
    assert sapwood_backend.lookup_backend("fine") is _identity_backend
    assert sapwood_backend.lookup_backend("eager") is not None


def test_torch_compiles_backend_names_are_accepted(clean_registry: None) -> None:
    import torch

    import sapwood_tracer
    from sapwood_backend import lookup_backend

    backend = lookup_backend("aot_eager_decomp_partition")
    from torch._dynamo.backends.registry import lookup_backend as torch_lookup

    assert backend is torch_lookup("aot_eager_decomp_partition")

    def fn(x):
        return (x.sin() * 2).sum()

    x = torch.ones(3, requires_grad=True)
    compiled = sapwood_tracer.compile(fn, backend=backend)
    compiled(x).backward()
    torch.testing.assert_close(x.grad, 2 * torch.ones(3).cos())
