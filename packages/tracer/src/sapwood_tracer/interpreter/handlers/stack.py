"""Stack manipulation and no-op opcodes."""

from __future__ import annotations

from ...values.base import NULL
from ..frame import SymbolicFrame
from ..instructions import Instruction
from ..registry import opcode


@opcode("NOP", "RESUME", "CACHE", "EXTENDED_ARG")
def nop(frame: SymbolicFrame, inst: Instruction) -> None:
    pass


@opcode("PRECALL", until=(3, 12))
def precall(frame: SymbolicFrame, inst: Instruction) -> None:
    # 3.11 only: a hint for the specializing interpreter; CALL does the work.
    pass


@opcode("PUSH_NULL")
def push_null(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(NULL)


@opcode("POP_TOP")
def pop_top(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.pop()


@opcode("COPY")
def copy(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    frame.push(frame.peek(inst.arg))


@opcode("SWAP")
def swap(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    stack = frame.stack
    stack[-1], stack[-inst.arg] = stack[-inst.arg], stack[-1]


@opcode("KW_NAMES", until=(3, 13))
def kw_names(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    frame.kw_names = frame.code.co_consts[inst.arg]
