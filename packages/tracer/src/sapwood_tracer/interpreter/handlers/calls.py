"""Calls and function creation: CALL, CALL_KW, CALL_FUNCTION_EX, MAKE_FUNCTION, generators.

The calling convention differs by version:

* 3.11 and 3.12: below the arguments lie either ``NULL, callable`` or ``callable, self``.
  3.11 precedes CALL with PRECALL (a no-op here); ``KW_NAMES`` names the trailing keyword
  arguments of the next CALL on both.
* 3.13: below the arguments lie ``callable, self_or_null`` (the callable is always the
  lower one); keyword names travel on the stack as a tuple above the arguments, for
  ``CALL_KW``. ``CALL_FUNCTION_EX`` sees ``callable, NULL, args[, kwargs]``.
  ``MAKE_FUNCTION`` takes only the code object; ``SET_FUNCTION_ATTRIBUTE`` then sets its
  defaults, keyword defaults, annotations and closure one by one.

Each call handler carries its operand reader (``handler.operands(frame, inst)``: callee,
positional and keyword arguments, and how many stack slots the call uses, read without
popping), so a graph break at a call reads the call exactly as the handler would.

Generators run lazily: calling a generator function runs its prologue up to
RETURN_GENERATOR and returns a generator value; each ``next`` resumes the suspended frame up
to its next YIELD_VALUE, so generator and consumer interleave exactly as in Python.
"""

from __future__ import annotations

import types
from collections.abc import Callable

from ...errors import Unsupported
from ...values.base import NULL, ConstantValue, IteratorValue, Value
from ...values.containers import DictValue, TupleValue
from ...values.functions import NestedFunctionValue
from ..frame import FrameSuspend, SymbolicFrame
from ..instructions import Instruction
from ..registry import Handler, opcode

#: callee, positional arguments, keyword arguments, stack slots the call uses
CallOperands = tuple[Value, list[Value], dict[str, Value], int]
OperandReader = Callable[[SymbolicFrame, Instruction], CallOperands]


def _call_handler(read: OperandReader) -> Handler:
    def handler(frame: SymbolicFrame, inst: Instruction) -> None:
        callee, args, kwargs, depth = read(frame, inst)
        frame.kw_names = ()
        del frame.stack[len(frame.stack) - depth :]
        frame.push(frame.tx.call(callee, args, kwargs))

    handler.operands = read  # type: ignore[attr-defined]
    return handler


def _split_keywords(
    args: list[Value], names: tuple[str, ...]
) -> tuple[list[Value], dict[str, Value]]:
    if not names:
        return args, {}
    split = len(args) - len(names)
    return args[:split], dict(zip(names, args[split:]))


def _call_operands_311(frame: SymbolicFrame, inst: Instruction) -> CallOperands:
    assert inst.arg is not None
    argc = inst.arg
    stack = frame.stack
    args = list(stack[len(stack) - argc :]) if argc else []
    upper, lower = stack[-argc - 1], stack[-argc - 2]
    if lower is NULL:
        callee = upper
    else:
        callee, args = lower, [upper, *args]
    args, kwargs = _split_keywords(args, frame.kw_names)
    return callee, args, kwargs, argc + 2


def _call_operands_313(
    frame: SymbolicFrame, inst: Instruction, kw_names: Value | None
) -> CallOperands:
    assert inst.arg is not None
    argc = inst.arg
    stack = frame.stack
    top = len(stack) - (kw_names is not None)
    args = list(stack[top - argc : top]) if argc else []
    callee, self_or_null = stack[top - argc - 2], stack[top - argc - 1]
    if self_or_null is not NULL:
        args = [self_or_null, *args]
    names = tuple(kw_names.as_constant()) if kw_names is not None else ()
    args, kwargs = _split_keywords(args, names)
    return callee, args, kwargs, argc + 2 + (kw_names is not None)


opcode("CALL", until=(3, 13))(_call_handler(_call_operands_311))
opcode("CALL", since=(3, 13))(
    _call_handler(lambda frame, inst: _call_operands_313(frame, inst, None))
)
opcode("CALL_KW", since=(3, 13))(
    _call_handler(lambda frame, inst: _call_operands_313(frame, inst, frame.peek()))
)


def _star_arguments(
    frame: SymbolicFrame, args_value: Value, kwargs_value: Value | None
) -> tuple[list[Value], dict[str, Value]]:
    tx = frame.tx
    args = args_value.collect(tx)
    kwargs: dict[str, Value] = {}
    if kwargs_value is not None:
        mapping = tx.as_mapping(kwargs_value)
        for key, value in mapping.entries.values():
            name = key.as_constant()
            if not isinstance(name, str):
                raise Unsupported("a ** argument with non-string keys (TypeError)")
            kwargs[name] = value
    return list(args), kwargs


#: callee, positional arguments before the star (3.13's self), the ``*`` operand, the ``**``
#: operand (or None), stack slots the call uses
StarOperands = tuple[Value, list[Value], Value, Value | None, int]


def _call_ex_star_311(frame: SymbolicFrame, inst: Instruction) -> StarOperands:
    # [NULL] callable, args[, kwargs]
    has_kwargs = bool(inst.arg and inst.arg & 1)
    depth = 2 + has_kwargs
    stack = frame.stack
    star, star_kw = stack[-depth + 1], stack[-1] if has_kwargs else None
    callee = stack[-depth]
    if len(stack) > depth and stack[-depth - 1] is NULL:
        depth += 1
    return callee, [], star, star_kw, depth


def _call_ex_star_313(frame: SymbolicFrame, inst: Instruction) -> StarOperands:
    # callable, NULL (or self), args[, kwargs]
    has_kwargs = bool(inst.arg and inst.arg & 1)
    depth = 3 + has_kwargs
    stack = frame.stack
    star, star_kw = stack[-depth + 2], stack[-1] if has_kwargs else None
    callee, self_or_null = stack[-depth], stack[-depth + 1]
    return callee, [] if self_or_null is NULL else [self_or_null], star, star_kw, depth


def _unpacking(read_star: Callable[[SymbolicFrame, Instruction], StarOperands]) -> OperandReader:
    """The operands of ``CALL_FUNCTION_EX`` with its ``*``/``**`` operands unpacked (as the
    call binds them); the reader keeps ``read_star`` as ``star``, for a graph break at the
    call, which leaves the unpacking to the eager call."""

    def read(frame: SymbolicFrame, inst: Instruction) -> CallOperands:
        callee, first, star, star_kw, depth = read_star(frame, inst)
        args, kwargs = _star_arguments(frame, star, star_kw)
        return callee, [*first, *args], kwargs, depth

    read.star = read_star  # type: ignore[attr-defined]
    return read


opcode("CALL_FUNCTION_EX", until=(3, 13))(_call_handler(_unpacking(_call_ex_star_311)))
opcode("CALL_FUNCTION_EX", since=(3, 13))(_call_handler(_unpacking(_call_ex_star_313)))


_MAKE_FUNCTION_CLOSURE = 0x08
_MAKE_FUNCTION_ANNOTATIONS = 0x04
_MAKE_FUNCTION_KWDEFAULTS = 0x02
_MAKE_FUNCTION_DEFAULTS = 0x01


def _code_operand(frame: SymbolicFrame) -> types.CodeType:
    code = frame.pop().as_constant()
    assert isinstance(code, types.CodeType)
    return code


def _set_function_attribute(
    frame: SymbolicFrame, fn: NestedFunctionValue, flag: int, attr: Value
) -> None:
    if flag == _MAKE_FUNCTION_CLOSURE:
        fn.cell_values = tuple(attr.unpack(frame.tx))
    elif flag == _MAKE_FUNCTION_KWDEFAULTS:
        assert isinstance(attr, DictValue)
        fn.kwdefault_values = {k.as_constant(): v for k, v in attr.entries.values()}
    elif flag == _MAKE_FUNCTION_DEFAULTS:
        assert isinstance(attr, TupleValue)
        fn.default_values = tuple(attr.items)
    elif flag == _MAKE_FUNCTION_ANNOTATIONS:  # annotations are not kept: reading them is refused
        fn.annotations = None
    else:
        raise Unsupported(f"a function attribute set by flag {flag:#x}")


def _new_function(frame: SymbolicFrame, code: types.CodeType) -> NestedFunctionValue:
    return NestedFunctionValue(
        code, frame.f_globals, frame.globals_source, (), {}, (), DictValue({}), DictValue({})
    )


@opcode("MAKE_FUNCTION", until=(3, 13))
def make_function(frame: SymbolicFrame, inst: Instruction) -> None:
    # the flagged attributes lie below the code object: closure first, defaults deepest
    assert inst.arg is not None
    fn = _new_function(frame, _code_operand(frame))
    for flag in (
        _MAKE_FUNCTION_CLOSURE,
        _MAKE_FUNCTION_ANNOTATIONS,
        _MAKE_FUNCTION_KWDEFAULTS,
        _MAKE_FUNCTION_DEFAULTS,
    ):
        if inst.arg & flag:
            _set_function_attribute(frame, fn, flag, frame.pop())
    frame.push(fn)


@opcode("MAKE_FUNCTION", since=(3, 13))
def make_function_313(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(_new_function(frame, _code_operand(frame)))


@opcode("SET_FUNCTION_ATTRIBUTE", since=(3, 13))
def set_function_attribute(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    fn = frame.pop()
    attr = frame.pop()
    assert isinstance(fn, NestedFunctionValue)
    _set_function_attribute(frame, fn, inst.arg, attr)
    frame.push(fn)


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


def _returned(receiver: Value) -> Value:
    """The value of ``yield from`` over the exhausted ``receiver``: its StopIteration's."""
    assert isinstance(receiver, IteratorValue)
    args = receiver.stop_args()
    return args[0] if args else ConstantValue(None)


@opcode("SEND", until=(3, 12))
def send_311(frame: SymbolicFrame, inst: Instruction) -> None:
    # On exhaustion 3.11 replaces the sub-iterator with its return value and jumps.
    value = _send(frame)
    if value is None:
        frame.push(_returned(frame.pop()))
        frame.jump(inst)
    else:
        frame.push(value)


@opcode("SEND", since=(3, 12))
def send_312(frame: SymbolicFrame, inst: Instruction) -> None:
    # 3.12 keeps the sub-iterator below the return value; END_SEND removes it.
    value = _send(frame)
    if value is None:
        frame.push(_returned(frame.peek()))
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
