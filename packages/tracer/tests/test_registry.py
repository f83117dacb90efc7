"""The opcode registry keeps version differences as version bounds."""

from __future__ import annotations

import pytest

from sapwood_tracer.interpreter import registry as _registry


def test_311_only_opcodes_are_not_served_on_312():
    t311 = _registry.dispatch_table((3, 11))
    t312 = _registry.dispatch_table((3, 12))
    for name in (
        "PRECALL",
        "LOAD_METHOD",
        "POP_JUMP_FORWARD_IF_TRUE",
        "JUMP_IF_TRUE_OR_POP",
        "LIST_TO_TUPLE",
    ):
        assert name in t311 and name not in t312


def test_312_only_opcodes_are_not_served_on_311():
    t311 = _registry.dispatch_table((3, 11))
    t312 = _registry.dispatch_table((3, 12))
    for name in (
        "LOAD_SUPER_ATTR",
        "BINARY_SLICE",
        "STORE_SLICE",
        "RETURN_CONST",
        "CALL_INTRINSIC_1",
        "END_FOR",
        "LOAD_FAST_CHECK",
        "LOAD_FAST_AND_CLEAR",
        "POP_JUMP_IF_NONE",
        "END_SEND",
    ):
        assert name in t312 and name not in t311


def test_opcodes_whose_meaning_changed_have_one_handler_per_version():
    for name in ("LOAD_ATTR", "FOR_ITER", "SEND"):
        assert _registry.registered(name) == [((3, 11), (3, 12)), ((3, 12), None)]
    assert (
        _registry.dispatch_table((3, 11))["LOAD_ATTR"]
        is not _registry.dispatch_table((3, 12))["LOAD_ATTR"]
    )


def test_overlapping_registrations_are_rejected():
    with pytest.raises(RuntimeError, match="two handlers"):
        _registry.opcode("NOP")(lambda frame, inst: None)


def test_every_opcode_of_the_running_python_used_by_model_code_is_served():
    import dis

    table = _registry.dispatch_table()
    needed = {
        "LOAD_FAST",
        "STORE_FAST",
        "LOAD_CONST",
        "LOAD_GLOBAL",
        "LOAD_ATTR",
        "STORE_ATTR",
        "BINARY_OP",
        "BINARY_SUBSCR",
        "STORE_SUBSCR",
        "COMPARE_OP",
        "IS_OP",
        "CONTAINS_OP",
        "CALL",
        "CALL_FUNCTION_EX",
        "KW_NAMES",
        "MAKE_FUNCTION",
        "BUILD_TUPLE",
        "BUILD_LIST",
        "BUILD_MAP",
        "BUILD_CONST_KEY_MAP",
        "UNPACK_SEQUENCE",
        "UNPACK_EX",
        "FOR_ITER",
        "GET_ITER",
        "RETURN_VALUE",
        "BEFORE_WITH",
        "FORMAT_VALUE",
        "BUILD_STRING",
        "COPY",
        "SWAP",
        "POP_TOP",
        "LOAD_DEREF",
        "STORE_DEREF",
        "MAKE_CELL",
        "COPY_FREE_VARS",
        "LOAD_CLOSURE",
    }
    missing = {n for n in needed if n in dis.opmap and n not in table}
    assert not missing
