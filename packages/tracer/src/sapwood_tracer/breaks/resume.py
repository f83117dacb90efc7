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
  like any other function (the re-entered contexts are ordinary trace values; an iterator
  arrives as a real iterator object, an input like any other).
* Instruction indices here are those of
  :func:`~sapwood_tracer.interpreter.instructions.decode` (``dis`` order without
  ``EXTENDED_ARG``), which is also the order of ``bytecode``'s ``Instr`` items. A resume code
  records, for each of its instructions, the original's index (:class:`ResumeInfo`): the
  body keeps the original's order, but 3.13's paired local accesses are split in two.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bytecode import Bytecode, CellVar, CompilerFlags, FreeVar, Instr, Label

from ..errors import Unsupported
from .reachable import drop_unreachable

__all__ = [
    "ResumeInfo",
    "ResumeLayout",
    "StackSlot",
    "resume_code",
    "resume_info",
    "super_self",
]

_PY311 = sys.version_info[:2] == (3, 11)
#: 3.13 puts the NULL of a call sequence above the callable (3.11/3.12: below it)
_NULL_ABOVE_CALLABLE = sys.version_info >= (3, 13)
_EXCEPTION = "raised exception"  # a parameter name no Python source can spell


@dataclass(frozen=True, slots=True)
class StackSlot:
    """How one value-stack slot reaches the resume function.

    ``kind`` is ``"value"`` (passed as an argument; an iterator too, as a real iterator
    object), ``"null"`` (the NULL of a call sequence, pushed again) or ``"context"`` (a
    ``with`` block's ``__exit__``: the context is made again from ``factory(*args)`` and
    entered).
    """

    kind: str
    factory: Any = None
    args: tuple[Any, ...] = ()

    @property
    def passed(self) -> int:
        """How many arguments of the resume function this slot takes."""
        return 1 if self.kind == "value" else 0


@dataclass(frozen=True, slots=True)
class ResumeLayout:
    """What a resume function receives: stack slots (bottom first), local and cell names."""

    stack: tuple[StackSlot, ...]
    local_names: tuple[str, ...]
    cell_names: tuple[str, ...]
    #: instead of continuing at the target, raise the last argument (an exception) there, so
    #: the original's exception table sends it to the user's handler (run eagerly only)
    raises: bool = False
    #: locals holding iterators of their own, made by the prologue: ``(name, recipe)``, a
    #: nested ``("call", fn, parts)`` whose ``("value",)`` parts are passed as arguments
    local_iterators: tuple[tuple[str, Any], ...] = ()
    #: the first of ``local_names`` is the function's first parameter (before the stack
    #: slots): zero-argument ``super()`` reads the frame's first local (see :func:`super_self`)
    leading: bool = False

    def arguments(self, passed: list[Any], plain_locals: list[Any], cells: list[Any]) -> list[Any]:
        """The resume function's arguments in parameter order, from the values passed for
        the stack (and remade iterators), the plain locals and the cells."""
        if self.leading:
            return [plain_locals[0], *passed, *plain_locals[1:], *cells]
        return [*passed, *plain_locals, *cells]

    def parameter_count(self) -> int:
        passed = sum(slot.passed for slot in self.stack)
        passed += sum(_passed_in(how) for _, how in self.local_iterators)
        return passed + len(self.local_names) + len(self.cell_names) + self.raises


@dataclass(frozen=True, slots=True)
class ResumeInfo:
    """Where a resume code came from: its original code, and where each of its instructions
    was in the original."""

    original: types.CodeType
    target: int
    #: cell variables passed in as cell objects (their MAKE_CELL is left out)
    cell_names: tuple[str, ...]
    #: per instruction of the resume code, its index in the original; None for what the
    #: resume code added (the prologue, a raise at the target, the second half of a split
    #: superinstruction)
    origins: tuple[int | None, ...]
    prologue_end: int
    #: the parameter holding the item a ``FOR_ITER`` just took, when the code resumes a loop
    #: body there (its first trace makes an int item symbolic: every iteration brings another)
    loop_item: str | None = None
    #: the locals a ``for`` loop around the resume point assigns its items to (an int one is
    #: symbolic from the first trace, for the same reason)
    loop_targets: tuple[str, ...] = ()

    def original_index(self, index: int) -> int | None:
        """The original's index of the resume code's instruction ``index`` (None: added)."""
        return self.origins[index] if 0 <= index < len(self.origins) else None


#: 3.13's paired local accesses, by the plain instructions they stand for. A resume code
#: renumbers the locals (its parameters come first), and a pair whose new numbers do not fit
#: its 4-bit fields would be split by the assembler anyway: the body splits them all itself,
#: so where each instruction went is known.
_SUPERINSTRUCTIONS = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
}

_codes: dict[tuple[types.CodeType, int, ResumeLayout], types.CodeType] = {}
_infos: dict[types.CodeType, ResumeInfo] = {}
#: each original's instructions as parsed by ``bytecode``, parsed once: a function that breaks
#: at many places has a resume code made from it per place (each build works on copies)
_parsed: dict[types.CodeType, tuple[Any, ...]] = {}


def _items_of(original: types.CodeType) -> list[Any]:
    """Fresh copies of the instructions (and labels, try markers) of ``original``."""
    parsed = _parsed.get(original)
    if parsed is None:
        source = Bytecode.from_code(original, conserve_exception_block_stackdepth=True)
        parsed = _parsed[original] = tuple(source)
    # instructions are changed in place later (cell relabelling): copies; labels and try
    # markers are only compared by identity, within one copy
    return [item.copy() if isinstance(item, Instr) else item for item in parsed]


def super_self(original: types.CodeType) -> str | None:
    """The parameter zero-argument ``super()`` takes as its instance in ``original`` (its
    first), when the code may call it: a resume function must then keep that local alive
    and first, since ``super()`` finds the instance as the frame's first local (3.11 reads no
    local for it at all, so liveness alone would drop it)."""
    calls_super = "__class__" in original.co_freevars and "super" in original.co_names
    if calls_super and original.co_argcount + original.co_kwonlyargcount > 0:
        return original.co_varnames[0]
    return None


def resume_info(code: types.CodeType) -> ResumeInfo | None:
    """The origin of ``code`` when it is a generated resume code, else None."""
    return _infos.get(code)


def _call(callable_: Any, args: list[Instr], location: Any, argc: int | None = None) -> list[Instr]:
    """``callable_(*args)`` for the running Python: a constant callable, then the instructions
    that push its ``argc`` arguments (one instruction per argument unless ``argc`` says)."""
    load = Instr("LOAD_CONST", callable_, location=location)
    null = Instr("PUSH_NULL", location=location)
    argc = len(args) if argc is None else argc
    call = [Instr("CALL", argc, location=location)]
    if _PY311:
        call.insert(0, Instr("PRECALL", argc, location=location))
    head = [load, null] if _NULL_ABOVE_CALLABLE else [null, load]
    return [*head, *args, *call]


def _raise_passed(location: Any) -> list[Instr]:
    """``raise exception.pop()``: the exception arrives in a one-item list (its parameter),
    emptied here, so that neither this frame nor the callers' (the entry's, the runtime's,
    which passed it) hold the exception it raises: each is reachable from its traceback."""
    box = [
        Instr("LOAD_FAST", _EXCEPTION, location=location),
        Instr("LOAD_CONST", 0, location=location),
    ]
    return [
        *box,
        Instr("BINARY_SUBSCR", location=location),
        *box,
        Instr("DELETE_SUBSCR", location=location),
        Instr("RAISE_VARARGS", 1, location=location),
    ]


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
    items = _items_of(original)
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
        # the raise is reached from the prologue only: code that runs on to the target (a
        # loop coming round again) jumps over it
        reached = Label()
        landing = [
            Instr("JUMP_FORWARD", reached, location=location),
            target_label,
            *_raise_passed(location),
            reached,
        ]
    body[position:position] = landing
    body, body_origins = _split_body(body, resume_at + 1, added={id(i) for i in landing})
    body, body_origins = drop_unreachable(body, body_origins, target_label)

    prologue: list[Any] = []
    # live cell variables arrive as arguments of their own names; MAKE_CELL (in the head,
    # for every cellvar) wraps them. Locals and the passed stack slots are plain arguments.
    passed = 0
    for name, how in layout.local_iterators:
        made, passed = _made_again(how, passed, location)
        prologue += [*made, Instr("STORE_FAST", name, location=location)]
    for slot in layout.stack:
        if slot.kind == "null":
            prologue.append(Instr("PUSH_NULL", location=location))
        elif slot.kind == "value":
            prologue.append(Instr("LOAD_FAST", f"stack {passed}", location=location))
            passed += 1
        elif slot.kind == "context":
            constants = [Instr("LOAD_CONST", a, location=location) for a in slot.args]
            prologue += [
                *_call(slot.factory, constants, location),
                Instr("BEFORE_WITH", location=location),
                Instr("POP_TOP", location=location),
            ]
        else:  # pragma: no cover - layouts are made by this package
            raise AssertionError(slot.kind)
    # the stack parameters are dead from here on: unbound, so locals() shows the original's
    prologue += [Instr("DELETE_FAST", f"stack {i}", location=location) for i in range(passed)]
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
    if layout.leading:
        first, *rest = layout.local_names
        out.argnames = [first, *stack_names, *rest, *layout.cell_names]
    else:
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
    stacksize = original.co_stacksize + _prologue_depth(layout)
    code = out.to_code(stacksize=stacksize, compute_exception_stack_depths=False)
    head_instrs = sum(1 for item in head if isinstance(item, Instr))
    prologue_instrs = sum(1 for item in prologue if isinstance(item, Instr))
    origins = (None,) * (head_instrs + prologue_instrs) + tuple(body_origins)
    _check_body(original, code, origins, [i for i in body if isinstance(i, Instr)])
    from ..interpreter.instructions import decode

    loop_item = None
    after_for_iter = target > 0 and decode(original)[target - 1].opname == "FOR_ITER"
    if after_for_iter and layout.stack and layout.stack[-1].kind == "value":
        loop_item = f"stack {passed - 1}"
    if not layout.raises:  # (a raising resume code runs eagerly only, it is never traced)
        _infos[code] = ResumeInfo(
            original,
            target,
            layout.cell_names,
            origins,
            head_instrs + prologue_instrs,
            loop_item,
            _loop_targets(decode(original), target),
        )
    return code


def _loop_targets(instructions: Sequence[Any], target: int) -> tuple[str, ...]:
    """The plain locals that the ``for`` loops whose bodies hold ``target`` store their items
    in (``for i in ...``, ``for i, x in ...``)."""
    names: list[str] = []
    for inst in instructions:
        if inst.opname != "FOR_ITER" or inst.target is None:
            continue
        if not inst.index < target < inst.target:
            continue
        at, wanted = inst.index + 1, 1
        if instructions[at].opname == "UNPACK_SEQUENCE":
            at, wanted = at + 1, instructions[at].arg
        while wanted > 0 and at < len(instructions):
            store = instructions[at]
            if store.opname == "STORE_FAST":
                names.append(store.argval)
                wanted -= 1
            elif store.opname == "STORE_FAST_STORE_FAST":  # (3.13: two stores in one)
                names.extend(store.argval)
                wanted -= 2
            else:
                break
            at += 1
    return tuple(names)


def _prologue_depth(layout: ResumeLayout) -> int:
    """How deep the prologue's pushes reach: each slot leaves one item, and entering a context
    needs a few more on top, briefly (the call's callable, NULL and arguments, then
    BEFORE_WITH's two results), as does making a local's iterator again (its calls)."""
    deepest = max([_shape_depth(how) for _, how in layout.local_iterators] or [0])
    for below, slot in enumerate(layout.stack):
        transient = 2 + len(slot.args) + 2 if slot.kind == "context" else 1
        deepest = max(deepest, below + transient)
    return deepest + 2


def _shape_depth(shape: tuple[Any, ...]) -> int:
    if shape[0] == "value":
        return 1
    return max([2 + i + _shape_depth(part) for i, part in enumerate(shape[2])] or [2])


def _passed_in(shape: tuple[Any, ...]) -> int:
    if shape[0] == "value":
        return 1
    return sum(_passed_in(part) for part in shape[2])


def _made_again(shape: tuple[Any, ...], passed: int, location: Any) -> tuple[list[Instr], int]:
    """Instructions that push what ``shape`` makes, reading passed arguments from ``stack
    <passed>`` on; and the next unread argument."""
    if shape[0] == "value":
        return [Instr("LOAD_FAST", f"stack {passed}", location=location)], passed + 1
    _, fn, parts = shape
    loads: list[Instr] = []
    for part in parts:
        made, passed = _made_again(part, passed, location)
        loads += made
    return _call(fn, loads, location, argc=len(parts)), passed


def _split_body(body: list[Any], first: int, added: set[int]) -> tuple[list[Any], list[int | None]]:
    """``body`` with every superinstruction split in two, and the original index of each of
    its instructions (``first`` is the original index of its first one)."""
    out: list[Any] = []
    origins: list[int | None] = []
    index = first
    for item in body:
        if not isinstance(item, Instr) or id(item) in added:
            out.append(item)
            if isinstance(item, Instr):
                origins.append(None)
            continue
        halves = _SUPERINSTRUCTIONS.get(item.name)
        if halves is None:
            out.append(item)
            origins.append(index)
        else:
            (name_a, name_b), (arg_a, arg_b) = halves, item.arg
            out += [
                Instr(name_a, arg_a, location=item.location),
                Instr(name_b, arg_b, location=item.location),
            ]
            origins += [index, None]
        index += 1
    return out, origins


def _check_body(
    original: types.CodeType,
    code: types.CodeType,
    origins: tuple[int | None, ...],
    body: list[Instr],
) -> None:
    """Every instruction of the resume code's body is the one it was assembled from (a
    mismatch would run the wrong instructions: refuse rather than risk it)."""
    from ..interpreter.instructions import decode

    after = decode(code)
    start = len(origins) - len(body)
    if len(after) != len(origins):
        raise Unsupported(
            f"a resume function for {original.co_qualname} (it has {len(after)} instructions, "
            f"{len(origins)} were assembled)"
        )
    for k, instr in enumerate(body):
        if after[start + k].opname != instr.name:
            raise Unsupported(
                f"a resume function for {original.co_qualname} (instruction "
                f"{origins[start + k]} did not line up)"
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
