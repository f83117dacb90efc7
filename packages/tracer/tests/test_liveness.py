"""Live locals at resume points: a superset of what the rest of the code reads, never less.

The oracle runs each function with a local-read tracer (``sys.settrace`` with opcode events
and the frame's ``f_locals`` before and after each instruction would be fragile); instead it
checks the defining property directly: every local a later instruction loads, on some path
not passing through a store of it, is live.
"""

from __future__ import annotations

import dis

import pytest

from sapwood_tracer.breaks.liveness import live_locals
from sapwood_tracer.interpreter.instructions import decode


def _after_branch(x, flag, other):
    if flag:
        x = x + 1
    y = x * 2
    print(y)
    return y


def _loop(xs, scale):
    total = 0
    for i in xs:
        total = total + i * scale
        print(i)
    return total


def _handler(x, fallback):
    try:
        x = x + 1
        print(x)
    except ValueError:
        return fallback
    return x


def _comprehension(xs, k):
    ys = [v * k for v in xs]
    print(ys)
    return [v for v in ys]


def _reads_locals(x, unused):
    print(x)
    return locals()


def _deleted(x, y):
    print(x)
    del y
    return x


def _index_of_call(fn, name):
    return next(
        i.index for i in decode(fn.__code__) if i.opname == "LOAD_GLOBAL" and i.argval == name
    )


@pytest.mark.parametrize(
    ("fn", "expected_live", "expected_dead"),
    [
        (_after_branch, {"y"}, {"x", "flag", "other"}),
        (_loop, {"i", "scale", "total"}, {"xs"}),
        (_handler, {"x", "fallback"}, set()),
        (_comprehension, {"ys"}, {"xs", "k"}),
        (_deleted, {"x", "y"}, set()),
    ],
)
def test_live_locals_at_the_print(fn, expected_live, expected_dead):
    live = live_locals(fn.__code__, _index_of_call(fn, "print"))
    assert live is not None
    assert expected_live <= live
    assert not (expected_dead & live)


def test_code_that_sees_its_frame_keeps_every_local():
    assert live_locals(_reads_locals.__code__, _index_of_call(_reads_locals, "print")) is None


def _paths_read(code, start):
    """Every local some path from ``start`` loads before storing it (brute force over
    the control-flow graph, exception edges included)."""
    instructions = decode(code)
    from sapwood_tracer.breaks import liveness

    seen: set[tuple[int, frozenset[str]]] = set()
    reads: set[str] = set()
    todo = [(start, frozenset())]
    while todo:
        index, stored = todo.pop()
        if (index, stored) in seen or index >= len(instructions):
            continue
        seen.add((index, stored))
        ins = instructions[index]
        if ins.opname == "STORE_FAST_LOAD_FAST":
            stored = stored | {ins.argval[0]}
            loaded = {ins.argval[1]}
            written: frozenset[str] = frozenset()
        else:
            read, written = liveness._effect(ins.opname, ins.argval)
            loaded = set(read)
        reads |= loaded - stored
        stored = stored | written
        nexts = []
        if ins.opname not in liveness._ALWAYS_JUMPS and ins.opname not in liveness._ENDS:
            nexts.append(index + 1)
        if ins.target is not None:
            nexts.append(ins.target)
        from sapwood_tracer.interpreter.instructions import exception_handler

        handler = exception_handler(code, ins.offset)
        if handler is not None:
            nexts.append(handler.target)
        todo += [(n, stored) for n in nexts]
    return reads


@pytest.mark.parametrize("fn", [_after_branch, _loop, _handler, _comprehension, _deleted])
def test_every_instruction_s_live_set_covers_the_reads_of_every_path(fn):
    code = fn.__code__
    for ins in decode(code):
        live = live_locals(code, ins.index)
        assert live is not None
        missing = _paths_read(code, ins.index) - live
        assert not missing, (ins, missing, dis.Bytecode(code).dis())


class _Base:
    def scaled(self, x):
        return x * 2


class _Derived(_Base):
    def scaled(self, x):
        y = x + 1
        print(y)
        return super().scaled(y)


def test_a_method_using_zero_argument_super_keeps_its_first_parameter():
    code = _Derived.scaled.__code__
    live = live_locals(code, _index_of_call(_Derived.scaled, "print"))
    assert live is not None and "self" in live
