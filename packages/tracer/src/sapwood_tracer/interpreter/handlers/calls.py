"""Calls and function creation: CALL, CALL_FUNCTION_EX, MAKE_FUNCTION, generators.

The calling convention is the same on 3.11 and 3.12: below the arguments lie either
``NULL, callable`` or ``callable, self``. 3.11 precedes CALL with PRECALL (a no-op here);
``KW_NAMES`` names the trailing keyword arguments of the next CALL on both.

Generators run lazily: calling a generator function runs its prologue up to
RETURN_GENERATOR and returns a generator value; each ``next`` resumes the suspended frame up
to its next YIELD_VALUE, so generator and consumer interleave exactly as in Python.
"""

from __future__ import annotations

import types

from ...errors import Unsupported
from ...values.base import NULL, ConstantValue, IteratorValue, Value
from ...values.containers import DictValue, TupleValue
from ...values.functions import NestedFunctionValue
from ..frame import FrameSuspend, SymbolicFrame
from ..instructions import Instruction
from ..registry import opcode


@opcode("CALL")
def call(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    kw_names = frame.kw_names
    frame.kw_names = ()
    args = frame.popn(inst.arg)
    upper = frame.pop()
    lower = frame.pop()
    if lower is NULL:
        fn = upper
    else:
        fn = lower
        args = [upper, *args]
    if kw_names:
        split = len(args) - len(kw_names)
        kwargs = dict(zip(kw_names, args[split:]))
        args = args[:split]
    else:
        kwargs = {}
    frame.push(frame.tx.call(fn, args, kwargs))


@opcode("CALL_FUNCTION_EX")
def call_function_ex(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    tx = frame.tx
    kwargs_value = frame.pop() if inst.arg & 1 else None
    args_value = frame.pop()
    fn = frame.pop()
    if frame.stack and frame.peek() is NULL:
        frame.pop()
    args = tx.unpack(args_value)
    kwargs: dict[str, Value] = {}
    if kwargs_value is not None:
        mapping = tx.as_mapping(kwargs_value)
        for key, value in mapping.entries.values():
            name = key.as_constant()
            if not isinstance(name, str):
                raise Unsupported("a ** argument with non-string keys (TypeError)")
            kwargs[name] = value
    frame.push(tx.call(fn, args, kwargs))


_MAKE_FUNCTION_CLOSURE = 0x08
_MAKE_FUNCTION_ANNOTATIONS = 0x04
_MAKE_FUNCTION_KWDEFAULTS = 0x02
_MAKE_FUNCTION_DEFAULTS = 0x01


@opcode("MAKE_FUNCTION")
def make_function(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    flags = inst.arg
    code_value = frame.pop()
    code = code_value.as_constant()
    assert isinstance(code, types.CodeType)
    cells: tuple[Value, ...] = ()
    kwdefaults: dict[str, Value] = {}
    defaults: tuple[Value, ...] = ()
    if flags & _MAKE_FUNCTION_CLOSURE:
        cells = tuple(frame.pop().unpack(frame.tx))
    if flags & _MAKE_FUNCTION_ANNOTATIONS:
        frame.pop()
    if flags & _MAKE_FUNCTION_KWDEFAULTS:
        mapping = frame.pop()
        assert isinstance(mapping, DictValue)
        kwdefaults = {k.as_constant(): v for k, v in mapping.entries.values()}
    if flags & _MAKE_FUNCTION_DEFAULTS:
        defaults_value = frame.pop()
        assert isinstance(defaults_value, TupleValue)
        defaults = tuple(defaults_value.items)
    frame.push(
        NestedFunctionValue(
            code, frame.f_globals, frame.globals_source, defaults, kwdefaults, cells
        )
    )


@opcode("RETURN_GENERATOR")
def return_generator(frame: SymbolicFrame, inst: Instruction) -> None:
    if not frame.is_generator:
        raise Unsupported("RETURN_GENERATOR outside a generator")
    # Creating the generator ends the call; the first next() resumes here and sends None,
    # which the following POP_TOP discards.
    raise FrameSuspend(ConstantValue(None))


@opcode("YIELD_VALUE")
def yield_value(frame: SymbolicFrame, inst: Instruction) -> None:
    if not frame.is_generator:
        raise Unsupported("yield outside a generator")
    raise FrameSuspend(frame.pop())


@opcode("GET_YIELD_FROM_ITER")
def get_yield_from_iter(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(frame.tx.iterate(frame.pop()))


def _send(frame: SymbolicFrame) -> Value | None:
    """Advance the sub-iterator of ``yield from`` with the sent value (None only)."""
    sent = frame.pop()
    if not (sent.is_constant() and sent.as_constant() is None):
        raise Unsupported("send() of a value into a generator")
    receiver = frame.peek()
    if not isinstance(receiver, IteratorValue):
        raise Unsupported(f"'yield from' over {receiver.describe()}")
    return receiver.next_value(frame.tx)


@opcode("SEND", until=(3, 12))
def send_311(frame: SymbolicFrame, inst: Instruction) -> None:
    # On exhaustion 3.11 replaces the sub-iterator with its return value and jumps.
    value = _send(frame)
    if value is None:
        frame.pop()
        frame.push(ConstantValue(None))
        frame.jump(inst)
    else:
        frame.push(value)


@opcode("SEND", since=(3, 12))
def send_312(frame: SymbolicFrame, inst: Instruction) -> None:
    # 3.12 keeps the sub-iterator below the return value; END_SEND removes it.
    value = _send(frame)
    if value is None:
        frame.push(ConstantValue(None))
        frame.jump(inst)
    else:
        frame.push(value)


@opcode("END_SEND", since=(3, 12))
def end_send(frame: SymbolicFrame, inst: Instruction) -> None:
    value = frame.pop()
    frame.pop()
    frame.push(value)


@opcode("GET_AWAITABLE", "GET_AITER", "GET_ANEXT", "BEFORE_ASYNC_WITH", "END_ASYNC_FOR")
def asynchronous(frame: SymbolicFrame, inst: Instruction) -> None:
    raise Unsupported(f"await or async iteration ({inst.opname})")
