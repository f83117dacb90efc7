"""The fuzzer's harness can fail: its oracle catches wrong answers and sapwood's own errors.

Each test hands the oracle a deliberately wrong "compiler" (a wrapper around the program's
entry point) and checks the verdict: a wrong result, a lost input mutation, a lost print, a
lost global or module write, a copy where the caller's own object was returned are
mismatches; an exception raised from a frame in sapwood's packages or of sapwood's error types
is a crash; an exception from the program's own code is a mismatch; the same exception on
both sides is a both-raise. Eager against itself always matches (the programs are
deterministic), and the generator is deterministic and covers every feature.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from typing import Any

import pytest
import torch
from fuzz.generator import CallSpec, Program, generate
from fuzz.oracle import BOTH_RAISE, CRASH, MATCH, MISMATCH, is_sapwood_failure, run_program

import sapwood_tracer

TEMPLATE = """\
import torch

G_N = 0


class Box:
    def __init__(self, v, n):
        self.v = v
        self.n = n


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.count = 0

    def forward(self, x):
        self.count += 1
        return x * 2


def program(a, b, n, xs, d, box, mod):
{body}


def make_inputs(shape, dtype, n, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(shape, dtype=dtype, generator=g)
    b = torch.randn(shape, dtype=dtype, generator=g)
    xs = [torch.randn(shape, dtype=dtype, generator=g) for _ in range(2)]
    d = {{"w": torch.randn(shape, dtype=dtype, generator=g), "k": n + 1}}
    box = Box(torch.randn(shape, dtype=dtype, generator=g), n)
    return a, b, n, xs, d, box
"""

CALLS = (CallSpec((2, 3), "float32", 1, 7), CallSpec((3, 3), "float64", 2, 8))


def _program(*body: str) -> Program:
    source = TEMPLATE.format(body="\n".join("    " + line for line in body))
    return Program(seed=12345, source=source, entry="function", calls=CALLS, features=frozenset())


def _wrapping(after: Callable[..., Any]) -> Callable[[Any], Callable[..., Any]]:
    """A compiler whose compiled function is ``after(fn, args)``."""

    def compiler(fn: Any) -> Callable[..., Any]:
        return lambda *args: after(fn, args)

    return compiler


def _run(program: Program, compiler: Callable[[Any], Any]) -> Any:
    return run_program(program, compiler=compiler, reset=lambda: None)


def _raising_in(filename: str, exc: str = "RuntimeError('internal error')") -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    code = compile(f"def boom(*args):\n    raise {exc}\n", filename, "exec")
    exec(code, namespace)
    return namespace["boom"]


SAPWOOD_FILE = os.path.join(os.path.dirname(sapwood_tracer.__file__), "_fake_frame_for_tests.py")


def test_eager_against_itself_always_matches() -> None:
    for seed in range(25):
        verdict = _run(generate(seed), lambda entry: entry)
        assert verdict.kind in (MATCH, BOTH_RAISE), (seed, verdict.reason)


def test_a_wrong_result_is_a_mismatch() -> None:
    program = _program("return a * 2, [n]")

    def off(fn: Any, args: Any) -> Any:
        t, rest = fn(*args)
        return t + 1e-2, rest

    verdict = _run(program, _wrapping(off))
    assert verdict.kind == MISMATCH
    assert verdict.signature == "mismatch values of result[i]"


def test_a_wrong_dtype_is_a_mismatch() -> None:
    verdict = _run(_program("return a.sin()"), _wrapping(lambda fn, args: fn(*args).double()))
    assert verdict.kind == MISMATCH
    assert "dtype" in verdict.reason


def test_a_lost_input_mutation_is_a_mismatch() -> None:
    program = _program("a.add_(1)", "return b")

    def on_a_copy(fn: Any, args: Any) -> Any:
        return fn(args[0].clone(), *args[1:])

    verdict = _run(program, _wrapping(on_a_copy))
    assert verdict.kind == MISMATCH
    assert verdict.reason.startswith("call 0: a: values")


def test_a_lost_list_append_is_a_mismatch() -> None:
    program = _program("xs.append(a)", "return n")
    verdict = _run(
        program, _wrapping(lambda fn, args: fn(args[0], args[1], args[2], [*args[3]], *args[4:]))
    )
    assert verdict.kind == MISMATCH
    assert "xs: length" in verdict.reason


def test_returning_a_copy_of_an_input_list_is_a_mismatch() -> None:
    verdict = _run(_program("return xs"), _wrapping(lambda fn, args: list(fn(*args))))
    assert verdict.kind == MISMATCH
    assert "aliasing" in verdict.reason


def test_a_lost_print_is_a_mismatch() -> None:
    def silenced(fn: Any, args: Any) -> Any:
        with contextlib.redirect_stdout(io.StringIO()):
            return fn(*args)

    verdict = _run(_program('print("hello", n)', "return a"), _wrapping(silenced))
    assert verdict.kind == MISMATCH
    assert "stdout" in verdict.reason


def test_a_lost_global_write_is_a_mismatch() -> None:
    def forgets(fn: Any, args: Any) -> Any:
        result = fn(*args)
        fn.__globals__["G_N"] -= 1
        return result

    verdict = _run(_program("global G_N", "G_N += 1", "return a"), _wrapping(forgets))
    assert verdict.kind == MISMATCH
    assert "globals['G_N']" in verdict.reason


def test_a_lost_module_attribute_write_is_a_mismatch() -> None:
    def forgets(fn: Any, args: Any) -> Any:
        result = fn(*args)
        args[-1].count -= 1
        return result

    verdict = _run(_program("return mod(a)"), _wrapping(forgets))
    assert verdict.kind == MISMATCH
    assert "self.count" in verdict.reason


def test_an_error_from_a_sapwood_frame_is_a_crash() -> None:
    boom = _raising_in(SAPWOOD_FILE)
    verdict = _run(_program("return a"), lambda entry: boom)
    assert verdict.kind == CRASH
    assert verdict.signature.startswith("crash RuntimeError in _fake_frame_for_tests.py:boom")


def test_an_error_from_generated_sapwood_code_is_a_crash() -> None:
    verdict = _run(_program("return a"), lambda entry: _raising_in("<sapwood guard 3>"))
    assert verdict.kind == CRASH


def test_a_sapwood_error_type_is_a_crash_wherever_it_is_raised() -> None:
    def raises(fn: Any, args: Any) -> Any:
        raise sapwood_tracer.Unsupported("a construct", "test:1")

    verdict = _run(_program("return a"), _wrapping(raises))
    assert verdict.kind == CRASH


def test_a_crash_is_reported_even_when_eager_raised_another_type() -> None:
    boom = _raising_in(SAPWOOD_FILE, "KeyError('internal')")
    verdict = _run(_program('raise ValueError("program")'), lambda entry: boom)
    assert verdict.kind == CRASH


def test_an_error_from_the_programs_own_code_is_a_mismatch_not_a_crash() -> None:
    program = _program("if n > 100:", '    raise ValueError("too big")', "return a")
    verdict = _run(program, _wrapping(lambda fn, args: fn(args[0], args[1], 1000, *args[3:])))
    assert verdict.kind == MISMATCH
    assert "compiled ValueError" in verdict.reason
    exc = ValueError("x")
    assert not is_sapwood_failure(exc, program.filename)


def test_the_same_exception_on_both_sides_is_a_both_raise() -> None:
    verdict = _run(_program('raise KeyError("k")'), lambda entry: entry)
    assert verdict.kind == BOTH_RAISE


def test_a_different_state_before_the_same_exception_is_a_mismatch() -> None:
    program = _program("a.mul_(3)", 'raise KeyError("k")')
    verdict = _run(program, _wrapping(lambda fn, args: fn(args[0].clone(), *args[1:])))
    assert verdict.kind == MISMATCH


def test_a_missing_exception_is_a_mismatch() -> None:
    program = _program('raise KeyError("k")')
    verdict = _run(program, _wrapping(lambda fn, args: None))
    assert verdict.kind == MISMATCH
    assert "compiled returned" in verdict.reason


def test_sapwood_on_a_simple_program_matches() -> None:
    program = _program("xs.append(a.sin())", "d['w'].add_(1)", "return mod(b), xs")
    verdict = run_program(program)
    assert verdict.kind == MATCH, verdict.reason


_KEPT: list[Any] = []


def test_an_input_kept_alive_by_the_compiled_side_is_a_mismatch() -> None:
    def keeping(fn: Any, args: Any) -> Any:
        _KEPT.append(args[1])  # (b: what a cache or a reference cycle would keep)
        return fn(*args)

    try:
        verdict = _run(_program("return a + 1"), _wrapping(keeping))
    finally:
        _KEPT.clear()
    assert verdict.kind == MISMATCH
    assert verdict.signature == "mismatch lifetimes of the inputs"
    assert "kept alive only when compiled: ['b']" in verdict.reason


def test_an_input_the_program_keeps_is_kept_on_both_sides() -> None:
    verdict = _run(_program("global G_N", "G_N = b", "return a + 1"), lambda entry: entry)
    assert verdict.kind == MATCH, verdict.reason


def test_a_reference_cycle_through_an_exception_is_a_mismatch() -> None:
    # the error held by a frame its own traceback reaches: freed only by the collector
    def cycling(fn: Any, args: Any) -> Any:
        inputs = args
        try:
            return fn(*inputs)
        except Exception as exc:
            held = exc
            raise held from None

    verdict = _run(_program("raise ValueError(a.shape)"), _wrapping(cycling))
    assert verdict.kind == MISMATCH, verdict.reason
    assert verdict.signature == "mismatch lifetimes of the inputs"


def test_the_generator_is_deterministic() -> None:
    assert generate(7) == generate(7)
    assert generate(7).source != generate(8).source


def test_generated_programs_are_valid_python_and_cover_every_feature() -> None:
    features: set[str] = set()
    for seed in range(300):
        program = generate(seed)
        compile(program.source, program.filename, "exec")
        assert 2 <= len(program.calls) <= 4
        features |= program.features
    expected = {
        "closures",
        "nonlocal",
        "comprehensions",
        "try/except",
        "finally",
        "control flow on constants",
        "control flow on tensors",
        "graph breaks",
        "in-place mutation",
        "containers mutated",
        "containers out",
        "module attribute mutation",
        "module entry",
        "globals",
        "new shapes",
        "new dtypes",
        "escaping exceptions",
        "nested functions",
        "disabled functions",
        "odd special methods",
    }
    assert expected <= features, expected - features


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_inputs_are_equal_on_both_sides(dtype: str) -> None:
    program = generate(3)
    namespaces = []
    for _ in range(2):
        ns: dict[str, Any] = {}
        exec(compile(program.source, program.filename, "exec"), ns)
        namespaces.append(ns["make_inputs"]((2, 3), getattr(torch, dtype), 1, 5))
    torch.testing.assert_close(namespaces[0][0], namespaces[1][0], rtol=0, atol=0)
