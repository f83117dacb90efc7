"""Resume functions: the rest of a code object, started at an instruction with a given stack.

At a graph break the compiled entry runs the graph, runs the construct it could not capture,
and then continues the function *after* that construct in a generated **resume function**: a
copy of the original code with a short prologue that rebuilds the value stack from the resume
function's arguments, re-enters the ``with`` blocks that were open, and jumps to the target
instruction. Every other instruction of the original is kept (loops jump backwards into code
before the target), with its line numbers and exception table, so tracebacks name the user's
lines and ``try`` blocks still catch.

The resume function's parameters, in order: one per passed stack slot (named ``"stack <i>"``,
a name no Python source can spell, so no user local collides), then the live fast locals of
the original, by their own names, then its cell variables as cell objects (by their own
names; their MAKE_CELL is dropped, so the closures made before the break and the rest of the
function share the very same cells).

Invariants:

* The code depends only on ``(original code, target, layout)`` and is made once per key, so a
  loop that breaks on every iteration resumes in the *same* code object each time and reuses
  its cache entries.
* The prologue uses only instructions the tracer interprets, so a resume function is traced
  like any other function (the rebuilt iterator and context values are ordinary trace values).
* Instruction indices here are those of :func:`~sapwood_tracer._instructions.decode` (``dis``
  order without ``EXTENDED_ARG``), which is also the order of ``bytecode``'s ``Instr`` items.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Any, cast

from bytecode import Bytecode, CellVar, CompilerFlags, FreeVar, Instr, Label

from ..errors import Unsupported

__all__ = ["ResumeInfo", "ResumeLayout", "StackSlot", "resume_code", "resume_info"]

_PY311 = sys.version_info[:2] == (3, 11)
_EXCEPTION = "raised exception"  # a parameter name no Python source can spell


@dataclass(frozen=True, slots=True)
class StackSlot:
    """How one value-stack slot reaches the resume function.

    ``kind`` is ``"value"`` (passed as an argument), ``"null"`` (the NULL of a call sequence,
    pushed again), ``"iterator"`` (the remaining items are passed as a tuple and ``iter()``
    of it is pushed) or ``"context"`` (a ``with`` block's ``__exit__``: the context is made
    again from ``factory(*args)`` and entered).
    """

    kind: str
    factory: Any = None
    args: tuple[Any, ...] = ()

    @property
    def passed(self) -> bool:
        return self.kind in ("value", "iterator")


@dataclass(frozen=True, slots=True)
class ResumeLayout:
    """What a resume function receives: stack slots (bottom first), local and cell names."""

    stack: tuple[StackSlot, ...]
    local_names: tuple[str, ...]
    cell_names: tuple[str, ...]
    #: instead of continuing at the target, raise the last argument (an exception) there, so
    #: the original's exception table sends it to the user's handler (run eagerly only)
    raises: bool = False

    def parameter_count(self) -> int:
        passed = sum(1 for slot in self.stack if slot.passed)
        return passed + len(self.local_names) + len(self.cell_names) + self.raises


@dataclass(frozen=True, slots=True)
class ResumeInfo:
    """Where a resume code came from: its original code and the index shift of its body."""

    original: types.CodeType
    target: int
    #: cell variables passed in as cell objects (their MAKE_CELL is left out)
    cell_names: tuple[str, ...]
    #: index in the resume code = index in the original + shift (for body instructions)
    shift: int
    prologue_end: int


_codes: dict[tuple[types.CodeType, int, ResumeLayout], types.CodeType] = {}
_infos: dict[types.CodeType, ResumeInfo] = {}


def resume_info(code: types.CodeType) -> ResumeInfo | None:
    """The origin of ``code`` when it is a generated resume code, else None."""
    return _infos.get(code)


def _call(argc: int, location: Any) -> list[Instr]:
    if _PY311:
        return [Instr("PRECALL", argc, location=location), Instr("CALL", argc, location=location)]
    return [Instr("CALL", argc, location=location)]


def resume_code(original: types.CodeType, target: int, layout: ResumeLayout) -> types.CodeType:
    """The resume code of ``original`` at instruction ``target`` for ``layout`` (memoised)."""
    key = (original, target, layout)
    made = _codes.get(key)
    if made is not None:
        return made
    if original.co_flags & (0x20 | 0x80 | 0x100 | 0x200):  # generator / coroutine kinds
        raise Unsupported("a graph break inside a generator or coroutine")
    made = _build(original, target, layout)
    _codes[key] = made
    return made


def _build(original: types.CodeType, target: int, layout: ResumeLayout) -> types.CodeType:
    source = Bytecode.from_code(original, conserve_exception_block_stackdepth=True)
    items: list[Any] = list(source)
    instr_positions = [i for i, item in enumerate(items) if isinstance(item, Instr)]
    # The original's own prologue (COPY_FREE_VARS, MAKE_CELL, RESUME) is re-emitted first.
    resume_at = next(i for i, p in enumerate(instr_positions) if items[p].name == "RESUME")
    if target <= resume_at or target >= len(instr_positions):
        raise Unsupported(f"resuming at instruction {target} of {original.co_qualname}")
    head = items[: instr_positions[resume_at] + 1]
    # Live cells arrive as the cell objects themselves (closures made before the break share
    # them), so their MAKE_CELL, which would wrap them in a new cell, is left out.
    passed_cells = set(layout.cell_names)
    head = [
        item
        for item in head
        if not (
            isinstance(item, Instr)
            and item.name == "MAKE_CELL"
            and getattr(item.arg, "name", None) in passed_cells
        )
    ]
    body = items[instr_positions[resume_at] + 1 :]
    target_item = items[instr_positions[target]]
    location = target_item.location

    # a label right before the target instruction, after any TryBegin marker there, so a
    # raise placed at the label is inside the same try regions as the target
    target_label = Label()
    position = instr_positions[target] - (instr_positions[resume_at] + 1)
    landing: list[Any] = [target_label]
    if layout.raises:
        landing += [
            Instr("LOAD_FAST", _EXCEPTION, location=location),
            Instr("RAISE_VARARGS", 1, location=location),
        ]
    body[position:position] = landing

    prologue: list[Any] = []
    # live cell variables arrive as arguments of their own names; MAKE_CELL (in the head,
    # for every cellvar) wraps them. Locals and the passed stack slots are plain arguments.
    passed = 0
    for slot in layout.stack:
        if slot.kind == "null":
            prologue.append(Instr("PUSH_NULL", location=location))
        elif slot.kind == "value":
            prologue.append(Instr("LOAD_FAST", f"stack {passed}", location=location))
            passed += 1
        elif slot.kind == "iterator":
            prologue += [
                Instr("PUSH_NULL", location=location),
                Instr("LOAD_CONST", cast(Any, iter), location=location),
                Instr("LOAD_FAST", f"stack {passed}", location=location),
                *_call(1, location),
            ]
            passed += 1
        elif slot.kind == "context":
            prologue += [
                Instr("PUSH_NULL", location=location),
                Instr("LOAD_CONST", slot.factory, location=location),
                *[Instr("LOAD_CONST", a, location=location) for a in slot.args],
                *_call(len(slot.args), location),
                Instr("BEFORE_WITH", location=location),
                Instr("POP_TOP", location=location),
            ]
        else:  # pragma: no cover - layouts are made by this package
            raise AssertionError(slot.kind)
    prologue.append(Instr("JUMP_FORWARD", target_label, location=location))

    out = Bytecode([*head, *prologue, *body])
    out.name = original.co_name
    out.qualname = f"{original.co_qualname} (resume at line {target_item.lineno})"
    out.filename = original.co_filename
    out.first_lineno = original.co_firstlineno
    out.docstring = None
    out.freevars = list(original.co_freevars)
    out.cellvars = list(original.co_cellvars)
    stack_names = [f"stack {i}" for i in range(passed)]
    out.argnames = [*stack_names, *layout.local_names, *layout.cell_names]
    if layout.raises:
        out.argnames.append(_EXCEPTION)
    out.argcount = len(out.argnames)
    out.posonlyargcount = 0
    out.kwonlyargcount = 0
    # plain function flags: no varargs/varkw any more (those are ordinary arguments now)
    out.flags = CompilerFlags(original.co_flags & ~(0x04 | 0x08))
    _relabel_cells(out, set(original.co_cellvars), set(original.co_freevars))
    # The exception table keeps the original's handler depths (the prologue rebuilds the exact
    # stack), and the stack bound is the original's plus what the prologue pushes on top.
    stacksize = original.co_stacksize + len(layout.stack) + 4
    code = out.to_code(stacksize=stacksize, compute_exception_stack_depths=False)
    head_instrs = sum(1 for item in head if isinstance(item, Instr))
    prologue_instrs = sum(1 for item in prologue if isinstance(item, Instr))
    # body instruction k of the original is k + shift here (the head may have lost MAKE_CELLs)
    shift = head_instrs + prologue_instrs - (resume_at + 1)
    _check_body(original, code, resume_at, shift, layout.raises, target)
    if not layout.raises:  # (a raising resume code runs eagerly only, it is never traced)
        _infos[code] = ResumeInfo(
            original, target, layout.cell_names, shift, head_instrs + prologue_instrs
        )
    return code


def _check_body(
    original: types.CodeType,
    code: types.CodeType,
    resume_at: int,
    shift: int,
    raises: bool,
    target: int,
) -> None:
    """Every instruction of the original's body sits ``shift`` further in the resume code
    (a mismatch would run the wrong instructions: refuse rather than risk it)."""
    from ..interpreter.instructions import decode

    before, after = decode(original), decode(code)
    for k in range(resume_at + 1, len(before)):
        moved = k + shift + (2 if raises and k >= target else 0)
        if moved >= len(after) or after[moved].opname != before[k].opname:
            raise Unsupported(
                f"a resume function for {original.co_qualname} (instruction {k} did not line up)"
            )


def _relabel_cells(bc: Bytecode, cellvars: set[str], freevars: set[str]) -> None:
    """Cell/free variable arguments keep their kind after the argument list changed."""
    for item in bc:
        if isinstance(item, Instr) and isinstance(item.arg, (CellVar, FreeVar)):
            name = item.arg.name
            if name in cellvars:
                item.arg = CellVar(name)
            elif name in freevars:
                item.arg = FreeVar(name)
