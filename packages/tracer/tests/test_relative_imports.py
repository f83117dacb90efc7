"""Relative imports inside a compiled function (``from .utils import scale``).

Library code imports lazily inside functions to avoid import cycles; Transformers does it in
its output-capturing hooks. A module already imported is a lookup, traced like an absolute
import of it; a first import (which runs the module's code) or a submodule not yet imported
stays a graph break, and the result is eager's either way.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import sapwood


@pytest.fixture
def package(tmp_path: Path) -> Iterator[str]:
    name = f"sapwood_relpkg_{abs(hash(tmp_path)) % 10**8}"
    root = tmp_path / name
    (root / "inner").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "helpers.py").write_text("FACTOR = 3\n\ndef scale(x):\n    return x * FACTOR\n")
    (root / "lazy.py").write_text("def shift(x):\n    return x + 1\n")
    (root / "inner" / "__init__.py").write_text("")
    (root / "inner" / "ops.py").write_text(
        textwrap.dedent(
            """
            def same_level(x):
                from .. import helpers
                return helpers.scale(x).sin()

            def from_parent(x):
                from ..helpers import scale, FACTOR
                return scale(x) + FACTOR

            def own_package(x):
                from . import sibling
                return sibling.double(x)

            def not_yet_imported(x):
                from ..lazy import shift
                return shift(x).cos()
            """
        )
    )
    (root / "inner" / "sibling.py").write_text("def double(x):\n    return x * 2\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module(f"{name}.helpers")
        importlib.import_module(f"{name}.inner.sibling")
        yield name
    finally:
        sys.path.remove(str(tmp_path))
        for mod in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            del sys.modules[mod]


@pytest.mark.parametrize("fn_name", ["same_level", "from_parent", "own_package"])
def test_relative_import_of_an_imported_module_is_one_graph(package: str, fn_name: str) -> None:
    fn = getattr(importlib.import_module(f"{package}.inner.ops"), fn_name)
    x = torch.randn(4)
    report = sapwood.explain(fn)(x)
    assert report.graph_count == 1
    assert not report.breaks and not report.eager_functions
    torch.testing.assert_close(sapwood.compile(fn, backend="eager")(x), fn(x))


def test_relative_import_of_a_module_not_yet_imported_breaks(package: str) -> None:
    ops = importlib.import_module(f"{package}.inner.ops")
    x = torch.randn(4)
    assert f"{package}.lazy" not in sys.modules
    report = sapwood.explain(ops.not_yet_imported)(x)
    reasons = [b.reason for b in report.breaks] + [r for _, r in report.eager_functions]
    assert any("for the first time" in r for r in reasons), reasons
    # (explain ran it once, eagerly for the import: the module is imported now)
    torch.testing.assert_close(
        sapwood.compile(ops.not_yet_imported, backend="eager")(x), ops.not_yet_imported(x)
    )
