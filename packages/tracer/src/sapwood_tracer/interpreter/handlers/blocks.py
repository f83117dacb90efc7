"""``with`` blocks and exceptions: entering a context, raising, matching and handling.

The normal path of a ``with`` block: ``BEFORE_WITH`` enters a context manager value and pushes
its bound ``__exit__``, which the compiler's normal-exit sequence calls with three ``None``s.

Exceptions follow CPython's protocol (alike in 3.11, 3.12 and 3.13). A raise is a
:class:`~sapwood_tracer.errors.TracedException`; the frame sends it to the handler its
exception table names (see :mod:`..frame`). The handler code then runs here, symbolically:
``PUSH_EXC_INFO`` makes the exception the one being handled (saving the previous one on the
stack), ``CHECK_EXC_MATCH`` tests it against an ``except`` clause's classes,
``WITH_EXCEPT_START`` gives it to a ``with`` block's ``__exit__``, ``RERAISE`` raises it on, and
``POP_EXCEPT`` restores what was handled before. A decided raise thus stays in the graph.
Exception groups (``except*``) and ``throw()`` into generators are refused.
"""

from __future__ import annotations

from ...errors import TracedException, Unsupported
from ...values.base import ConstantValue, Value
from ...values.exceptions import OUTER_EXCEPTION, ExceptionValue, TracebackValue, raise_error
from ..frame import SymbolicFrame
from ..instructions import Instruction
from ..registry import opcode


@opcode("BEFORE_WITH")
def before_with(frame: SymbolicFrame, inst: Instruction) -> None:
    manager = frame.pop()
    exit_fn, entered = frame.tx.enter_context(manager)
    frame.push(exit_fn)
    frame.push(entered)


def _exception(frame: SymbolicFrame, value: Value) -> ExceptionValue:
    """What ``raise value`` raises: an exception instance, or a class called with no args."""
    if isinstance(value, ExceptionValue):
        return value
    cls = value.as_constant() if value.is_constant() else None
    if isinstance(cls, type) and issubclass(cls, BaseException):
        made = frame.tx.call(frame.tx.wrap_trusted(cls), [], {})
        if not isinstance(made, ExceptionValue):
            raise Unsupported(f"raising {value.describe()}, whose instances are not modelled")
        return made
    if isinstance(value.python_type(), type) and issubclass(value.python_type(), BaseException):
        raise Unsupported(f"raising {value.describe()} (an exception made outside the trace)")
    raise_error(TypeError, "exceptions must derive from BaseException")
    raise AssertionError  # (raise_error raises)


@opcode("RAISE_VARARGS")
def raise_varargs(frame: SymbolicFrame, inst: Instruction) -> None:
    if inst.arg == 0:  # a bare `raise`: the exception being handled
        handled = frame.tx.topmost_handled()
        if handled is OUTER_EXCEPTION:
            if not frame.tx.caller_handles_nothing():
                raise Unsupported("a bare raise of the exception the caller is handling")
            handled = None
        if handled is None:
            raise_error(RuntimeError, "No active exception to reraise")
        raise _reraised(handled)
    cause = frame.pop() if inst.arg == 2 else None
    exc = _exception(frame, frame.pop())
    if cause is not None:  # raise exc from cause
        if cause.is_constant() and cause.as_constant() is None:
            exc.attrs["__cause__"] = cause
        else:
            exc.attrs["__cause__"] = _exception(frame, cause)
        exc.attrs["__suppress_context__"] = ConstantValue(True)
    raise TracedException(exc)


@opcode("PUSH_EXC_INFO")
def push_exc_info(frame: SymbolicFrame, inst: Instruction) -> None:
    value = frame.pop()
    tx = frame.tx
    previous = tx.handled
    frame.push(ConstantValue(None) if previous is None else previous)
    tx.handled = value
    frame.handling.append(frame.raised_at)
    frame.push(value)


@opcode("POP_EXCEPT")
def pop_except(frame: SymbolicFrame, inst: Instruction) -> None:
    previous = frame.pop()
    frame.tx.handled = (
        None if previous.is_constant() and previous.as_constant() is None else previous
    )
    if frame.handling:
        frame.handling.pop()


def _exception_classes(value: Value) -> tuple[type, ...]:
    classes = value.as_constant()
    classes = classes if isinstance(classes, tuple) else (classes,)
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise_error(
                TypeError,
                "catching classes that do not inherit from BaseException is not allowed",
            )
    return classes


@opcode("CHECK_EXC_MATCH")
def check_exc_match(frame: SymbolicFrame, inst: Instruction) -> None:
    classes = _exception_classes(frame.pop())
    exc = frame.peek()
    if not isinstance(exc, ExceptionValue):
        raise Unsupported(f"matching {exc.describe()} against except clauses")
    frame.push(ConstantValue(issubclass(exc.cls, classes)))


@opcode("RERAISE")
def reraise(frame: SymbolicFrame, inst: Instruction) -> None:
    exc = frame.pop()
    if inst.arg:
        frame.pop()  # the raising offset (CPython restores f_lasti from it)
    if not isinstance(exc, ExceptionValue):
        raise Unsupported(f"re-raising {exc.describe()}")
    raise _reraised(exc)


def _reraised(exc: Value) -> TracedException:
    """``exc`` raised on as it is: a re-raise does not chain (its ``__context__`` stays)."""
    raised = TracedException(exc)
    raised.chained = True
    return raised


@opcode("WITH_EXCEPT_START")
def with_except_start(frame: SymbolicFrame, inst: Instruction) -> None:
    # below: __exit__, the raising offset, the exception handled before; on top: this one
    exc = frame.peek()
    exit_fn = frame.peek(4)
    if not isinstance(exc, ExceptionValue):
        raise Unsupported(f"leaving a with block through {exc.describe()}")
    cls = frame.tx.wrap_trusted(exc.cls)
    frame.push(frame.tx.call(exit_fn, [cls, exc, TracebackValue(exc)], {}))


@opcode("CHECK_EG_MATCH", "PREP_RERAISE_STAR", "CLEANUP_THROW")
def exception_groups_and_throw(frame: SymbolicFrame, inst: Instruction) -> None:
    raise Unsupported(f"an exception group or a generator's throw() ({inst.opname})")
