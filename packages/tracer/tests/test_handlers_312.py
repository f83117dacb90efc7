"""The 3.12 opcode handlers, run on hand-written 3.12 instruction sequences.

These run on any Python: the frame interprets the given instructions with the 3.12 dispatch
table, so the 3.12-only meanings (inlined comprehensions, ``FOR_ITER`` skipping ``END_FOR``,
``LOAD_ATTR``'s method bit, ``LOAD_SUPER_ATTR``, ``BINARY_SLICE``, ``SEND``/``END_SEND``, ...)
are checked here as well as by the whole suite on a 3.12 interpreter.
"""

from __future__ import annotations

from typing import Any

from sapwood_tracer.interpreter.frame import SymbolicFrame
from sapwood_tracer.interpreter.graph_bridge import GraphBridge
from sapwood_tracer.interpreter.instructions import Instruction
from sapwood_tracer.interpreter.session import TraceSession
from sapwood_tracer.values.containers import ListValue

V312 = (3, 12)


def _code_with():
    def template():
        pass

    return template.__code__


def _frame(program: list[tuple], *, local_values: dict[str, Any]):
    """A 3.12 frame over ``program``: (label, opname, arg, argval, jump-label) tuples."""
    labels = {entry[0]: i for i, entry in enumerate(program) if entry[0]}
    instructions = tuple(
        Instruction(op, arg, argval, 2 * i, 1, i, labels[jump] if jump else None)
        for i, (_, op, arg, argval, jump) in enumerate(program)
    )
    tx = TraceSession(GraphBridge("t"), f_globals={}, function=None)
    fast = {
        name: tx.wrap_trusted(value)
        if not isinstance(value, list)
        else ListValue([tx.wrap_trusted(v) for v in value])
        for name, value in local_values.items()
    }
    frame = SymbolicFrame(tx, _code_with(), {}, None, fast, {}, None)
    frame.instructions = instructions
    frame.version = V312
    return frame, tx


def _run(program: list[tuple], *, local_values: dict[str, Any]):
    frame, tx = _frame(program, local_values=local_values)
    return tx.run_frame(frame), frame


def test_inlined_comprehension_restores_the_loop_variable():
    program = [
        (None, "LOAD_FAST", 0, "xs", None),
        (None, "GET_ITER", None, None, None),
        (None, "LOAD_FAST_AND_CLEAR", 1, "i", None),
        (None, "SWAP", 2, 2, None),
        (None, "BUILD_LIST", 0, 0, None),
        (None, "SWAP", 2, 2, None),
        ("loop", "FOR_ITER", 6, None, "end"),
        (None, "STORE_FAST", 1, "i", None),
        (None, "LOAD_FAST", 1, "i", None),
        (None, "LOAD_CONST", 1, 2, None),
        (None, "BINARY_OP", 5, 5, None),
        (None, "LIST_APPEND", 2, 2, None),
        (None, "JUMP_BACKWARD", 6, None, "loop"),
        ("end", "END_FOR", None, None, None),
        (None, "STORE_FAST", 2, "z", None),
        (None, "STORE_FAST", 1, "i", None),
        (None, "LOAD_FAST", 2, "z", None),
        (None, "RETURN_VALUE", None, None, None),
    ]
    result, frame = _run(program, local_values={"xs": [1, 2, 3]})
    assert result.as_constant() == [2, 4, 6]
    assert "i" not in frame.locals


def test_inlined_comprehension_keeps_an_outer_binding():
    program = [
        (None, "LOAD_FAST", 0, "xs", None),
        (None, "GET_ITER", None, None, None),
        (None, "LOAD_FAST_AND_CLEAR", 1, "i", None),
        (None, "SWAP", 2, 2, None),
        (None, "BUILD_LIST", 0, 0, None),
        (None, "SWAP", 2, 2, None),
        ("loop", "FOR_ITER", 4, None, "end"),
        (None, "STORE_FAST", 1, "i", None),
        (None, "LOAD_FAST", 1, "i", None),
        (None, "LIST_APPEND", 2, 2, None),
        (None, "JUMP_BACKWARD", 4, None, "loop"),
        ("end", "END_FOR", None, None, None),
        (None, "STORE_FAST", 2, "z", None),
        (None, "STORE_FAST", 1, "i", None),
        (None, "LOAD_FAST", 1, "i", None),
        (None, "RETURN_VALUE", None, None, None),
    ]
    result, _ = _run(program, local_values={"xs": [1, 2], "i": "outer"})
    assert result.as_constant() == "outer"


def test_slices_intrinsics_and_return_const():
    program = [
        (None, "LOAD_FAST", 0, "xs", None),
        (None, "LOAD_CONST", 1, 1, None),
        (None, "LOAD_CONST", 2, 3, None),
        (None, "BINARY_SLICE", None, None, None),
        (None, "CALL_INTRINSIC_1", 6, 6, None),  # INTRINSIC_LIST_TO_TUPLE
        (None, "STORE_FAST", 1, "t", None),
        (None, "LOAD_CONST", 3, -5, None),
        (None, "CALL_INTRINSIC_1", 5, 5, None),  # INTRINSIC_UNARY_POSITIVE
        (None, "BUILD_LIST", 1, 1, None),
        (None, "LOAD_FAST", 0, "xs", None),
        (None, "LOAD_CONST", 4, 0, None),
        (None, "LOAD_CONST", 1, 1, None),
        (None, "STORE_SLICE", None, None, None),  # xs[0:1] = [+(-5)]
        (None, "RETURN_CONST", 0, "done", None),
    ]
    result, frame = _run(program, local_values={"xs": [10, 20, 30, 40]})
    assert result.as_constant() == "done"
    assert frame.locals["t"].as_constant() == (20, 30)
    assert frame.locals["xs"].as_constant() == [-5, 20, 30, 40]


def test_load_attr_method_bit_and_none_jumps():
    program = [
        (None, "LOAD_FAST", 0, "s", None),
        (None, "LOAD_ATTR", 1, "upper", None),  # method bit set: NULL + bound method
        (None, "CALL", 0, 0, None),
        (None, "STORE_FAST", 1, "u", None),
        (None, "LOAD_FAST", 2, "n", None),
        (None, "POP_JUMP_IF_NONE", 1, None, "none"),
        (None, "RETURN_CONST", 0, "not none", None),
        ("none", "LOAD_FAST", 1, "u", None),
        (None, "RETURN_VALUE", None, None, None),
    ]
    result, _ = _run(program, local_values={"s": "ab", "n": None})
    assert result.as_constant() == "AB"


def test_send_and_end_send_delegate_to_a_sub_iterator():
    from sapwood_tracer.values.generators import GeneratorValue

    program = [
        (None, "RETURN_GENERATOR", None, None, None),
        (None, "POP_TOP", None, None, None),
        (None, "RESUME", 0, 0, None),
        (None, "LOAD_FAST", 0, "xs", None),
        (None, "GET_YIELD_FROM_ITER", None, None, None),
        (None, "LOAD_CONST", 0, None, None),
        ("send", "SEND", 3, None, "done"),
        (None, "YIELD_VALUE", 2, 2, None),
        (None, "RESUME", 2, 2, None),
        (None, "JUMP_BACKWARD_NO_INTERRUPT", 5, None, "send"),
        ("done", "END_SEND", None, None, None),
        (None, "POP_TOP", None, None, None),
        (None, "RETURN_CONST", 0, None, None),
    ]
    frame, tx = _frame(program, local_values={"xs": [1, 2, 3]})
    frame.is_generator = True
    assert tx.resume(frame)[0]  # the prologue suspends at RETURN_GENERATOR
    generator = GeneratorValue(frame)
    assert [v.as_constant() for v in generator.unpack(tx)] == [1, 2, 3]
    assert frame.stack == []


class _Base:
    def greet(self):
        return "base"


class _Child(_Base):
    def greet(self):
        return "child"


def test_load_super_attr_two_forms():
    program = [
        (None, "LOAD_GLOBAL", 0, "super", None),
        (None, "LOAD_FAST", 0, "cls", None),
        (None, "LOAD_FAST", 1, "obj", None),
        (None, "LOAD_SUPER_ATTR", (0 << 2) | 1, "greet", None),  # method form
        (None, "CALL", 0, 0, None),
        (None, "RETURN_VALUE", None, None, None),
    ]
    import builtins

    result, _ = _run_with_globals(
        program, {"super": builtins.super}, {"cls": _Child, "obj": _Child()}
    )
    assert result.as_constant() == "base"


def _run_with_globals(program, f_globals, local_values):
    instructions = tuple(
        Instruction(op, arg, argval, 2 * i, 1, i, None)
        for i, (_, op, arg, argval, _) in enumerate(program)
    )
    tx = TraceSession(GraphBridge("t"), f_globals=f_globals, function=None)
    from sapwood_graph import LocalSource

    fast = {name: tx.wrap(value, LocalSource(name)) for name, value in local_values.items()}
    frame = SymbolicFrame(tx, _code_with(), f_globals, None, fast, {}, None)
    frame.instructions = instructions
    frame.version = V312
    return tx.run_frame(frame), frame


def test_load_attr_means_different_things_per_version():
    # 3.11's LOAD_ATTR has no method bit (3.11 uses LOAD_METHOD); 3.12's has one
    from sapwood_tracer.interpreter.registry import dispatch_table

    assert dispatch_table((3, 11))["LOAD_ATTR"] is not dispatch_table(V312)["LOAD_ATTR"]
    assert "LOAD_METHOD" not in dispatch_table(V312)
