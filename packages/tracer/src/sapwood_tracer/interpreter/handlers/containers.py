"""Building, extending and unpacking containers.

Version differences: ``LIST_TO_TUPLE`` exists up to 3.11 (3.12 uses ``CALL_INTRINSIC_1``).
"""

from __future__ import annotations

from ...errors import Unsupported
from ...values.base import BuiltinValue, ConstantValue, IteratorValue, Value
from ...values.containers import DictValue, ListValue, SliceValue, TupleValue
from ...values.exceptions import python_error
from ...values.sets import SetValue
from ...values.tuple_identity import KnownTupleValue
from ..frame import SymbolicFrame
from ..instructions import Instruction
from ..registry import opcode


@opcode("BUILD_TUPLE")
def build_tuple(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    items = frame.popn(inst.arg)
    frame.push(KnownTupleValue(items) if items else TupleValue(items))  # (a new tuple)


@opcode("BUILD_LIST")
def build_list(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    frame.push(ListValue(frame.popn(inst.arg)))


@opcode("BUILD_SET")
def build_set(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    frame.push(SetValue.of(frame.tx, frame.popn(inst.arg)))


@opcode("BUILD_MAP")
def build_map(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    flat = frame.popn(2 * inst.arg)
    pairs = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
    frame.push(DictValue.from_pairs(frame.tx, pairs))


@opcode("BUILD_CONST_KEY_MAP")
def build_const_key_map(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    keys = frame.pop().unpack(frame.tx)
    values = frame.popn(inst.arg)
    frame.push(DictValue.from_pairs(frame.tx, list(zip(keys, values))))


@opcode("BUILD_SLICE")
def build_slice(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    frame.push(SliceValue(frame.popn(inst.arg)))


def _container_below(frame: SymbolicFrame, inst: Instruction) -> Value:
    assert inst.arg is not None
    return frame.peek(inst.arg)


@opcode("LIST_APPEND")
def list_append(frame: SymbolicFrame, inst: Instruction) -> None:
    value = frame.pop()
    target = _container_below(frame, inst)
    assert isinstance(target, ListValue)
    # (3.12 inlines comprehensions: after a graph break inside one, the list being built
    # comes in from the entry, and its appends are written back like any input list's)
    target.check_mutable(frame.tx)
    target.items.append(value)


@opcode("SET_ADD")
def set_add(frame: SymbolicFrame, inst: Instruction) -> None:
    value = frame.pop()
    target = _container_below(frame, inst)
    assert isinstance(target, SetValue)
    target.call_method(frame.tx, "add", [value], {})


@opcode("MAP_ADD")
def map_add(frame: SymbolicFrame, inst: Instruction) -> None:
    value = frame.pop()
    key = frame.pop()
    target = _container_below(frame, inst)
    assert isinstance(target, DictValue)
    target.setitem(frame.tx, key, value)


@opcode("LIST_EXTEND")
def list_extend(frame: SymbolicFrame, inst: Instruction) -> None:
    value = frame.pop()
    target = _container_below(frame, inst)
    assert isinstance(target, ListValue)
    items = value.collect(frame.tx)
    target.check_mutable(frame.tx)
    target.items.extend(items)


@opcode("SET_UPDATE")
def set_update(frame: SymbolicFrame, inst: Instruction) -> None:
    value = frame.pop()
    target = _container_below(frame, inst)
    assert isinstance(target, SetValue)
    if target.source is not None:  # (from the entry, after a break: replayed on the set)
        target.call_method(frame.tx, "update", [value], {})
    else:
        target.add_all(frame.tx, value)


@opcode("DICT_UPDATE", "DICT_MERGE")
def dict_update(frame: SymbolicFrame, inst: Instruction) -> None:
    value = frame.pop()
    target = _container_below(frame, inst)
    assert isinstance(target, DictValue)
    target.check_mutable(frame.tx)
    if inst.opname == "DICT_MERGE":
        other = frame.tx.as_mapping(value)
        for k in other.entries:
            if k in target.entries:
                raise Unsupported(f"keyword argument {k!r} given twice (TypeError)")
        target.update_from(frame.tx, other)
    else:
        target.update_from(frame.tx, frame.tx.as_mapping(value))


@opcode("LIST_TO_TUPLE", until=(3, 12))
def list_to_tuple(frame: SymbolicFrame, inst: Instruction) -> None:
    value = frame.pop()
    assert isinstance(value, ListValue)
    frame.push(TupleValue(list(value.items)))


@opcode("UNPACK_SEQUENCE")
def unpack_sequence(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    items = _unpacked(frame, frame.pop(), inst.arg + 1)
    if len(items) != inst.arg:
        if len(items) > inst.arg:
            raise python_error(ValueError, f"too many values to unpack (expected {inst.arg})")
        raise python_error(
            ValueError, f"not enough values to unpack (expected {inst.arg}, got {len(items)})"
        )
    frame.stack.extend(reversed(items))


@opcode("UNPACK_EX")
def unpack_ex(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    before, after = inst.arg & 0xFF, inst.arg >> 8
    items = _unpacked(frame, frame.pop(), None)
    if len(items) < before + after:
        raise python_error(
            ValueError,
            f"not enough values to unpack (expected at least {before + after}, got {len(items)})",
        )
    middle = ListValue(items[before : len(items) - after])
    ordered = [*items[:before], middle, *items[len(items) - after :]]
    frame.stack.extend(reversed(ordered))


@opcode("GET_LEN")
def get_len(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(ConstantValue(frame.tx.length(frame.peek())))


def _unpacked(frame: SymbolicFrame, value: Value, at_most: int | None) -> list[Value]:
    """The items unpacking takes from ``value``: from an iterator, no more than ``at_most``
    (Python stops pulling once it knows the count is wrong); a constant that is not iterable
    raises Python's TypeError."""
    if value.is_constant() and isinstance(value, (ConstantValue, BuiltinValue)):
        kind = type(value.as_constant())
        if not hasattr(kind, "__iter__") and not hasattr(kind, "__getitem__"):
            raise python_error(TypeError, f"cannot unpack non-iterable {kind.__name__} object")
    if at_most is None or not isinstance(value, IteratorValue):
        return frame.tx.unpack(value)
    items: list[Value] = []
    while len(items) < at_most and (item := value.next_value(frame.tx)) is not None:
        items.append(item)
    return items
