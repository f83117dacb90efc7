"""The opcode registry keeps version differences as version bounds."""

from __future__ import annotations

import pathlib

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
    assert _registry.registered("SEND") == [((3, 11), (3, 12)), ((3, 12), None)]
    for name in ("LOAD_ATTR", "FOR_ITER"):
        assert _registry.registered(name) == [
            ((3, 11), (3, 12)),
            ((3, 12), (3, 13)),
            ((3, 13), None),
        ]
    for name in ("CALL", "CALL_FUNCTION_EX", "MAKE_FUNCTION", "LOAD_GLOBAL", "LOAD_FAST"):
        assert _registry.registered(name) == [((3, 11), (3, 13)), ((3, 13), None)]
    tables = [_registry.dispatch_table(v) for v in ((3, 11), (3, 12), (3, 13))]
    assert len({id(t["LOAD_ATTR"]) for t in tables}) == 3
    assert tables[1]["CALL"] is tables[0]["CALL"] and tables[2]["CALL"] is not tables[1]["CALL"]


def test_313_only_opcodes_are_served_on_313_alone():
    t312 = _registry.dispatch_table((3, 12))
    t313 = _registry.dispatch_table((3, 13))
    for name in (
        "CALL_KW",
        "TO_BOOL",
        "LOAD_FAST_LOAD_FAST",
        "STORE_FAST_LOAD_FAST",
        "STORE_FAST_STORE_FAST",
        "SET_FUNCTION_ATTRIBUTE",
        "CONVERT_VALUE",
        "FORMAT_SIMPLE",
        "FORMAT_WITH_SPEC",
    ):
        assert name in t313 and name not in t312
    for name in ("KW_NAMES", "FORMAT_VALUE", "LOAD_CLOSURE"):
        assert name in t312 and name not in t313


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
        "CALL_KW",
        "TO_BOOL",
        "LOAD_FAST_LOAD_FAST",
        "STORE_FAST_LOAD_FAST",
        "STORE_FAST_STORE_FAST",
        "SET_FUNCTION_ATTRIBUTE",
        "CONVERT_VALUE",
        "FORMAT_SIMPLE",
        "FORMAT_WITH_SPEC",
    }
    # (pseudo-instructions, numbered from 256, never appear in code objects)
    real = {name for name, number in dis.opmap.items() if number < 256}
    missing = {n for n in needed if n in real and n not in table}
    assert not missing


#: Opcodes that only module bodies, class bodies and ``match`` statements use: refused by
#: name (the rest of the function runs eagerly), never silently.
_NOT_MODELLED = {
    "STORE_NAME",
    "DELETE_NAME",
    "LOAD_LOCALS",
    "LOAD_FROM_DICT_OR_DEREF",
    "LOAD_FROM_DICT_OR_GLOBALS",
    "SETUP_ANNOTATIONS",
    "MATCH_CLASS",
    "MATCH_KEYS",
    "MATCH_MAPPING",
    "MATCH_SEQUENCE",
}


def test_every_opcode_that_library_code_compiles_to_is_served():
    """Every instruction of torch.nn, transformers' Llama/GPT-2/BERT and the standard
    library modules models lean on, as the running Python compiled them, has a handler."""
    import dis
    import importlib
    import types

    pytest.importorskip("transformers")
    table = _registry.dispatch_table()
    seen: dict[str, str] = {}

    def walk(code: types.CodeType, where: str) -> None:
        for ins in dis.get_instructions(code):
            seen.setdefault(ins.opname, where)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk(const, where)

    for name in (
        "torch.nn.functional",
        "torch.nn.modules.module",
        "torch.nn.modules.transformer",
        "torch.nn.modules.activation",
        "torch.nn.modules.container",
        "torch.functional",
        "collections",
        "functools",
        "dataclasses",
        "transformers.models.llama.modeling_llama",
        "transformers.models.gpt2.modeling_gpt2",
        "transformers.models.bert.modeling_bert",
    ):
        path = importlib.import_module(name).__file__
        assert path is not None
        walk(compile(pathlib.Path(path).read_text(encoding="utf-8"), path, "exec"), name)
    missing = {
        op: where for op, where in seen.items() if op not in table and op not in _NOT_MODELLED
    }
    assert not missing, missing


def test_a_comparison_run_eagerly_at_a_break_keeps_313s_truth_bit():
    """3.13 sets bit 16 of COMPARE_OP when a jump consumes the result; CPython's jump then
    needs an exact bool, so the comparison run eagerly at a graph break must give one."""
    import torch

    from sapwood_tracer.interpreter.instructions import Instruction

    t = torch.tensor([1.0, -1.0])
    for version, arg, is_bool in (
        ((3, 13), 148, True),
        ((3, 13), 132, False),
        ((3, 12), 68, False),
    ):
        inst = Instruction("COMPARE_OP", arg, ">", 0, 1, 0, None)
        compare = _registry.dispatch_table(version)["COMPARE_OP"].eager_function(inst)
        if is_bool:
            with pytest.raises(RuntimeError, match="ambiguous"):
                compare(t, 0)  # bool() of a 2-element tensor, as CPython would raise
            assert compare(t[:1], 0) is True
        else:
            torch.testing.assert_close(compare(t, 0), t > 0)
