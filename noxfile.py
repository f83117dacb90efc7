"""Sessions for the sapwood monorepo.

Run ``nox -l`` to list them. The two that a fresh machine needs are in the README:
``nox -s demo`` and ``nox -s tests``.

Torch on CPU machines always comes from the pinned CPU build (``torch==2.13.0``): an unpinned
``torch`` pulls gigabytes of CUDA wheels. The ``gpu`` session is different: it runs on the GPU
machine, which has no network, so it creates no virtual environment and uses that machine's own
python, torch and pytest, with the sapwood sources put on ``PYTHONPATH``.

The sapwood packages require each other by version range (``sapwood-graph>=0.1,<0.2``). The
sessions install every package folder in one pip command, where pip takes the folders named on
the command line as the only candidates for those names and asks no index for them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import tomllib
import zipfile
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
# Distribution name of each package folder, the meta-package (the root) last.
DISTRIBUTIONS = {
    "sapwood-graph": PACKAGES["sapwood_graph"],
    "sapwood-cudagraph-trees": PACKAGES["sapwood_cudagraph_trees"],
    "sapwood-tracer": PACKAGES["sapwood_tracer"],
    "sapwood-backend": PACKAGES["sapwood_backend"],
    "sapwood": ROOT,
}


def _dependency_group(name: str) -> list[str]:
    """A PEP 735 dependency group of the root pyproject (shared with the hatch workspace)."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        return list(tomllib.load(file)["dependency-groups"][name])


TEST_DEPS = _dependency_group("test")
INTEGRATION_DEPS = _dependency_group("integration")
# Third-party test-time deps that the GPU machine has no copy of travel as wheels in .whl/.

nox.options.sessions = ["tests", "lint", "contracts", "typecheck", "docs"]
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True


def _editable_sapwood_args() -> list[str]:
    """pip arguments that install every sapwood package and the meta-package, editable.

    All five folders go in one command, so each ``sapwood-*`` requirement resolves to its folder.
    """
    args = []
    for folder in DISTRIBUTIONS.values():
        args += ["-e", str(folder)]
    return args


def _sources_pythonpath() -> str:
    """Every package's ``src/`` ahead of the existing PYTHONPATH (GPU machine: no installs)."""
    src_paths = [str(folder / "src") for folder in PACKAGES.values()] + [str(ROOT / "src")]
    return os.pathsep.join([*src_paths, os.environ.get("PYTHONPATH", "")])


def _install_stack_editable(session: nox.Session, *extra: str) -> None:
    """Install torch (CPU, pinned) first, then every sapwood package editable with its deps.

    Torch goes first so that the packages' ``torch>=2.11`` is already satisfied when pip
    resolves them and nothing pulls CUDA wheels.
    """
    session.install(CPU_TORCH)
    session.install(*extra, *_editable_sapwood_args())


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


def _tracer_stack_test_paths() -> list[str]:
    """The suites that exercise the tracer: its own, the graph's and the backend's tests and
    the CPU integration tests (the tree runtime's suites need no tracer and run on 3.11)."""
    names = ("sapwood_graph", "sapwood_tracer", "sapwood_backend")
    paths = [str(PACKAGES[name] / "tests") for name in names]
    paths.append(str(ROOT / "integration-tests" / "cpu"))
    return paths


@nox.session(name="tests-3.13", python="3.13")
def tests_3_13(session: nox.Session) -> None:
    """The tracer, graph and backend tests and the CPU integration tests on Python 3.13.

    torch for cp313 comes from the index as ``torch==2.13.0`` (the CUDA build, about 4.7 GB,
    which runs on the CPU); pip's cache keeps it between runs. With ``reuse_venv`` a second
    run installs nothing.
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
        *_tracer_stack_test_paths(),
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
def conformance(session: nox.Session) -> None:
    """CPython's regression tests with their bodies compiled by sapwood and by TorchDynamo.

    Runs every test method of the issue's list of CPython test files eagerly and compiled,
    one worker process per file and engine, prints the counts per file side by side and
    writes ``conformance-results/results.json``. Fails when sapwood has a wrong result or a
    crash. Arguments go to the harness (``integration-tests/conformance``), e.g.
    ``nox -s conformance -- --files test_dict --engine sapwood`` or
    ``nox -s conformance -- --no-fail --docs docs/conformance.md``.
    """
    _install_stack_editable(session)
    session.run(
        "python",
        "-m",
        "conformance",
        "--out",
        str(ROOT / "conformance-results"),
        *session.posargs,
        env={"PYTHONPATH": str(ROOT / "integration-tests")},
    )


@nox.session(name="torch-tests")
def torch_tests(session: nox.Session) -> None:
    """PyTorch's own Dynamo tests, with compilation routed to sapwood and to Dynamo.

    Runs the test files kept in ``integration-tests/torch_tests/upstream/`` once per engine,
    one worker process per file and engine, prints the counts per file side by side and
    writes ``torch-tests-results/results.json``. Fails when sapwood has a wrong result or a
    crash. Not part of CI. Arguments go to the harness, e.g.
    ``nox -s torch-tests -- --files test_dicts --engine sapwood -k test_dict_keys`` or
    ``nox -s torch-tests -- --jobs 2 --no-fail --docs docs/torch-tests.md``.
    """
    # expecttest: torch.testing._internal.common_utils imports it; transformers: the
    # ModelOutput tests (skipped without it).
    _install_stack_editable(session, "expecttest", *INTEGRATION_DEPS)
    session.run(
        "python",
        "-m",
        "torch_tests",
        "--out",
        str(ROOT / "torch-tests-results"),
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

    import-linter reads imports from the source and never runs it, so nothing is installed
    but the linter: the packages' ``src/`` folders are put on ``PYTHONPATH`` (no torch).
    """
    session.install("import-linter>=2.1")
    session.run(
        "lint-imports",
        "--config",
        str(ROOT / "pyproject.toml"),
        env={"PYTHONPATH": _sources_pythonpath()},
    )


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
    the packages' metadata is already satisfied and nothing pulls CUDA wheels. numpy goes in
    beside torch: torch does not require it but warns on every import without it. The
    meta-package and the four packages are then installed from their folders, not editable,
    in one pip command, as a user of a checkout installs them (docs/installation.md).
    """
    session.install(CPU_TORCH, "numpy")
    session.install(*[str(folder) for folder in DISTRIBUTIONS.values()])
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


def _build_distributions(session: nox.Session, out: Path) -> list[Path]:
    """Build an sdist of every package and of the meta-package, then a wheel from that sdist.

    ``python -m build`` builds the wheel from the unpacked sdist, so a file missing from an
    sdist fails here rather than for a user installing it. The build requirements that the
    pyproject files declare are installed once, into this session's environment, and the
    builds run there (``--no-isolation``; build still checks that each declared requirement is
    installed): ten isolated build environments would cost minutes of installs.
    """
    requires: set[str] = set()
    for folder in DISTRIBUTIONS.values():
        with (folder / "pyproject.toml").open("rb") as file:
            requires.update(tomllib.load(file)["build-system"]["requires"])
    session.install("build>=1.2", *sorted(requires))
    shutil.rmtree(out, ignore_errors=True)
    for folder in DISTRIBUTIONS.values():
        session.run("python", "-m", "build", "--no-isolation", "--outdir", str(out), str(folder))
    return sorted(out.iterdir())


@nox.session
def build(session: nox.Session) -> None:
    """Build the sdist and the wheel of every package and of the meta-package into dist/."""
    _build_distributions(session, ROOT / "dist")


def _metadata_of(artifact: Path) -> str:
    """The core metadata of a wheel (``*.dist-info/METADATA``) or an sdist (``PKG-INFO``)."""
    if artifact.suffix == ".whl":
        with zipfile.ZipFile(artifact) as wheel:
            name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
            return wheel.read(name).decode()
    with tarfile.open(artifact) as sdist:
        top = artifact.name.removesuffix(".tar.gz")
        member = sdist.extractfile(f"{top}/PKG-INFO")
        assert member is not None
        return member.read().decode()


def _requirements_of(metadata: str) -> list[str]:
    return [
        line.split(":", 1)[1].strip()
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
    ]


# What each fresh environment of `release_check` installs from the wheelhouse, the sapwood
# distributions that must come with it (no more, no fewer), and what it then imports.
RELEASE_INSTALLS = {
    "sapwood-cudagraph-trees": ({"sapwood-cudagraph-trees"}, ["sapwood_cudagraph_trees"]),
    "sapwood-tracer": ({"sapwood-tracer", "sapwood-graph"}, ["sapwood_tracer", "sapwood_graph"]),
    "sapwood": (set(DISTRIBUTIONS), ["sapwood", *PACKAGES]),
}

_INSTALLED_SAPWOOD = (
    "import importlib.metadata as m, json; "
    "print(json.dumps(sorted({d.metadata['Name'] for d in m.distributions() "
    "if d.metadata['Name'].startswith('sapwood')})))"
)
_IMPORT_FROM_VENV = (
    "import importlib, sys\n"
    "for name in sys.argv[1:]:\n"
    "    module = importlib.import_module(name)\n"
    "    assert module.__file__.startswith(sys.prefix), (name, module.__file__)\n"
    "    print(name, module.__version__, 'from', module.__file__)\n"
)


@nox.session
def release_check(session: nox.Session) -> None:
    """Build what a release uploads and install it as a user would, from a local wheelhouse.

    1. An sdist and a wheel of every package and of the meta-package; ``twine check --strict``.
    2. No core metadata field names a direct reference (``file:`` or ``name @ url``): an
       index rejects those, and on another machine they point at nothing. (The fields, not
       the description after them: a README may well show ``x @ w``.)
    3. A wheelhouse: those wheels and the third-party packages they require, torch aside.
    4. For each entry of ``RELEASE_INSTALLS``, a fresh virtual environment with torch already
       there, then the distribution installed with ``--no-index --find-links`` (the
       wheelhouse alone, no pip configuration), wheels only; the sapwood distributions it
       pulled in are exactly the expected ones, and each module imports from that environment.
       Torch, its pinned CPU build from the configured index, is installed once into a folder
       of its own that each environment sees through a ``.pth`` file: pip counts it as
       installed, and three copies of torch would cost minutes to write and to remove.

    Everything is made in a new folder of the system's temporary directory, removed when the
    session passes and kept (its path printed) when it fails.
    """
    tmp = Path(tempfile.mkdtemp(prefix="sapwood-release-check-"))
    try:
        _release_check_in(session, tmp)
    except BaseException:
        session.log(f"release_check: its files are kept in {tmp}")
        raise
    shutil.rmtree(tmp, ignore_errors=True)


def _release_check_in(session: nox.Session, tmp: Path) -> None:
    wheelhouse = tmp / "wheelhouse"
    artifacts = _build_distributions(session, wheelhouse)
    session.install("twine>=6.1")
    session.run("twine", "check", "--strict", *map(str, artifacts))

    third_party: set[str] = set()
    for artifact in artifacts:
        metadata = _metadata_of(artifact)
        fields = metadata.split("\n\n", 1)[0].splitlines()
        for marker in ("file:", "@ "):
            if lines := [line for line in fields if marker in line]:
                session.error(f"{artifact.name}: core metadata contains {marker!r}: {lines}")
        for requirement in _requirements_of(metadata):
            name = re.match(r"[A-Za-z0-9._-]+", requirement)
            assert name is not None, requirement
            if not name.group().startswith(("sapwood", "torch")):
                third_party.add(requirement)
    session.log(
        f"{len(artifacts)} artifacts, no direct references; third-party: {sorted(third_party)}"
    )
    session.run(
        "python",
        "-m",
        "pip",
        "download",
        "--quiet",
        "--dest",
        str(wheelhouse),
        *sorted(third_party),
    )

    torch_site = tmp / "torch"
    session.run(
        "python",
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-compile",  # modules are compiled once, by the first import
        "--target",
        str(torch_site),
        CPU_TORCH,
    )

    # The sapwood installs see the wheelhouse and nothing else: no index, and no pip
    # configuration file or PIP_* variable that adds one or a find-links folder.
    isolated_env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    isolated_env["PIP_CONFIG_FILE"] = os.devnull
    for distribution, (expected, modules) in RELEASE_INSTALLS.items():
        venv = tmp / f"venv-{distribution}"
        # virtualenv (a dependency of nox) seeds pip in a second; ``python -m venv`` runs
        # ensurepip, which takes several times as long.
        session.run(sys.executable, "-m", "virtualenv", "--quiet", str(venv), external=True)
        python = str(venv / "bin" / "python")
        purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
        site_packages = session.run(python, "-c", purelib, silent=True, external=True)
        site = Path(str(site_packages).strip().splitlines()[-1])
        (site / "preinstalled_torch.pth").write_text(f"{torch_site}\n")
        session.run(
            python,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--find-links",
            str(wheelhouse),
            "--only-binary",
            ":all:",
            distribution,
            env=isolated_env,
            include_outer_env=False,
            external=True,
        )
        with session.chdir(tmp):  # not the checkout: nothing may import from the sources
            installed = session.run(python, "-c", _INSTALLED_SAPWOOD, silent=True, external=True)
            pulled = set(json.loads(str(installed).strip().splitlines()[-1]))
            if pulled != expected:
                session.error(
                    f"{distribution} pulled {sorted(pulled)}, expected {sorted(expected)}"
                )
            session.log(f"{distribution}: installed {sorted(pulled)}")
            # No numpy here on purpose (no sapwood package requires it), so torch's warning
            # about it is silenced rather than met by installing numpy.
            quiet = ["-W", "ignore:Failed to initialize NumPy:UserWarning"]
            session.run(python, *quiet, "-c", _IMPORT_FROM_VENV, *modules, external=True)
