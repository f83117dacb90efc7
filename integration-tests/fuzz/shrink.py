"""Shrinks a failing program to a few lines that fail the same way.

``python -m fuzz.shrink SEED|REPRO.py ...`` regenerates each program (or loads ``PROGRAM``
from a reproducer the runner wrote, which survives changes to the generator), then tries
smaller versions and keeps one whenever the oracle still gives the same verdict kind and
failure signature: dropping a call, dropping a statement (with its block), replacing a
compound statement (``if``, ``for``, ``while``, ``with``, ``try``) by its first block, and
replacing a ``return`` value by ``None``. The inputs, ``Box`` and the module's ``__init__``
are left alone. Prints the smallest program and its calls.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from . import oracle
from .generator import Program, generate
from .runner import _quiet

__all__ = ["shrink"]

_CLAUSES = ("else:", "elif ", "except", "finally:")
_COMPOUND = ("if ", "for ", "while ", "with ", "try:")
_KEPT_DEFS = ("def make_inputs", "def __init__", "class Box")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _end_of(lines: list[str], start: int) -> int:
    """One past the last line of the statement starting at ``start`` (clauses included)."""
    indent = _indent(lines[start])
    end = start + 1
    while end < len(lines):
        line = lines[end]
        clause = _indent(line) == indent and line.lstrip().startswith(_CLAUSES)
        if line.strip() and _indent(line) <= indent and not clause:
            break
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return end


def _protected(lines: list[str]) -> set[int]:
    protected: set[int] = set()
    for i, line in enumerate(lines):
        if line.lstrip().startswith(_KEPT_DEFS):
            protected.update(range(i, _end_of(lines, i)))
        if line.lstrip().startswith(("def forward", "def program", "class ")) or line.startswith(
            ("import", "G_", "#")
        ):
            protected.add(i)
    return protected


def _candidates(source: str) -> Iterator[str]:
    lines = source.split("\n")
    protected = _protected(lines)
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if i in protected or not stripped or stripped.startswith(_CLAUSES):
            continue
        end = _end_of(lines, i)
        if stripped.startswith("@"):
            end = _end_of(lines, i + 1)
        yield "\n".join(lines[:i] + lines[end:])
        yield "\n".join([*lines[:i], " " * _indent(line) + "pass", *lines[end:]])
        if stripped.startswith(_COMPOUND):
            body_end = i + 1
            while body_end < end and not (
                _indent(lines[body_end]) == _indent(line)
                and lines[body_end].lstrip().startswith(_CLAUSES)
            ):
                body_end += 1
            shift = _indent(lines[i + 1]) - _indent(line)
            body = [x[shift:] if x.strip() else x for x in lines[i + 1 : body_end]]
            yield "\n".join(lines[:i] + body + lines[end:])
        if stripped.startswith("return ") and stripped != "return None":
            yield "\n".join([*lines[:i], " " * _indent(line) + "return None", *lines[i + 1 :]])


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def shrink(program: Program, log: Callable[[str], None] = lambda _: None) -> Program:
    """The smallest program found that fails like ``program``."""
    target = oracle.run_program(program)
    if target.kind in (oracle.MATCH, oracle.BOTH_RAISE):
        return program

    def same(candidate: Program) -> bool:
        try:
            verdict = oracle.run_program(candidate)
        except Exception:
            return False
        return verdict.kind == target.kind and verdict.signature == target.signature

    current = program
    progress = True
    while progress:
        progress = False
        for drop in range(len(current.calls)):
            if len(current.calls) > 1:
                calls = current.calls[:drop] + current.calls[drop + 1 :]
                candidate = replace(current, calls=calls)
                if same(candidate):
                    current, progress = candidate, True
                    log(f"{len(current.calls)} calls")
                    break
        for source in _candidates(current.source):
            if len(source) < len(current.source) and _parses(source):
                candidate = replace(current, source=source)
                if same(candidate):
                    current, progress = candidate, True
                    log(f"{current.source.count(chr(10))} lines")
                    break
    return current


def _load(name: str) -> Program:
    if name.isdigit():
        return generate(int(name))
    namespace: dict[str, object] = {"__name__": "fuzz_reproducer"}
    exec(compile(Path(name).read_text(), name, "exec"), namespace)
    program = namespace["PROGRAM"]
    assert isinstance(program, Program)
    return program


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz.shrink", description=__doc__)
    parser.add_argument("programs", nargs="+", help="program seeds or reproducer files")
    args = parser.parse_args(argv)
    _quiet()
    for name in args.programs:
        program = _load(name)
        small = shrink(program, log=lambda m: print(f"  ... {m}", file=sys.stderr))
        verdict = oracle.run_program(small)
        print(f"# ---- program {program.seed}: {verdict.kind}: {verdict.reason}")
        print(f"# calls: {small.calls}")
        print(small.source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
