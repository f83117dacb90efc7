"""No exception raised by sapwood's own code reaches the user in default mode.

Fault injection: randomly chosen opcode handlers and value methods are made to raise (every
time, or from their k-th call on); programs written as a user would write them are then
compiled and run, and every result must equal eager. With ``fullgraph=True`` the same faults
must surface as a typed :class:`~sapwood_tracer.TracerError`, never as the raw exception.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import TracerError
from sapwood_tracer.interpreter import registry
from sapwood_tracer.values import base, containers, functions, modules, objects, tensors

_ERRORS = (RuntimeError, TypeError, KeyError, AttributeError, AssertionError, RecursionError)

#: Value methods the tracer calls on almost every program.
_VALUE_METHODS = [
    (base.ConstantValue, "getattr"),
    (base.BuiltinValue, "call"),
    (containers.ListValue, "call_method"),
    (containers.ListValue, "getitem"),
    (containers.TupleValue, "unpack"),
    (containers.DictValue, "getitem"),
    (containers.DictValue, "call_method"),
    (functions.FunctionValue, "call"),
    (functions.BoundMethodValue, "call"),
    (modules.ModuleValue, "getattr"),
    (modules.ModuleValue, "call"),
    (objects.ObjectValue, "getattr"),
    (tensors.TensorValue, "getattr"),
    (tensors.TensorMethodValue, "call"),
    (tensors.TorchFunctionValue, "call"),
]


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 8)
        self.scale = 0.5

    def forward(self, x: torch.Tensor, extra: dict[str, torch.Tensor]) -> torch.Tensor:
        h = self.fc(self.norm(x)).relu() * self.scale
        for key in sorted(extra):
            h = h + extra[key]
        return x + h


_BLOCK = _Block()


def _module_program(x: torch.Tensor) -> torch.Tensor:
    return _BLOCK(x, {"b": x * 2, "a": x.sin()})


def _python_program(x: torch.Tensor, n: int) -> tuple[Any, ...]:
    acc = []
    for i in range(n):
        acc.append(x * i)
    table = {f"k{i}": v.sum() for i, v in enumerate(acc)}

    def pick(name: str) -> torch.Tensor:
        return table.get(name, x.mean())

    total = sum(pick(f"k{i}") for i in range(n + 1))
    return total, len(table), [t.shape for t in acc]


def _break_program(x: torch.Tensor) -> torch.Tensor:
    y = x.cos() + 1
    sapwood_tracer.graph_break()
    return (y * x).sum(dim=-1)


_PROGRAMS: list[tuple[Callable[..., Any], tuple[Any, ...]]] = [
    (_module_program, (torch.randn(2, 8),)),
    (_python_program, (torch.randn(3), 3)),
    (_break_program, (torch.randn(4, 4),)),
]


def _faulty(original: Callable[..., Any], error: type[BaseException], after: int) -> Any:
    calls = [0]

    def method(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] > after:
            raise error("injected fault")
        return original(*args, **kwargs)

    return method


def _inject(monkeypatch: pytest.MonkeyPatch, seed: int) -> list[str]:
    """Make three handlers or value methods raise; returns what was made faulty."""
    rng = random.Random(seed)
    table = dict(registry.dispatch_table())
    used = [
        "LOAD_FAST",
        "LOAD_ATTR",
        "LOAD_GLOBAL",
        "CALL",
        "BINARY_OP",
        "STORE_FAST",
        "RETURN_VALUE",
        "BUILD_LIST",
        "FOR_ITER",
        "GET_ITER",
        "LOAD_CONST",
        "COMPARE_OP",
        "BINARY_SUBSCR",
        "BUILD_MAP",
        "MAKE_FUNCTION",
        "LOAD_DEREF",
        "UNPACK_SEQUENCE",
    ]
    handlers = [name for name in used if name in table]
    chosen: list[str] = []
    for _ in range(3):
        error = rng.choice(_ERRORS)
        after = rng.choice([0, 0, 1, 3, 10])
        if rng.random() < 0.5:
            name = rng.choice(handlers)
            table[name] = _faulty(table[name], error, after)
            chosen.append(f"handler {name} raises {error.__name__} after {after} calls")
        else:
            cls, attr = rng.choice(_VALUE_METHODS)
            monkeypatch.setattr(cls, attr, _faulty(getattr(cls, attr), error, after))
            chosen.append(f"{cls.__name__}.{attr} raises {error.__name__} after {after} calls")
    monkeypatch.setattr(registry, "_tables", {sys.version_info[:2]: table})
    return chosen


@pytest.mark.parametrize("seed", range(40))
def test_faults_inside_the_tracer_never_change_a_result(monkeypatch, same, seed):
    faults = _inject(monkeypatch, seed)
    for program, args in _PROGRAMS:
        expected = program(*args)
        compiled = sapwood_tracer.compile(program, backend=lambda gm, ex: gm.forward)
        for _ in range(2):
            try:
                got = compiled(*args)
            except BaseException as exc:  # nothing may escape
                pytest.fail(f"{program.__name__} raised {exc!r} with faults {faults}")
            same(got, expected, f"{program.__name__} with faults {faults}")


@pytest.mark.parametrize("seed", range(10))
def test_with_fullgraph_a_fault_is_a_typed_error(monkeypatch, same, seed):
    faults = _inject(monkeypatch, seed)
    for program, args in _PROGRAMS[:2]:
        compiled = sapwood_tracer.compile(
            program, backend=lambda gm, ex: gm.forward, fullgraph=True
        )
        try:
            got = compiled(*args)
        except TracerError:
            continue  # the typed error fullgraph=True promises
        except BaseException as exc:
            pytest.fail(f"{program.__name__} raised {exc!r}, not a TracerError ({faults})")
        same(got, program(*args))  # the faults were not reached


def test_an_internal_error_names_the_instruction_and_the_users_line(monkeypatch):
    table = dict(registry.dispatch_table())
    table["BINARY_OP"] = _faulty(table["BINARY_OP"], TypeError, 0)
    monkeypatch.setattr(registry, "_tables", {sys.version_info[:2]: table})

    def fn(x):
        return x * 2

    with pytest.raises(sapwood_tracer.Unsupported) as info:
        sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward, fullgraph=True)(torch.ones(2))
    message = str(info.value)
    assert "BINARY_OP" in message and "internal error" in message and "TypeError" in message
    assert "test_containment.py:" in message
    assert isinstance(info.value.__cause__, TypeError)
    report = sapwood_tracer.explain(fn)(torch.ones(2))
    assert report.break_count == 1 and "internal error" in report.breaks[0].reason
