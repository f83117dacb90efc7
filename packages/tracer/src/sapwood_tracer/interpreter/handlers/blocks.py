"""``with`` blocks and exception handling.

Only the normal path runs: ``BEFORE_WITH`` enters a context manager value and pushes its
bound ``__exit__``, which the compiler's normal-exit sequence calls with three ``None``s.
Opcodes that only occur on an exceptional path (``PUSH_EXC_INFO``, ``CHECK_EXC_MATCH``,
``RERAISE``, ...) are reached only if the traced code raised, which the tracer refuses.
"""

from __future__ import annotations

from ...errors import Unsupported
from ..frame import SymbolicFrame
from ..instructions import Instruction
from ..registry import opcode


@opcode("BEFORE_WITH")
def before_with(frame: SymbolicFrame, inst: Instruction) -> None:
    manager = frame.pop()
    exit_fn, entered = frame.tx.enter_context(manager)
    frame.push(exit_fn)
    frame.push(entered)


@opcode("RAISE_VARARGS")
def raise_varargs(frame: SymbolicFrame, inst: Instruction) -> None:
    what = "a bare raise" if inst.arg == 0 else "a raise statement"
    if inst.arg:
        exc = frame.peek(inst.arg)
        what = f"raising {exc.describe()}"
    raise Unsupported(what, hint="The traced code raised an exception.")


@opcode(
    "PUSH_EXC_INFO",
    "POP_EXCEPT",
    "CHECK_EXC_MATCH",
    "RERAISE",
    "WITH_EXCEPT_START",
    "CHECK_EG_MATCH",
    "PREP_RERAISE_STAR",
    "CLEANUP_THROW",
)
def exceptional_path(frame: SymbolicFrame, inst: Instruction) -> None:
    raise Unsupported(f"an exception handler being entered ({inst.opname})")
