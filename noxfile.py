"""Sessions for the sapwood monorepo.

Run ``nox -l`` to list them. The two that a fresh machine needs are in the README:
``nox -s demo`` and ``nox -s tests``.

Torch on CPU machines always comes from the pinned CPU build (``torch==2.13.0``): an unpinned
``torch`` pulls gigabytes of CUDA wheels. The ``gpu`` session is different: it runs on the GPU
machine, which has no network, so it creates no virtual environment and uses that machine's own
python, torch and pytest, with the sapwood sources put on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
CPU_TORCH = "torch==2.13.0"

# Import name, package folder: the order is the dependency order (leaves first).
PACKAGES = {
    "sapwood_graph": ROOT / "packages" / "graph",
    "sapwood_cudagraph_trees": ROOT / "packages" / "cudagraph-trees",
    "sapwood_tracer": ROOT / "packages" / "tracer",
    "sapwood_backend": ROOT / "packages" / "backend",
}
# Third-party packages the sapwood packages import (torch comes separately, pinned).
RUNTIME_DEPS = ["sympy>=1.13", "bytecode>=0.16"]
TEST_DEPS = ["pytest>=8", "pytest-xdist>=3", "hypothesis>=6.100", "import-linter>=2.1"]
INTEGRATION_DEPS = ["transformers>=4.46,<6"]
# Third-party test-time deps that the GPU machine has no copy of travel as wheels in .whl/.

nox.options.sessions = ["tests", "lint", "contracts", "typecheck", "docs"]
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True


def _editable_sapwood_args() -> list[str]:
    """pip arguments that install every sapwood package and the meta-package, editable, alone."""
    args = ["--no-deps"]
    for folder in [*PACKAGES.values(), ROOT]:
        args += ["-e", str(folder)]
    return args


def _sources_pythonpath() -> str:
    """Every package's ``src/`` ahead of the existing PYTHONPATH (GPU machine: no installs)."""
    src_paths = [str(folder / "src") for folder in PACKAGES.values()] + [str(ROOT / "src")]
    return os.pathsep.join([*src_paths, os.environ.get("PYTHONPATH", "")])


def _install_stack_editable(session: nox.Session, *extra: str) -> None:
    """Install torch (CPU, pinned), the runtime deps and every sapwood package in editable mode.

    The sapwood packages go in with ``--no-deps``: their declared dependencies point at each
    other through local ``file://`` references, which would make pip install a second,
    non-editable copy. That the declared dependencies resolve on their own is what the
    ``demo`` session proves, by installing the meta-package the way a user would.
    """
    session.install(CPU_TORCH)
    session.install(*RUNTIME_DEPS, *extra)
    session.install(*_editable_sapwood_args())


def _test_paths() -> list[str]:
    paths = [str(folder / "tests") for folder in PACKAGES.values()]
    paths.append(str(ROOT / "integration-tests" / "cpu"))
    return [p for p in paths if Path(p).is_dir()]


@nox.session
def tests(session: nox.Session) -> None:
    """Every package's unit tests and the CPU integration tests, on two workers.

    GPU tests are collected and skipped with their reason. Pytest exits 5 when it ran no
    test, which fails this session.
    """
    _install_stack_editable(session, *TEST_DEPS, *INTEGRATION_DEPS)
    workers = session.env.get("SAPWOOD_TEST_WORKERS", "auto")
    session.run(
        "pytest",
        "-n",
        workers,
        "--dist",
        "loadfile",
        "-p",
        "no:cacheprovider",
        *_test_paths(),
        *session.posargs,
        env={"HYPOTHESIS_PROFILE": session.env.get("HYPOTHESIS_PROFILE", "ci")},
    )


@nox.session(venv_backend="none")
def gpu(session: nox.Session) -> None:
    """What the GPU machine runs, with that machine's own python and torch.

    Two pytest runs over every package's tests and the integration tests: first everything
    not marked ``gpu`` (the same suites as CI, here on that machine's Python 3.12 and torch),
    on several workers; then the ``gpu`` tests in one process, since they share the device.
    No network there, so nothing is installed from an index: wheels the machine lacks (nox,
    its dependencies) are carried in ``.whl/`` and installed to a private folder first, see
    ``docs/contributing.md``. Fails when no CUDA device is visible rather than skipping.
    """
    python = sys.executable
    session.run(
        python,
        "-c",
        "import sys, torch; ok = torch.cuda.is_available(); "
        "print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', ok, "
        "torch.cuda.get_device_name() if ok else ''); sys.exit(0 if ok else 3)",
    )
    paths = [str(folder / "tests") for folder in PACKAGES.values()]
    paths.append(str(ROOT / "integration-tests"))
    paths = [p for p in paths if Path(p).is_dir()]
    env = {"PYTHONPATH": _sources_pythonpath(), "SAPWOOD_REQUIRE_GPU": "1"}
    workers = session.env.get("SAPWOOD_TEST_WORKERS", "8")
    common = [python, "-m", "pytest", "-p", "no:cacheprovider"]
    targets = session.posargs or paths  # `nox -s gpu -- PATH -k NAME` narrows the run
    # A narrowed run may hold only GPU tests or none: then "no test ran" (exit 5) is fine there.
    codes = [0, 5] if session.posargs else [0]
    session.run(*common, "-m", "not gpu", "-n", workers, *targets, env=env, success_codes=codes)
    session.run(*common, "-m", "gpu", *targets, env=env, success_codes=codes)


@nox.session
def fuzz(session: nox.Session) -> None:
    """The differential fuzzer: generated programs compiled by sapwood, compared with eager.

    Runs 10,000 programs (run seed 0) on two worker processes, prints the counts (match,
    mismatch, crash, both-raise) and writes each failing program with a reproducer to
    ``fuzz-results/``. Arguments go to the fuzzer (``integration-tests/fuzz``), e.g.
    ``nox -s fuzz -- --count 500 --seed 3`` or ``nox -s fuzz -- --only 1234``.
    """
    _install_stack_editable(session)
    session.run(
        "python",
        "-m",
        "fuzz",
        "--out",
        str(ROOT / "fuzz-results"),
        *session.posargs,
        env={"PYTHONPATH": str(ROOT / "integration-tests")},
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: lint rules and formatting."""
    session.install("ruff==0.17.5")  # pinned: new releases add rules and formatting changes
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def contracts(session: nox.Session) -> None:
    """import-linter: the package directions of ARCHITECTURE.md.

    The packages are installed without their dependencies: import-linter reads imports from
    the source and never runs it, so torch is not needed here.
    """
    session.install("import-linter>=2.1")
    session.install(*_editable_sapwood_args())
    session.run("lint-imports", "--config", str(ROOT / "pyproject.toml"))


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over the public modules of every package."""
    _install_stack_editable(session, "mypy>=1.10")
    targets = [str(folder / "src") for folder in PACKAGES.values()] + [str(ROOT / "src")]
    session.run("mypy", *targets)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site; warnings are errors."""
    session.install("mkdocs>=1.6", "mkdocs-material>=9.5")
    session.run(
        "mkdocs",
        "build",
        "--strict",
        "--site-dir",
        str(ROOT / "site"),
        env={"NO_MKDOCS_2_WARNING": "1"},
    )


@nox.session
def demo(session: nox.Session) -> None:
    """Install the meta-package as a user would, then compile a small model and compare with eager.

    On a CPU machine torch comes from the pinned CPU build first, so that ``torch>=2.11`` in
    the packages' metadata is already satisfied and nothing pulls CUDA wheels.
    """
    session.install(CPU_TORCH)
    session.install(str(ROOT))
    session.run("python", str(ROOT / "examples" / "demo.py"), *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks that run on a CPU: each prints a table of ratios and writes JSON."""
    _install_stack_editable(session, *INTEGRATION_DEPS)
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    session.run("python", str(ROOT / "benchmarks" / "run.py"), "--out", str(out), *session.posargs)


@nox.session(venv_backend="none")
def bench_gpu(session: nox.Session) -> None:
    """The GPU benchmarks, on the GPU machine with its own torch (see ``gpu``)."""
    out = Path(os.environ.get("SAPWOOD_BENCH_OUT", str(ROOT / "bench-results")))
    out.mkdir(parents=True, exist_ok=True)
    session.run(
        sys.executable,
        str(ROOT / "benchmarks" / "run.py"),
        "--gpu",
        "--out",
        str(out),
        *session.posargs,
        env={"PYTHONPATH": _sources_pythonpath()},
    )


@nox.session
def build(session: nox.Session) -> None:
    """Build a wheel of every package and of the meta-package with hatch, into dist/."""
    session.install("hatch>=1.12")
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    for folder in [*PACKAGES.values(), ROOT]:
        with session.chdir(folder):
            session.run("hatch", "build", "-t", "wheel", str(dist))
