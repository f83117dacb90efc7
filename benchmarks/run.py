"""Run sapwood's benchmark programs and collect their JSON.

Each benchmark is a file ``benchmarks/bench_<name>.py`` that defines

* ``GPU: bool`` — whether it needs a CUDA device, and
* ``main(out: pathlib.Path) -> dict`` — runs its measurements in one process, prints a table
  of side-by-side figures (every figure next to the reference measured in the same run, as a
  ratio) and writes ``out/<name>.json``.

``python benchmarks/run.py`` runs the CPU ones, ``--gpu`` the GPU ones, ``-k WORD`` those whose
name contains WORD. Each benchmark runs in a process of its own, so none inherits the threads,
caches and heap another one left behind. A benchmark that fails is reported and makes the run
exit non-zero, but the others still run. ``summary.json`` in the output folder gathers every
result.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _child_result(out: Path, path: Path) -> Path:
    return out / f".{path.stem}.result.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="run the GPU benchmarks instead")
    parser.add_argument("--out", type=Path, default=HERE.parent / "bench-results")
    parser.add_argument("-k", dest="keyword", default="", help="only names containing this")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # the child of one benchmark
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.one is not None:
        result = _load(args.one).main(args.out)
        _child_result(args.out, args.one).write_text(json.dumps(result, indent=2, default=str))
        return 0

    summary: dict[str, object] = {}
    failed: list[str] = []
    ran = 0
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem.removeprefix("bench_")
        if args.keyword and args.keyword not in name:
            continue
        module = _load(path)
        if bool(getattr(module, "GPU", False)) != args.gpu:
            continue
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        child = _child_result(args.out, path)
        child.unlink(missing_ok=True)
        command = [sys.executable, str(Path(__file__).resolve()), "--one", str(path)]
        code = subprocess.call([*command, "--out", str(args.out)])
        if code == 0 and child.exists():
            summary[name] = json.loads(child.read_text())
            child.unlink()
            ran += 1
        else:
            print(f"{name} failed (exit status {code})", flush=True)
            failed.append(name)
        print(f"--- {name}: {time.perf_counter() - started:.1f} s", flush=True)

    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(f"\n{ran} benchmarks ran, {len(failed)} failed" + (f": {failed}" if failed else ""))
    if ran == 0 and not failed:
        print("no benchmark matched", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
