"""The import directions of ARCHITECTURE.md are enforced, not just written down.

Each test copies the packages' sources to a temporary folder, optionally plants one import,
and runs import-linter with the repository's own contracts on the copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "packages"
SOURCES = {
    "sapwood_graph": PACKAGES / "graph/src/sapwood_graph",
    "sapwood_tracer": PACKAGES / "tracer/src/sapwood_tracer",
    "sapwood_cudagraph_trees": PACKAGES / "cudagraph-trees/src/sapwood_cudagraph_trees",
    "sapwood_backend": PACKAGES / "backend/src/sapwood_backend",
    "sapwood": ROOT / "src/sapwood",
}

pytest.importorskip("importlinter", reason="import-linter is installed by the test session")


def _lint_copy(tmp_path: Path, planted: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for name, folder in SOURCES.items():
        shutil.copytree(folder, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for relative, text in planted.items():
        (tmp_path / relative).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_repository_keeps_every_contract(tmp_path: Path) -> None:
    result = _lint_copy(tmp_path, {})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("planted_file", "forbidden"),
    [
        ("sapwood_graph/_planted.py", "sapwood_tracer"),
        ("sapwood_cudagraph_trees/_planted.py", "sapwood_graph"),
        ("sapwood_tracer/_planted.py", "sapwood_backend"),
        ("sapwood_tracer/_planted.py", "sapwood_cudagraph_trees"),
        ("sapwood_backend/_planted.py", "sapwood"),
    ],
)
def test_a_forbidden_import_breaks_a_contract(
    tmp_path: Path, planted_file: str, forbidden: str
) -> None:
    result = _lint_copy(tmp_path, {planted_file: f"import {forbidden}\n"})
    assert result.returncode != 0
    assert f"is not allowed to import {forbidden}" in result.stdout


def test_the_tracer_may_import_the_graph_library(tmp_path: Path) -> None:
    result = _lint_copy(tmp_path, {"sapwood_tracer/_planted.py": "import sapwood_graph\n"})
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize(
    ("planted_file", "upward"),
    [
        ("sapwood_tracer/values/_planted.py", "sapwood_tracer.interpreter.session"),
        ("sapwood_tracer/values/_planted.py", "sapwood_tracer.pymodel.builtins"),
        ("sapwood_tracer/pymodel/_planted.py", "sapwood_tracer.interpreter.frame"),
        ("sapwood_tracer/interpreter/_planted.py", "sapwood_tracer.breaks.exits"),
        ("sapwood_tracer/guards/_planted.py", "sapwood_tracer.values.base"),
        ("sapwood_tracer/context.py", "sapwood_tracer.values.base"),
    ],
)
def test_an_upward_import_inside_the_tracer_breaks_its_layers(
    tmp_path: Path, planted_file: str, upward: str
) -> None:
    existing = SOURCES["sapwood_tracer"] / Path(planted_file).relative_to("sapwood_tracer")
    text = existing.read_text() if existing.exists() else ""
    result = _lint_copy(tmp_path, {planted_file: text + f"\nimport {upward}\n"})
    assert result.returncode != 0
    assert "sapwood-tracer's layers" in result.stdout
    assert "BROKEN" in result.stdout


def test_a_downward_import_inside_the_tracer_keeps_its_layers(tmp_path: Path) -> None:
    planted = {"sapwood_tracer/interpreter/_planted.py": "import sapwood_tracer.values.base\n"}
    result = _lint_copy(tmp_path, planted)
    assert result.returncode == 0, result.stdout
