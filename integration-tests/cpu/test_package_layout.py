"""The shape of every package's source: no import cycle between its modules, and no module
so long that it is really two.

Read from the source with :mod:`ast`, every import counts: module level, inside functions,
and under ``if TYPE_CHECKING:`` (a type-only import is still a dependency a reader has to
follow). A package's ``__init__`` counts as a module: ``from . import x`` in a submodule is an
edge to ``x`` when ``x`` is a module, else to the package itself. The check needs nothing but
the sources, so it runs everywhere the tests run (import-linter's contracts check the
directions between layers on top of this; see ``test_import_contracts.py``).

Module length: STYLE.md's rule of thumb says a module past about 600 lines is probably two;
the check holds every source module to that.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "sapwood_graph": ROOT / "packages/graph/src/sapwood_graph",
    "sapwood_tracer": ROOT / "packages/tracer/src/sapwood_tracer",
    "sapwood_cudagraph_trees": ROOT / "packages/cudagraph-trees/src/sapwood_cudagraph_trees",
    "sapwood_backend": ROOT / "packages/backend/src/sapwood_backend",
    "sapwood": ROOT / "src/sapwood",
}


def _modules(folder: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's ``__init__``)."""
    out = {}
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        out[".".join(parts)] = (path, is_package)
    return out


def import_graph(folder: Path) -> dict[str, set[str]]:
    """Each module of the package at ``folder`` -> the modules of that package it imports."""
    modules = _modules(folder)
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    submodule = f"{target}.{alias.name}"
                    targets.append(submodule if submodule in modules else target)
            edges[name].update(t for t in targets if t in modules and t != name)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found is not None:
                    return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(edges):
        if module not in state:
            found = visit(module)
            if found is not None:
                return found
    return None


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_the_package_has_no_import_cycle(package: str) -> None:
    cycle = find_cycle(import_graph(PACKAGES[package]))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


MAX_MODULE_LINES = 600


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_source_module_is_longer_than_600_lines(package: str) -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path, _ in _modules(PACKAGES[package]).values()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"split these modules (lines): {long}"


def test_a_planted_cycle_is_found(tmp_path: Path) -> None:
    package = tmp_path / "planted"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "__init__.py").write_text("")
    (package / "a.py").write_text("from .inner.b import thing\n")
    (package / "inner" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import a\nthing = 1\n"
    )
    assert find_cycle(import_graph(package)) == ["planted.a", "planted.inner.b", "planted.a"]


def test_imports_inside_functions_count(tmp_path: Path) -> None:
    package = tmp_path / "planted"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("import planted.b\n")
    (package / "b.py").write_text("def late():\n    from . import a\n")
    assert find_cycle(import_graph(package)) == ["planted.a", "planted.b", "planted.a"]
