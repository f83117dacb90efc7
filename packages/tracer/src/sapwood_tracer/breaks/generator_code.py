"""Repositionable generator codes: a generator of the trace rebuilt as a real one.

A generator made during a trace may still be suspended when the graph ends (a graph break
while it is live, or it is returned). Python cannot make a generator object at a given
instruction, so it is rebuilt as a generator of a generated code ``R``, made once per original
generator code ``G``:

* ``R`` has ``G``'s name, qualified name, file, line numbers, flags, free variables and
  exception table; its one parameter is a :class:`~sapwood_tracer.values.generator_codes.GeneratorBox`
  (the local ``"generator box"``, a name no source can spell).
* After ``G``'s own prologue (up to RESUME), ``R`` runs a *dispatch*: it binds each local of
  ``G`` from the box (leaving unbound what the box says is unbound), reads the box's mark and
  either pushes the box's value stack and a ``None`` and jumps to the YIELD_VALUE of that
  yield (so the generator suspends *there*, inside the same try regions and with the same
  stack as ``G`` would: ``send``, ``throw`` and ``close`` behave as on the original), jumps
  to the start of ``G``'s body (a generator not started yet), or returns (a finished one).
* The box keeps the stack it set (a frame's value stack cannot be read from Python) while
  the generator stays where the dispatch put it: the code before each YIELD_VALUE, which
  runs only when the generator reaches the yield by running, empties the box.
* After each yield, before ``G``'s code goes on, ``R`` checks whether the value sent is its
  *token*: if so it drops the yield's stack, unbinds every local and runs the dispatch again.
  That is how a later trace that advanced such a generator symbolically puts the real one in
  the state it reached, without running any of ``G``'s code twice.

Refused (a graph break with a reason): coroutines and async generators, ``yield from`` and
``await`` (SEND), cell variables, and a yield not followed by RESUME.
"""

from __future__ import annotations

import contextlib
import dis
import sys
import types
from typing import Any

from bytecode import Bytecode, CompilerFlags, Instr, Label

from ..errors import Unsupported
from ..interpreter.instructions import decode
from ..values.generator_codes import (
    BOX_NAME,
    UNBOUND,
    GeneratorBox,
    RepositionableCode,
    register,
    repositionable,
)
from .resume import _call, _items_of

__all__ = ["make_generator", "reposition", "repositionable_code"]

_PY311 = sys.version_info[:2] == (3, 11)
_IF_TRUE = "POP_JUMP_FORWARD_IF_TRUE" if _PY311 else "POP_JUMP_IF_TRUE"
_IF_FALSE = "POP_JUMP_FORWARD_IF_FALSE" if _PY311 else "POP_JUMP_IF_FALSE"
_NOT_GENERATOR = 0x80 | 0x100 | 0x200  # coroutine, iterable coroutine, async generator
_REFUSED_OPS = frozenset({"SEND", "YIELD_FROM", "GET_YIELD_FROM_ITER", "GET_AWAITABLE"})
#: instructions after which the next one is not reached by falling through
_NO_FALL = frozenset(
    {
        "JUMP_FORWARD",
        "JUMP_BACKWARD",
        "JUMP_BACKWARD_NO_INTERRUPT",
        "JUMP_ABSOLUTE",
        "RETURN_VALUE",
        "RETURN_CONST",
        "RAISE_VARARGS",
        "RERAISE",
    }
)


class _Mark:
    """One place the box can name (a yield, the start, the finish)."""

    __slots__ = ("label",)

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"<generator position {self.label}>"


class _Token:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<take the box's state>"


_TOKEN = _Token()
_made: dict[types.CodeType, RepositionableCode] = {}


def _local_of(box: GeneratorBox, index: int) -> Any:
    return box.locals[index] if index < len(box.locals) else UNBOUND  # (a finish names none)


def _mark_of(box: GeneratorBox) -> Any:
    return box.mark


def _stack_of(box: GeneratorBox) -> tuple[Any, ...]:
    return tuple(reversed(box.stack))  # (UNPACK_SEQUENCE pushes the first item last)


def _taken(box: GeneratorBox) -> None:
    box.set(None, (), ())  # the state is in the frame now: the box holds nothing alive


def _placed(box: GeneratorBox) -> None:
    # at the yield the box names: its stack stays readable (the frame's is not) until the
    # generator reaches a yield by running (see ``_forget``)
    box.locals = ()


def _forget(box: GeneratorBox) -> None:
    box.set(None, (), ())


def repositionable_code(original: types.CodeType) -> RepositionableCode:
    """The ``R`` of generator code ``original`` (memoised); Unsupported where refused."""
    made = _made.get(original)
    if made is None:
        try:
            made = _build(original)
        except Unsupported:
            raise
        except Exception as exc:  # (an instruction stream this module does not foresee)
            what = f"{type(exc).__name__}: {exc}"
            raise Unsupported(f"rebuilding generator {original.co_qualname} ({what})") from exc
        _made[original] = made
        register(made)
    return made


def _yield_depths(code: types.CodeType) -> dict[int, int]:
    """The value-stack depth below the yielded value at each YIELD_VALUE (by offset), found
    by walking the code's flow (jumps and exception handlers) from its first RESUME."""
    instrs = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
    at = {i.offset: k for k, i in enumerate(instrs)}
    entries = dis._parse_exception_table(code)  # type: ignore[attr-defined]
    first = next(k for k, i in enumerate(instrs) if i.opname == "RESUME") + 1
    depth: dict[int, int] = {}
    todo = [(first, 0)]
    while todo:
        k, d = todo.pop()
        while k < len(instrs):
            if depth.get(k) is not None:
                if depth[k] != d:
                    raise Unsupported(f"the stack of {code.co_qualname} (inconsistent depths)")
                break
            depth[k] = d
            inst = instrs[k]
            for entry in entries:
                if entry.start <= inst.offset < entry.end:
                    todo.append((at[entry.target], entry.depth + int(entry.lasti) + 1))
            arg = inst.arg if inst.opcode >= dis.HAVE_ARGUMENT else None
            if inst.opcode in dis.hasjrel or inst.opcode in dis.hasjabs:
                todo.append((at[inst.argval], d + dis.stack_effect(inst.opcode, arg, jump=True)))
                if inst.opname in _NO_FALL:
                    break
                d += dis.stack_effect(inst.opcode, arg, jump=False)
            elif inst.opname in _NO_FALL:
                break
            else:
                d += dis.stack_effect(inst.opcode, arg)
            k += 1
    return {i.offset: depth[k] - 1 for k, i in enumerate(instrs) if i.opname == "YIELD_VALUE"}


def _build(original: types.CodeType) -> RepositionableCode:
    name = original.co_qualname
    if not original.co_flags & 0x20 or original.co_flags & _NOT_GENERATOR:
        raise Unsupported(f"rebuilding {name}, which is not a plain generator")
    if original.co_cellvars:
        raise Unsupported(f"rebuilding generator {name}, which has cell variables")
    decoded = decode(original)
    if any(i.opname in _REFUSED_OPS for i in decoded):
        raise Unsupported(f"rebuilding generator {name}, which delegates (yield from/await)")
    yield_indices = tuple(i.index for i in decoded if i.opname == "YIELD_VALUE")
    by_offset = _yield_depths(original)
    depths = tuple(by_offset[decoded[k].offset] for k in yield_indices)

    items = _items_of(original)
    positions = [p for p, item in enumerate(items) if isinstance(item, Instr)]
    resume_at = next(p for p in positions if items[p].name == "RESUME")
    head, body = items[: resume_at + 1], items[resume_at + 1 :]
    where = items[resume_at].location
    local_names = tuple(original.co_varnames)
    marks = tuple(_Mark(f"yield {n}") for n in range(len(yield_indices)))
    start, finish = _Mark("start"), _Mark("finish")

    def box() -> Instr:
        return Instr("LOAD_FAST", BOX_NAME, location=where)

    def const(value: Any) -> Instr:
        return Instr("LOAD_CONST", value, location=where)

    def is_(value: Any, jump: str, label: Label) -> list[Any]:
        return [Instr("COPY", 1, location=where), const(value), Instr("IS_OP", 0, location=where),
                Instr(jump, label, location=where)]  # fmt: skip

    # where each yield's YIELD_VALUE is, and what runs after its RESUME
    yield_labels = [Label() for _ in yield_indices]
    body_start = Label()
    dispatch = Label()
    out_body: list[Any] = [body_start]
    number = 0
    pending: int | None = None  # the yield whose RESUME comes next
    for item in body:
        if isinstance(item, Instr) and item.name == "YIELD_VALUE":
            # reached by running (not by the dispatch): the box's stack is stale from here
            forget = _call(_forget, [box()], item.location)
            out_body += [*forget, Instr("POP_TOP", location=item.location)]
            out_body += [yield_labels[number], item]
            pending, number = number, number + 1
            continue
        out_body.append(item)
        if pending is not None and isinstance(item, Instr):
            if item.name != "RESUME":
                raise Unsupported(f"rebuilding generator {name} (a yield without RESUME)")
            go = Label()
            at = item.location
            out_body += [*is_(_TOKEN, _IF_FALSE, go), Instr("POP_TOP", location=at)]
            out_body += [Instr("POP_TOP", location=at) for _ in range(depths[pending])]
            for local in local_names:
                out_body += [
                    Instr("LOAD_CONST", None, location=at),
                    Instr("STORE_FAST", local, location=at),
                    Instr("DELETE_FAST", local, location=at),
                ]
            out_body += [Instr("JUMP_BACKWARD", dispatch, location=at), go]
            pending = None

    code_items: list[Any] = [dispatch]
    for index, local in enumerate(local_names):
        unbound, done = Label(), Label()
        code_items += _call(_local_of, [box(), const(index)], where)
        code_items += is_(UNBOUND, _IF_TRUE, unbound)
        code_items += [Instr("STORE_FAST", local, location=where),
                       Instr("JUMP_FORWARD", done, location=where),
                       unbound, Instr("POP_TOP", location=where), done]  # fmt: skip
    code_items += _call(_mark_of, [box()], where)
    settings: list[Any] = []
    for n, mark in enumerate(marks):
        here = Label()
        code_items += is_(mark, _IF_TRUE, here)
        settings += [here, Instr("POP_TOP", location=where)]
        if depths[n]:
            settings += [*_call(_stack_of, [box()], where),
                         Instr("UNPACK_SEQUENCE", depths[n], location=where)]  # fmt: skip
        # (the call's None is the value the yield sends out)
        settings += [*_call(_placed, [box()], where),
                     Instr("JUMP_FORWARD", yield_labels[n], location=where)]  # fmt: skip
    started = Label()
    code_items += is_(start, _IF_TRUE, started)
    code_items += [Instr("POP_TOP", location=where), const(None),
                   Instr("RETURN_VALUE", location=where)]  # fmt: skip
    settings += [started, Instr("POP_TOP", location=where), *_call(_taken, [box()], where),
                 Instr("POP_TOP", location=where), Instr("JUMP_FORWARD", body_start, location=where)]  # fmt: skip

    out = Bytecode([*head, *code_items, *settings, *out_body])
    out.name = original.co_name
    out.qualname = original.co_qualname
    out.filename = original.co_filename
    out.first_lineno = original.co_firstlineno
    out.docstring = None
    out.freevars = list(original.co_freevars)
    out.cellvars = []
    out.argnames = [BOX_NAME]
    out.argcount = 1
    out.posonlyargcount = 0
    out.kwonlyargcount = 0
    out.flags = CompilerFlags(original.co_flags & ~(0x04 | 0x08))
    stacksize = original.co_stacksize + 8
    code = out.to_code(stacksize=stacksize, compute_exception_stack_depths=False)
    after = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
    lasti = tuple(
        (inst.offset, after[k + 1].offset)
        for k, inst in enumerate(after)
        if inst.opname == "YIELD_VALUE"
    )
    if len(lasti) != len(yield_indices):
        raise Unsupported(f"rebuilding generator {name} (its yields did not line up)")
    return RepositionableCode(
        original, code, local_names, yield_indices, depths, lasti,
        (*marks, start, finish), start, finish, _TOKEN,
    )  # fmt: skip


def make_generator(
    info: RepositionableCode,
    f_globals: dict[str, Any],
    closure: tuple[Any, ...] | None,
    mark: Any,
    locals_: tuple[Any, ...],
    stack: tuple[Any, ...],
    names: tuple[str, str],
) -> types.GeneratorType:
    """A real generator of ``info``'s code in the state the box describes: suspended at the
    yield ``mark`` names (run to it now), finished, or not started; ``names``: its
    ``__name__`` and ``__qualname__``."""
    fn = types.FunctionType(info.code, f_globals, names[0], None, closure)
    fn.__qualname__ = names[1]
    gen = fn(GeneratorBox(mark, locals_, stack, closure or ()))
    if mark is not info.start_mark:
        with contextlib.suppress(StopIteration):
            next(gen)
    return gen  # type: ignore[no-any-return]


def reposition(
    gen: types.GeneratorType, mark: Any, locals_: tuple[Any, ...], stack: tuple[Any, ...]
) -> None:
    """Put ``gen`` (a suspended generator of a repositionable code) in the given state."""
    box = gen.gi_frame.f_locals[BOX_NAME]
    box.set(mark, locals_, stack)
    info = repositionable(gen.gi_code)
    assert info is not None
    with contextlib.suppress(StopIteration):
        gen.send(info.token)
