"""Decoding code objects into instruction lists, through the standard ``dis`` module.

Invariants:

* Instructions are numbered by their position in the list (``index``); every jump carries the
  index of its target in ``target``, resolved from ``dis``'s absolute ``argval`` offsets, so
  handlers never do offset arithmetic and the 3.11 relative/absolute jump forms look alike.
* Inline ``CACHE`` entries and ``EXTENDED_ARG`` prefixes are never listed (``dis`` folds the
  prefix into the next instruction's ``arg``), so indices are those of the ``bytecode``
  package's ``Instr`` items too, which resume functions rely on (see :mod:`sapwood_tracer.breaks.resume`).
* Decoding is cached per code object; the lists are immutable.
* The exception table (3.11+: offset ranges, each with a handler, a stack depth and whether
  the raising offset is pushed) is read through ``dis`` and cached the same way; its targets
  are instruction indices too.
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass
from typing import Any

__all__ = ["ExceptionHandler", "Instruction", "decode", "exception_handler"]

_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


@dataclass(frozen=True, slots=True)
class Instruction:
    """One decoded instruction. ``target`` is the jump target's index, or ``None``."""

    opname: str
    arg: int | None
    argval: Any
    offset: int
    lineno: int | None
    index: int
    target: int | None


_decoded: dict[types.CodeType, tuple[Instruction, ...]] = {}


def decode(code: types.CodeType) -> tuple[Instruction, ...]:
    """The instructions of ``code`` (cached)."""
    cached = _decoded.get(code)
    if cached is not None:
        return cached
    every = list(dis.get_instructions(code))
    raw = [ins for ins in every if ins.opname != "EXTENDED_ARG"]
    by_offset = {ins.offset: i for i, ins in enumerate(raw)}
    # a jump may land on the EXTENDED_ARG prefix of an instruction: that instruction
    pending: list[int] = []
    for ins in every:
        if ins.opname == "EXTENDED_ARG":
            pending.append(ins.offset)
        else:
            for offset in pending:
                by_offset[offset] = by_offset[ins.offset]
            pending.clear()
    out = []
    lineno: int | None = code.co_firstlineno
    for i, ins in enumerate(raw):
        positions = ins.positions
        if positions is not None and positions.lineno is not None:
            lineno = positions.lineno
        target = None
        if ins.opcode in _JUMPS:
            target = by_offset[ins.argval]
        out.append(Instruction(ins.opname, ins.arg, ins.argval, ins.offset, lineno, i, target))
    result = tuple(out)
    _decoded[code] = result
    return result


@dataclass(frozen=True, slots=True)
class ExceptionHandler:
    """Where an exception raised at some instruction goes: the handler's instruction index,
    the stack depth to unwind to, and whether the raising offset is pushed first (``lasti``)."""

    target: int
    depth: int
    lasti: bool


_handlers: dict[types.CodeType, tuple[tuple[int, int, ExceptionHandler], ...]] = {}


def exception_handler(code: types.CodeType, offset: int) -> ExceptionHandler | None:
    """The handler covering the instruction at ``offset`` in ``code``'s exception table."""
    table = _handlers.get(code)
    if table is None:
        index = {ins.offset: ins.index for ins in decode(code)}
        entries = dis._parse_exception_table(code)  # type: ignore[attr-defined]
        table = _handlers[code] = tuple(
            (e.start, e.end, ExceptionHandler(index[e.target], e.depth, e.lasti)) for e in entries
        )
    for start, end, handler in table:
        if start <= offset < end:
            return handler
    return None
