"""Modes and options: which combinations resolve, and the errors for the others."""

from __future__ import annotations

import pytest

import sapwood_backend
from sapwood_backend import InvalidModeError, resolve_backend


def test_no_mode_gives_the_registered_backend() -> None:
    assert resolve_backend("eager") is sapwood_backend.lookup_backend("eager")
    assert resolve_backend("inductor") is sapwood_backend.lookup_backend("inductor")
    assert resolve_backend("inductor", mode="default") is sapwood_backend.lookup_backend("inductor")


def test_an_unknown_mode_names_the_known_ones() -> None:
    with pytest.raises(InvalidModeError, match=r"unknown mode 'fastest'.*'reduce-overhead'"):
        resolve_backend("inductor", mode="fastest")


def test_mode_and_options_together_are_refused() -> None:
    with pytest.raises(InvalidModeError, match="either mode or options"):
        resolve_backend("inductor", mode="max-autotune", options={"max_autotune": True})


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_mode_with_a_non_inductor_backend_is_refused(backend: str) -> None:
    with pytest.raises(InvalidModeError, match=f"inductor' backend only, not to '{backend}'"):
        resolve_backend(backend, mode="max-autotune")


def test_options_with_a_non_inductor_backend_are_refused() -> None:
    with pytest.raises(InvalidModeError, match="inductor' backend only"):
        resolve_backend("eager", options={"max_autotune": True})


def test_an_unknown_inductor_option_is_named() -> None:
    with pytest.raises(InvalidModeError, match="'max_autotoon'"):
        resolve_backend("inductor", options={"max_autotoon": True})


def test_known_inductor_options_resolve_to_a_backend() -> None:
    backend = resolve_backend("inductor", options={"max_autotune": False})
    assert callable(backend)
    assert backend is not sapwood_backend.lookup_backend("inductor")


def test_unknown_backend_name_raises_unknown_backend_error() -> None:
    with pytest.raises(sapwood_backend.UnknownBackendError):
        resolve_backend("nope")


def test_equal_settings_give_one_backend_and_other_settings_another() -> None:
    # (the tracer serves a call only with cache entries of its own backend: equal settings
    # must share them, other settings must not)
    assert resolve_backend("inductor", mode="max-autotune") is resolve_backend(
        "inductor", mode="max-autotune"
    )
    assert resolve_backend("inductor", options={"max_autotune": True}) is resolve_backend(
        "inductor", options={"max_autotune": True}
    )
    assert resolve_backend("inductor", mode="reduce-overhead") is not resolve_backend(
        "inductor", mode="default"
    )
    assert resolve_backend("inductor", mode="max-autotune") is not resolve_backend(
        "inductor", mode="max-autotune-no-cudagraphs"
    )
