"""The meta-package's one public surface: what issue #7 lists, each documented for users."""

from __future__ import annotations

import inspect
import pathlib

import torch

import sapwood

EXPECTED = {
    "compile",
    "reset",
    "explain",
    "disable",
    "graph_break",
    "allow_in_graph",
    "disallow_in_graph",
    "mark_dynamic",
    "mark_step_begin",
    "register_backend",
    "list_backends",
}


def test_every_listed_name_is_exported_and_callable() -> None:
    missing = EXPECTED - set(sapwood.__all__)
    assert not missing, missing
    for name in sapwood.__all__:
        if name != "__version__":
            assert callable(getattr(sapwood, name)), name


def test_every_exported_name_is_in_the_users_docs() -> None:
    docs = (pathlib.Path(__file__).parents[2] / "docs" / "index.md").read_text()
    for name in sapwood.__all__:
        if name != "__version__":
            assert f"`{name}" in docs or f"{name}`" in docs or f", `{name}`" in docs, name


def test_compile_has_torch_compiles_parameters_and_defaults() -> None:
    ours = inspect.signature(sapwood.compile).parameters
    theirs = inspect.signature(torch.compile).parameters
    for name in ("fullgraph", "dynamic", "backend", "mode", "options", "disable"):
        assert name in ours, name
    for name in ("fullgraph", "dynamic", "mode", "options", "disable"):
        assert ours[name].default == theirs[name].default, name
    # torch 2.11 spells the default backend "inductor"; newer torch says None, meaning the same
    assert ours["backend"].default == "inductor"
    assert theirs["backend"].default in ("inductor", None)
