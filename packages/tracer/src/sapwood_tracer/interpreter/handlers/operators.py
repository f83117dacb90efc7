"""Operators: BINARY_OP, unary ops, comparisons, identity, containment, subscripts, f-strings.

Version differences: 3.12 adds ``BINARY_SLICE``/``STORE_SLICE`` and replaces
``UNARY_POSITIVE`` and ``LIST_TO_TUPLE`` with ``CALL_INTRINSIC_1``. 3.13 splits
``FORMAT_VALUE`` into ``CONVERT_VALUE`` (``!s``/``!r``/``!a``) and ``FORMAT_SIMPLE`` /
``FORMAT_WITH_SPEC``, and may set bit 16 of ``COMPARE_OP`` to ask for the result's truth:
only a conditional jump or ``not`` consumes such a result, and they take its truth anyway.
"""

from __future__ import annotations

import dis
import operator
from typing import Any

from ...errors import Unsupported
from ...pymodel import operators as ops
from ...pymodel.dict_subclasses import delete_item, store_item
from ...pymodel.text import inlines_text, member_text, object_format, object_text
from ...values.base import ConstantValue, Value
from ...values.containers import ListValue, SliceValue, TupleValue
from ...values.generators import stop_iteration_error
from ...values.identity import compare_ids, same_object
from ...values.objects import NewObjectValue, ObjectValue
from ...values.symbolic import specialised_int
from ..frame import SymbolicFrame
from ..instructions import Instruction
from ..registry import opcode

_NB_OPS: list[tuple[str, str]] = dis._nb_ops  # type: ignore[attr-defined]


@opcode("BINARY_OP")
def binary_op(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    symbol = _NB_OPS[inst.arg][1]
    b = frame.pop()
    a = frame.pop()
    fn = ops.INPLACE.get(symbol) or ops.BINARY[symbol]
    frame.push(ops.binary(frame.tx, fn, a, b))


@opcode("UNARY_NEGATIVE")
def unary_negative(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(ops.unary(frame.tx, operator.neg, frame.pop()))


@opcode("UNARY_POSITIVE", until=(3, 12))
def unary_positive(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(ops.unary(frame.tx, operator.pos, frame.pop()))


@opcode("UNARY_INVERT")
def unary_invert(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(ops.unary(frame.tx, operator.invert, frame.pop()))


@opcode("UNARY_NOT")
def unary_not(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(ConstantValue(not frame.tx.truth(frame.pop())))


# CALL_INTRINSIC_1 operands (Include/internal/pycore_intrinsics.h, 3.12)
_INTRINSIC_STOPITERATION_ERROR = 3
_INTRINSIC_UNARY_POSITIVE = 5
_INTRINSIC_LIST_TO_TUPLE = 6


@opcode("CALL_INTRINSIC_1", since=(3, 12))
def call_intrinsic_1(frame: SymbolicFrame, inst: Instruction) -> None:
    value = frame.pop()
    if inst.arg == _INTRINSIC_UNARY_POSITIVE:
        frame.push(ops.unary(frame.tx, operator.pos, value))
    elif inst.arg == _INTRINSIC_LIST_TO_TUPLE:
        assert isinstance(value, ListValue)
        frame.push(TupleValue(list(value.items)))
    elif inst.arg == _INTRINSIC_STOPITERATION_ERROR and frame.code.co_flags & 0x20:
        frame.push(stop_iteration_error(value))  # (a plain generator's: PEP 479)
    else:
        raise Unsupported(
            f"CALL_INTRINSIC_1 {inst.argrepr if hasattr(inst, 'argrepr') else inst.arg}"
        )


@opcode("CALL_INTRINSIC_2", since=(3, 12))
def call_intrinsic_2(frame: SymbolicFrame, inst: Instruction) -> None:
    raise Unsupported(f"CALL_INTRINSIC_2 {inst.arg} (exception groups or type parameters)")


def _compare(frame: SymbolicFrame, inst: Instruction) -> None:
    # dis resolves the operator in every version (3.12 keeps it in the high bits of arg)
    b = frame.pop()
    a = frame.pop()
    ids = compare_ids(frame.tx, ops.COMPARE[inst.argval], a, b)  # id(x) == id(y)
    frame.push(ids if ids is not None else ops.compare(frame.tx, inst.argval, a, b))


def _truth_of(compare: Any) -> Any:
    def compare_then_truth(a: Any, b: Any) -> bool:
        return bool(compare(a, b))

    return compare_then_truth


def _eager_compare_311(inst: Instruction) -> Any:
    return ops.COMPARE[inst.argval]


def _eager_compare_313(inst: Instruction) -> Any:
    # bit 16 asks for the result's truth: run eagerly, the jump after it needs a real bool
    compare = ops.COMPARE[inst.argval]
    return _truth_of(compare) if inst.arg is not None and inst.arg & 16 else compare


#: The traced comparison leaves bit 16 to the consumer (a jump or ``not`` takes the truth);
#: run eagerly at a graph break, the comparison is done as CPython does it.
compare_op = opcode("COMPARE_OP", until=(3, 13))(_compare)
compare_op.eager_function = _eager_compare_311  # type: ignore[attr-defined]


def _compare_313(frame: SymbolicFrame, inst: Instruction) -> None:
    _compare(frame, inst)


compare_op_313 = opcode("COMPARE_OP", since=(3, 13))(_compare_313)
compare_op_313.eager_function = _eager_compare_313  # type: ignore[attr-defined]


@opcode("IS_OP")
def is_op(frame: SymbolicFrame, inst: Instruction) -> None:
    b = frame.pop()
    a = frame.pop()
    same = same_object(frame.tx, a, b)
    frame.push(ConstantValue(same != bool(inst.arg)))


@opcode("CONTAINS_OP")
def contains_op(frame: SymbolicFrame, inst: Instruction) -> None:
    container = frame.pop()
    item = frame.pop()
    found = ops.contains(frame.tx, container, item)
    frame.push(ConstantValue(found != bool(inst.arg)))


@opcode("BINARY_SUBSCR")
def binary_subscr(frame: SymbolicFrame, inst: Instruction) -> None:
    key = frame.pop()
    container = frame.pop()
    frame.push(frame.tx.getitem(container, key))


@opcode("STORE_SUBSCR")
def store_subscr(frame: SymbolicFrame, inst: Instruction) -> None:
    key = frame.pop()
    container = frame.pop()
    value = frame.pop()
    store_item(frame.tx, container, key, value)


@opcode("DELETE_SUBSCR")
def delete_subscr(frame: SymbolicFrame, inst: Instruction) -> None:
    key = frame.pop()
    container = frame.pop()
    delete_item(frame.tx, container, key)


@opcode("BINARY_SLICE", since=(3, 12))
def binary_slice(frame: SymbolicFrame, inst: Instruction) -> None:
    stop = frame.pop()
    start = frame.pop()
    container = frame.pop()
    frame.push(frame.tx.getitem(container, SliceValue([start, stop])))


@opcode("STORE_SLICE", since=(3, 12))
def store_slice(frame: SymbolicFrame, inst: Instruction) -> None:
    stop = frame.pop()
    start = frame.pop()
    container = frame.pop()
    value = frame.pop()
    container.setitem(frame.tx, SliceValue([start, stop]), value)


_CONVERSIONS = {0: None, 1: str, 2: repr, 3: ascii}
_DUNDERS = {str: "__str__", repr: "__repr__"}


@opcode("FORMAT_VALUE", until=(3, 13))
def format_value(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    spec = frame.pop().as_constant() if inst.arg & 0x04 else ""
    value: Value = frame.pop()
    frame.push(format_constant(frame, value, _CONVERSIONS[inst.arg & 0x03], spec))


def format_constant(frame: SymbolicFrame, value: Value, conversion: Any, spec: str | None) -> Value:
    """``format(conversion(value), spec)`` of a constant; ``spec`` None: convert only."""
    value = specialised_int(value)  # (the text of a symbolic int: its value, guarded)
    if isinstance(value, (ObjectValue, NewObjectValue)) and conversion is not ascii:
        # a user object: its __str__/__repr__ (a conversion) and __format__, inlined
        if conversion is not None:
            value, conversion = object_text(frame.tx, conversion, [value], {}), None
        elif spec is not None:
            return object_format(frame.tx, value, spec)
    if not value.is_constant():
        raise Unsupported(f"formatting {value.describe()} into a string")
    if inlines_text(value):
        # an enum member whose class has code of the user's: its methods, inlined
        if conversion is ascii:
            raise Unsupported(f"ascii() of {value.describe()}")
        if conversion is not None:
            value = member_text(frame.tx, value, _DUNDERS[conversion])
            conversion = None
        elif spec is not None:
            return member_text(frame.tx, value, "__format__", spec)
    raw = value.as_constant()
    if conversion is not None:
        raw = conversion(raw)
    return ConstantValue(raw if spec is None else format(raw, spec))


@opcode("CONVERT_VALUE", since=(3, 13))
def convert_value(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    value = frame.pop()
    frame.push(format_constant(frame, value, _CONVERSIONS[inst.arg], None))


@opcode("FORMAT_SIMPLE", since=(3, 13))
def format_simple(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(format_constant(frame, frame.pop(), None, ""))


@opcode("FORMAT_WITH_SPEC", since=(3, 13))
def format_with_spec(frame: SymbolicFrame, inst: Instruction) -> None:
    spec = frame.pop().as_constant()
    value = frame.pop()
    frame.push(format_constant(frame, value, None, spec))


@opcode("BUILD_STRING")
def build_string(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    parts = frame.popn(inst.arg)
    frame.push(ConstantValue("".join(p.as_constant() for p in parts)))
