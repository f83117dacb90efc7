"""The packages can be published: they require each other by version range, never by path.

Each package declares the sapwood packages it needs as ``>=X.Y,<next breaking release`` (see
docs/contributing.md, "Releasing one package"). These tests read the pyproject files and the
version each package declares; `nox -s release_check` builds and installs the real artifacts.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {
    "sapwood-graph": ROOT / "packages" / "graph",
    "sapwood-tracer": ROOT / "packages" / "tracer",
    "sapwood-cudagraph-trees": ROOT / "packages" / "cudagraph-trees",
    "sapwood-backend": ROOT / "packages" / "backend",
    "sapwood": ROOT,
}
# The sapwood packages each one may import (ARCHITECTURE.md), and so must require.
ALLOWED = {
    "sapwood-graph": set(),
    "sapwood-cudagraph-trees": set(),
    "sapwood-tracer": {"sapwood-graph"},
    "sapwood-backend": {"sapwood-graph", "sapwood-tracer", "sapwood-cudagraph-trees"},
    "sapwood": {"sapwood-graph", "sapwood-tracer", "sapwood-cudagraph-trees", "sapwood-backend"},
}


def _pyproject(name: str) -> dict:
    with (FOLDERS[name] / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def _version(name: str) -> Version:
    """The version a package declares, read where hatch reads it (``tool.hatch.version``)."""
    path = FOLDERS[name] / _pyproject(name)["tool"]["hatch"]["version"]["path"]
    match = re.search(r'^__version__ = "([^"]+)"$', path.read_text(), re.MULTILINE)
    assert match, f"no __version__ in {path}"
    return Version(match.group(1))


def _next_breaking(version: Version) -> Version:
    """Semantic versioning: 0.Y.Z breaks at 0.(Y+1).0, X.Y.Z (X >= 1) at (X+1).0.0."""
    if version.major == 0:
        return Version(f"0.{version.minor + 1}.0")
    return Version(f"{version.major + 1}.0.0")


def _sapwood_requirements(name: str) -> dict[str, Requirement]:
    requirements = map(Requirement, _pyproject(name)["project"]["dependencies"])
    return {r.name: r for r in requirements if r.name.startswith("sapwood")}


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_no_dependency_is_a_direct_reference(name: str) -> None:
    project = _pyproject(name)
    for requirement in map(Requirement, project["project"]["dependencies"]):
        assert requirement.url is None, f"{name} requires {requirement} by URL"
    assert "metadata" not in project["tool"]["hatch"], "no allow-direct-references needed"


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_a_package_requires_exactly_the_sapwood_packages_it_may_import(name: str) -> None:
    assert set(_sapwood_requirements(name)) == ALLOWED[name]


@pytest.mark.parametrize(
    ("name", "dependency"),
    [
        (name, dependency)
        for name, needed in sorted(ALLOWED.items())
        for dependency in sorted(needed)
    ],
)
def test_a_range_admits_the_current_version_and_stops_before_the_next_breaking_one(
    name: str, dependency: str
) -> None:
    specifier = _sapwood_requirements(name)[dependency].specifier
    current = _version(dependency)
    assert specifier.contains(current), (
        f"{name} requires {dependency}{specifier}, which is {current}"
    )
    assert not specifier.contains(_next_breaking(current)), (
        f"{name} requires {dependency}{specifier}: the range must end before "
        f"{_next_breaking(current)}, which may break it"
    )


def test_the_hatch_workspace_holds_every_package_folder() -> None:
    environment = _pyproject("sapwood")["tool"]["hatch"]["envs"]["default"]
    members = {
        folder for pattern in environment["workspace"]["members"] for folder in ROOT.glob(pattern)
    }
    assert members == {folder for name, folder in FOLDERS.items() if name != "sapwood"}
    assert "sapwood" in environment["dependencies"]
    assert environment["sources"]["sapwood"] == "."
