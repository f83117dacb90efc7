"""Run sapwood's benchmark programs and collect their JSON.

Each benchmark is a file ``benchmarks/bench_<name>.py`` that defines

* ``GPU: bool`` — whether it needs a CUDA device, and
* ``main(out: pathlib.Path) -> dict`` — runs its measurements in one process, prints a table
  of side-by-side figures (every figure next to the reference measured in the same run, as a
  ratio) and writes ``out/<name>.json``.

``python benchmarks/run.py`` runs the CPU ones, ``--gpu`` the GPU ones, ``-k WORD`` those whose
name contains WORD. A benchmark that raises is reported and makes the run exit non-zero, but
the others still run. ``summary.json`` in the output folder gathers every result.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).parent


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="run the GPU benchmarks instead")
    parser.add_argument("--out", type=Path, default=HERE.parent / "bench-results")
    parser.add_argument("-k", dest="keyword", default="", help="only names containing this")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

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
        try:
            summary[name] = module.main(args.out)
            ran += 1
        except Exception:
            traceback.print_exc()
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
