"""The symbolic frame: one activation of a code object during a trace.

A frame owns its value stack, its fast locals (by index into ``co_varnames``), its cells
(``co_cellvars + co_freevars``) and an instruction pointer. The top-level frame is the
compiled function; inlined calls run in child frames sharing the same trace session.

Invariants:

* The stack only ever holds :class:`~sapwood_tracer.values.base.Value` objects (``NULL``
  included); a local slot holds a value or ``None`` (unbound).
* A generator frame is resumable: it suspends by raising :class:`FrameSuspend` from its
  loop and later continues at the next instruction, so generators run lazily, interleaved
  with their consumer exactly as in Python.
* An exception the traced code raises (:class:`~sapwood_tracer.errors.TracedException`) goes
  where CPython sends it: the handler that the code's exception table names for the raising
  instruction (the stack cut to the entry's depth, the raising offset pushed when the entry
  asks for it, then the exception), else out of the frame to its caller's call instruction.
  One that no traced frame catches is a graph break at the root frame's raising instruction.
* A construct that cannot be traced while the root frame is handling an exception moves the
  graph break back to the instruction that raised it: the exception is then raised for real
  and its handler runs eagerly, so no handler ever resumes half-symbolic.
* An exception raised by sapwood's own code while an instruction runs (a bug) becomes an
  :class:`~sapwood_tracer.Unsupported` at that instruction, like any construct the tracer
  cannot capture: a graph break in default mode, a typed error with ``fullgraph=True``; it
  never reaches the user as itself.
"""

from __future__ import annotations

import linecache
import os
import site
import types
from typing import Any

import torch

from sapwood_graph import Source

from ..errors import TracedException, Unsupported, forget_handled
from ..values.base import ConstantValue, Context, Value
from ..values.exceptions import ExceptionValue, chain_context, exception_value
from . import budget as _budget
from .instructions import Instruction, decode, exception_handler
from .registry import dispatch_table

__all__ = [
    "BreakHere",
    "FrameReturn",
    "FrameSuspend",
    "LazyLocals",
    "SymbolicFrame",
    "internal_error",
]


_LIBRARY_DIRS = tuple(
    {os.path.dirname(os.__file__), *site.getsitepackages(), site.getusersitepackages()}
)


def _is_library(filename: str) -> bool:
    """Whether ``filename`` belongs to an installed library or the standard library."""
    return filename.startswith(_LIBRARY_DIRS) or filename.startswith("<frozen")


#: Types of inputs the trace wraps (and so guards) only when the code first reads them.
LAZY_TYPES = (int, float, bool, str, type(None), torch.Tensor)


class LazyLocals(dict):  # type: ignore[type-arg]
    """The root frame's fast locals, where an input of a :data:`LAZY_TYPES` type stays the
    raw object until the trace reads it, and is wrapped (and guarded on its value) then.

    A local the trace never reads adds no guard: a flag tested before a graph break, or a
    loop counter, does not make the next resume function specialize on it; a tensor only
    handed on to a resume function is not guarded on its metadata, nor on whether it is the
    same object as another input (which made the resume paths of ``if c1: ... if c2: ...``
    over condition tensors compile once per aliasing pattern of ``c1``, ``c2``, ...).
    :meth:`passed_value` hands such a local on unread, as its source.
    """

    def __init__(self, wrap: Any) -> None:
        super().__init__()
        self._wrap = wrap
        self._pending: dict[str, tuple[Any, Source]] = {}

    def add_input(self, name: str, obj: Any, source: Source) -> None:
        if type(obj) in LAZY_TYPES:
            self._pending[name] = (obj, source)
            super().__setitem__(name, _UNREAD)
        else:
            super().__setitem__(name, self._wrap(obj, source))

    def _read(self, name: str) -> None:
        pending = self._pending.pop(name, None)
        if pending is not None:
            super().__setitem__(name, self._wrap(*pending))

    def __getitem__(self, name: str) -> Value:
        self._read(name)
        return super().__getitem__(name)  # type: ignore[no-any-return]

    def get(self, name: str, default: Any = None) -> Any:
        self._read(name)
        return super().get(name, default)

    def pop(self, name: str, *default: Any) -> Any:
        self._read(name)
        return super().pop(name, *default)

    def __setitem__(self, name: str, value: Value) -> None:
        self._pending.pop(name, None)
        super().__setitem__(name, value)

    def values(self) -> Any:
        for name in list(self._pending):
            self._read(name)
        return super().values()

    def items(self) -> Any:
        self.values()
        return super().items()

    def passed_value(self, name: str) -> Value | None:
        """The local as a value to hand on at a graph break, without reading it: an unread
        input is passed as itself (its source), unguarded."""
        pending = self._pending.get(name)
        if pending is not None:
            obj, source = pending
            return ConstantValue(obj, source)
        return super().get(name)  # type: ignore[no-any-return]


_UNREAD = object()  # (the slot of an input not read yet; never seen outside LazyLocals)


class FrameSuspend(Exception):
    """Internal: a generator frame suspends (RETURN_GENERATOR, YIELD_VALUE) with a value;
    its instruction pointer and stack stay as they are, ready to resume."""

    def __init__(self, value: Value) -> None:
        self.value = value


class BreakHere(Exception):
    """Internal: the root frame reached its planned graph break; its state (stack, locals,
    instruction pointer) is that of just before the breaking instruction."""


class FrameReturn(Exception):
    """Internal: unwinds a frame's loop with its return value."""

    def __init__(self, value: Value) -> None:
        self.value = value


class SymbolicFrame:
    """One symbolic activation of ``code``."""

    def __init__(
        self,
        tx: Context,
        code: types.CodeType,
        f_globals: dict[str, Any],
        globals_source: Source | None,
        fast_locals: dict[str, Value],
        cells: dict[str, Value],
        parent: SymbolicFrame | None,
    ) -> None:
        self.tx = tx
        self.code = code
        self.f_globals = f_globals
        self.globals_source = globals_source
        self.locals = fast_locals
        self.cells = cells
        self.parent = parent
        self.stack: list[Value] = []
        self.instructions = decode(code)
        self.ip = 0
        self.current: Instruction | None = None
        self.kw_names: tuple[str, ...] = ()
        self.is_generator = False
        self.depth: int = 0 if parent is None else parent.depth + 1
        # instructions this activation ran itself, and the trace's budget when it began
        # (see .budget)
        self.executed = 0
        self.budget_at_entry: int = tx.budget
        # the Python version whose opcode meanings apply (the running one, unless a test
        # interprets hand-written instructions of another version)
        self.version: tuple[int, int] | None = None if parent is None else parent.version
        # The root frame of a capture counts how often it ran each instruction, so a failed
        # trace can name "the n-th execution of instruction i" and the retrace stop there.
        self.visits: dict[int, int] | None = None
        self.break_at: tuple[int, int] | None = None
        # (instruction index, visit) of the raise each open handler of the root frame is
        # handling, outermost first (PUSH_EXC_INFO opens one, POP_EXCEPT closes it)
        self.raised_at: tuple[int, int] | None = None
        self.handling: list[tuple[int, int] | None] = []
        made = getattr(tx, "made_frames", None)  # (released with the trace's session)
        if made is not None:
            made.append(self)

    def release(self) -> None:
        """The trace is over: drop the values this frame reaches (with its caller, a
        generator frame and the frame holding its generator are a reference cycle, which
        would keep the call's real objects alive until the garbage collector runs)."""
        self.parent = None
        self.stack = []
        self.locals = {}
        self.cells = {}

    # -- stack -------------------------------------------------------------------------
    def push(self, value: Value) -> None:
        self.stack.append(value)

    def pop(self) -> Value:
        return self.stack.pop()

    def popn(self, n: int) -> list[Value]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def peek(self, depth: int = 1) -> Value:
        return self.stack[-depth]

    def jump(self, inst: Instruction) -> None:
        assert inst.target is not None
        self.ip = inst.target

    # -- locations ----------------------------------------------------------------------
    def location(self) -> str:
        return f"{self.code.co_filename}:{self.line()}"

    def line(self) -> int:
        """The source line of the instruction running (the first line before any ran)."""
        line = self.current.lineno if self.current is not None else None
        return line if line is not None else self.code.co_firstlineno

    def unwind(self, raised: TracedException, inst: Instruction) -> bool:
        """Send ``raised`` to this frame's handler for ``inst``; False if it has none.

        Caught here, the exception gets the ``__context__`` Python gives it: the exception
        being handled when it was raised (the frames in between handled none of their own)."""
        handler = exception_handler(self.code, inst.offset)
        if handler is None:
            return False
        value = exception_value(raised)
        if isinstance(value, ExceptionValue):
            # raised: its traceback is the frames it passed through (a None set before is gone)
            value.attrs.pop("__traceback__", None)
        if not raised.chained and isinstance(value, ExceptionValue):
            # the first frame that sees a new raise: nothing was handled or unhandled between
            # the raising instruction and here, so what is handled is what was at the raise
            raised.chained = True
            chain_context(self.tx, value, self.tx.topmost_handled())
        del self.stack[handler.depth :]
        if handler.lasti:
            self.push(ConstantValue(inst.offset))
        self.push(value)  # type: ignore[arg-type]
        self.ip = handler.target
        if self.visits is not None:
            self.raised_at = (inst.index, self.visits[inst.index])
        return True

    def cell_name(self, index: int) -> str:
        names = self.code.co_cellvars + self.code.co_freevars
        return names[index]

    # -- the loop -----------------------------------------------------------------------
    def run(self) -> Value:
        """Interpret the frame to its RETURN; the returned value."""
        table = dispatch_table(self.version)
        instructions = self.instructions
        tx = self.tx
        visits = self.visits
        break_at = self.break_at
        frame_budget = _budget.FRAME_BUDGET
        try:
            while True:
                inst = instructions[self.ip]
                self.current = inst
                if visits is not None:
                    count = visits[inst.index] = visits.get(inst.index, 0) + 1
                    if break_at is not None and break_at == (inst.index, count):
                        raise BreakHere()
                self.ip += 1
                tx.budget -= 1
                self.executed += 1
                if tx.budget < 0 or self.executed > frame_budget:
                    raise _budget.over_budget(self, tx.budget, own=self.executed > frame_budget)
                handler = table.get(inst.opname)
                if handler is None:
                    raise Unsupported(f"the opcode {inst.opname}")
                try:
                    handler(self, inst)
                except TracedException as raised:
                    if not self.unwind(raised, inst):
                        raise
                    forget_handled(raised)
        except FrameReturn as ret:
            return ret.value
        except (FrameSuspend, BreakHere):
            raise
        except Exception as error:
            if isinstance(error, RecursionError):  # Python's own stack, not the program's
                exc = _budget.python_too_deep(self)
            else:
                exc = (
                    error if isinstance(error, Unsupported) else internal_error(error, self.current)
                )
            if (
                visits is not None
                and exc.break_index is None
                and self.current is not None
                and not exc.frame_bound
            ):
                raised = next((at for at in self.handling if at is not None), None)
                if raised is not None:  # break where the handled exception was raised
                    exc.break_index, exc.break_visit = raised
                else:
                    exc.break_index = self.current.index
                    exc.break_visit = visits[self.current.index]
            exc.traced_stack.append(f"{self.location()} in {self.code.co_qualname}")
            if not _is_library(self.code.co_filename):
                exc.reached_from(self.location())
            raise exc.located(self.location()) from exc.__cause__


def internal_error(error: BaseException, inst: Instruction | None) -> Unsupported:
    """An exception raised by sapwood's own code while tracing, as the graph break it becomes:
    the instruction runs eagerly (or, with ``fullgraph=True``, this typed error is raised)."""
    where = f"the instruction {inst.opname}" if inst is not None else "tracing"
    exc = Unsupported(
        f"{where}, because of an internal error of sapwood ({type(error).__name__}: {error})",
        hint="This is a sapwood bug; the code runs eagerly there. Please report it.",
    )
    exc.__cause__ = error
    return exc


def format_user_stack(frames: tuple[tuple[types.CodeType, int], ...]) -> str:
    """``(code, line)`` pairs, outermost first, in the layout of a Python traceback.

    Graph nodes carry this as ``meta["stack_trace"]``, so a backend's message about a node
    (a CUDA graph output read after it was overwritten, say) can name the user's line.
    """
    parts = []
    for code, line in frames:
        name = getattr(code, "co_qualname", code.co_name)
        parts.append(f'  File "{code.co_filename}", line {line}, in {name}\n')
        text = linecache.getline(code.co_filename, line).strip()
        if text:
            parts.append(f"    {text}\n")
    return "".join(parts)
