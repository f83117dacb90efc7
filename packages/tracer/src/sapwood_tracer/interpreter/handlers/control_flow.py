"""Jumps, loops and returns.

Branches are decided at trace time on Python values (a tensor's truth value is refused as
data-dependent). Loops are unrolled.

Version differences: 3.11 has direction-specific ``POP_JUMP_FORWARD_IF_*`` /
``POP_JUMP_BACKWARD_IF_*`` and ``JUMP_IF_{TRUE,FALSE}_OR_POP``; 3.12 has ``POP_JUMP_IF_*``,
``RETURN_CONST`` and ``END_FOR``, and its ``FOR_ITER`` on exhaustion pops the iterator and
skips the ``END_FOR`` at its target (3.11 pops and jumps to the target itself). 3.13 ends a
loop with ``END_FOR`` (one pop) and ``POP_TOP``, and converts a condition with ``TO_BOOL``
before its jump.
"""

from __future__ import annotations

from ...pymodel.loop_items import loop_next_of_live
from ...values.base import ConstantValue, Value
from ...values.iterators import LiveIteratorValue
from ..frame import FrameReturn, SymbolicFrame
from ..instructions import Instruction
from ..registry import opcode


@opcode("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP", "JUMP_NO_INTERRUPT")
def jump(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.jump(inst)


def _pop_jump_if(truth: bool):  # type: ignore[no-untyped-def]
    def handler(frame: SymbolicFrame, inst: Instruction) -> None:
        if frame.tx.truth(frame.pop()) is truth:
            frame.jump(inst)

    return handler


def _pop_jump_if_none(is_none: bool):  # type: ignore[no-untyped-def]
    def handler(frame: SymbolicFrame, inst: Instruction) -> None:
        value = frame.pop()
        none = isinstance(value, ConstantValue) and value.value is None
        if none is is_none:
            frame.jump(inst)

    return handler


opcode("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE", until=(3, 12))(_pop_jump_if(True))
opcode("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE", until=(3, 12))(
    _pop_jump_if(False)
)
opcode("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE", until=(3, 12))(
    _pop_jump_if_none(True)
)
opcode("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", until=(3, 12))(
    _pop_jump_if_none(False)
)
opcode("POP_JUMP_IF_TRUE", since=(3, 12))(_pop_jump_if(True))
opcode("POP_JUMP_IF_FALSE", since=(3, 12))(_pop_jump_if(False))
opcode("POP_JUMP_IF_NONE", since=(3, 12))(_pop_jump_if_none(True))
opcode("POP_JUMP_IF_NOT_NONE", since=(3, 12))(_pop_jump_if_none(False))


@opcode("JUMP_IF_TRUE_OR_POP", until=(3, 12))
def jump_if_true_or_pop(frame: SymbolicFrame, inst: Instruction) -> None:
    if frame.tx.truth(frame.peek()):
        frame.jump(inst)
    else:
        frame.pop()


@opcode("JUMP_IF_FALSE_OR_POP", until=(3, 12))
def jump_if_false_or_pop(frame: SymbolicFrame, inst: Instruction) -> None:
    if not frame.tx.truth(frame.peek()):
        frame.jump(inst)
    else:
        frame.pop()


@opcode("GET_ITER")
def get_iter(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(frame.tx.iterate(frame.pop()))


def _next_item(frame: SymbolicFrame) -> Value | None:
    it = frame.peek()
    if isinstance(it, LiveIteratorValue):  # (read ahead as data, or a ``next`` break)
        return loop_next_of_live(frame.tx, it)
    return it.next_value(frame.tx)  # type: ignore[attr-defined]


@opcode("FOR_ITER", until=(3, 12))
def for_iter_311(frame: SymbolicFrame, inst: Instruction) -> None:
    value = _next_item(frame)
    if value is None:
        frame.pop()
        frame.jump(inst)
    else:
        frame.push(value)


@opcode("FOR_ITER", since=(3, 12), until=(3, 13))
def for_iter_312(frame: SymbolicFrame, inst: Instruction) -> None:
    value = _next_item(frame)
    if value is None:
        frame.pop()
        frame.jump(inst)
        if frame.instructions[frame.ip].opname == "END_FOR":
            frame.ip += 1
    else:
        frame.push(value)


@opcode("FOR_ITER", since=(3, 13))
def for_iter_313(frame: SymbolicFrame, inst: Instruction) -> None:
    # Exhausted: CPython pops the iterator and skips the END_FOR, POP_TOP at the target;
    # here the target runs, with a placeholder for END_FOR to pop and the iterator for POP_TOP.
    value = _next_item(frame)
    if value is None:
        frame.push(ConstantValue(None))
        frame.jump(inst)
    else:
        frame.push(value)


@opcode("END_FOR", since=(3, 12), until=(3, 13))
def end_for(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.pop()
    frame.pop()


@opcode("END_FOR", since=(3, 13))
def end_for_313(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.pop()


@opcode("TO_BOOL", since=(3, 13))
def to_bool(frame: SymbolicFrame, inst: Instruction) -> None:
    # TO_BOOL only ever feeds a conditional jump or UNARY_NOT, which take the truth of what
    # they pop: a constant is converted now, anything else keeps its identity so a
    # data-dependent truth breaks the graph at the jump (a "jump" break, as on 3.12).
    value = frame.peek()
    if value.is_constant():
        frame.pop()
        frame.push(ConstantValue(frame.tx.truth(value)))


@opcode("RETURN_VALUE")
def return_value(frame: SymbolicFrame, inst: Instruction) -> None:
    raise FrameReturn(frame.pop())


@opcode("RETURN_CONST", since=(3, 12))
def return_const(frame: SymbolicFrame, inst: Instruction) -> None:
    raise FrameReturn(frame.tx.wrap_trusted(inst.argval))
