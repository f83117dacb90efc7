"""Generators of the trace after the graph: rebuilt, or put where the trace left them.

A generator the trace made and that outlives the graph (returned, or live at a graph break)
is rebuilt by :func:`~.generator_code.make_generator` in the state its symbolic frame is in:
not started, suspended at a yield (its locals and the value stack below the yield rebuilt
like any other value), or finished. A real generator of a repositionable code that the trace
advanced (see :mod:`sapwood_tracer.interpreter.real_generators`) is told to take its new
state (:func:`~.generator_code.reposition`).

Refused (a graph break with a reason): a generator running, or suspended inside an
``except`` block or over a value the entry cannot hand on (a torch context's exit, the NULL
of a call), and what :mod:`.generator_code` refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import Unsupported
from ..values.base import NULL, Value
from ..values.contexts import ContextExitValue
from ..values.generator_codes import UNBOUND, RepositionableCode
from ..values.generators import GeneratorValue, advanced_generator
from .generator_code import make_generator, reposition, repositionable_code

__all__ = ["emit_generator", "emit_reposition", "generator_parts"]


@dataclass(slots=True)
class _State:
    info: RepositionableCode
    mark: Any
    locals: list[Value | None]
    stack: list[Value]
    cells: list[Value | None]


def _state(value: GeneratorValue) -> _State:
    frame = value.frame
    code = frame.code
    if value.running:
        raise Unsupported(f"rebuilding {value.describe()} while it runs")
    if value.handled is not None:
        raise Unsupported(f"rebuilding {value.describe()}, suspended inside an except block")
    if value.names is None:
        raise Unsupported(f"rebuilding {value.describe()}, whose function was renamed")
    info = value.backing or repositionable_code(code)
    if value.done:
        return _State(info, info.finish_mark, [], [], [])
    cells = [frame.cells.get(name) for name in code.co_freevars]
    if any(cell is None for cell in cells):
        raise Unsupported(f"rebuilding {value.describe()} (a closure cell is not known)")
    names = info.local_names
    locals_ = [frame.locals.get(name) for name in names]
    suspended_at = frame.instructions[frame.ip - 1].opname if frame.ip else ""
    if suspended_at == "RETURN_GENERATOR":
        return _State(info, info.start_mark, locals_, [], cells)
    if suspended_at != "YIELD_VALUE" or frame.ip - 1 not in info.yield_indices:
        raise Unsupported(f"rebuilding {value.describe()} (not suspended at a yield)")
    number = info.yield_indices.index(frame.ip - 1)
    stack = list(frame.stack)
    if len(stack) != info.depths[number]:
        raise Unsupported(f"rebuilding {value.describe()} (its stack did not line up)")
    for item in stack:
        if item is NULL or isinstance(item, ContextExitValue):
            raise Unsupported(f"rebuilding {value.describe()}, suspended over {item.describe()}")
    return _State(info, info.marks[number], locals_, stack, cells)


def _replayable(value: GeneratorValue) -> bool:
    """Whether the entry makes ``value`` again from its function (one of ``nn.Module``'s own
    generators, see ``GeneratorValue.replay``): not while it runs, and only when the trace
    changed nothing (no write could have changed the module tree it walks)."""
    if value.replay is None or value.running:
        return False
    return not value.replay[2].recorded()


def generator_parts(value: GeneratorValue) -> list[Value]:
    """The values a rebuilt ``value`` holds (for collecting graph outputs); none when it
    cannot be rebuilt (the entry then refuses it where it is built)."""
    if _replayable(value):
        return list(value.replay[1])  # type: ignore[index]
    try:
        state = _state(value)
    except Unsupported:
        return []
    held = [*state.locals, *state.stack, *state.cells]
    return [v for v in held if v is not None]


def _tuple(parts: list[str]) -> str:
    return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"


def _state_text(em: Any, state: _State, emit: Callable[[Value], str]) -> tuple[str, str, str]:
    unbound = em.const(UNBOUND)
    locals_ = [unbound if v is None else emit(v) for v in state.locals]
    stack = [emit(v) for v in state.stack]
    return em.const(state.mark), _tuple(locals_), _tuple(stack)


def emit_generator(
    em: Any, value: GeneratorValue, emit: Callable[[Value], str], indent: str
) -> str:
    """An expression of the entry for the real generator rebuilt from ``value``."""
    if _replayable(value):
        function, args, _ = value.replay  # type: ignore[misc]
        name = em.temp()
        parts = ", ".join(emit(a) for a in args)
        em.lines.append(
            f"{indent}{name} = {em.const(advanced_generator)}({em.const(function)}, "
            f"({parts}{',' if len(args) == 1 else ''}), {value.produced}, {value.done})"
        )
        return str(name)
    state = _state(value)
    cells = [emit(v) for v in state.cells if v is not None]
    mark, locals_, stack = _state_text(em, state, emit)
    closure = _tuple(cells) if cells else "None"
    name = em.temp()
    em.lines.append(
        f"{indent}{name} = {em.const(make_generator)}({em.const(state.info)}, "
        f"{em.const(value.frame.f_globals)}, {closure}, {mark}, {locals_}, {stack}, "
        f"{em.const(value.names)})"
    )
    return str(name)


def emit_reposition(
    em: Any, value: GeneratorValue, target: str, emit: Callable[[Value], str], indent: str
) -> None:
    """Lines that put the real generator ``target`` in the state the trace left ``value`` in."""
    state = _state(value)
    mark, locals_, stack = _state_text(em, state, emit)
    em.lines.append(f"{indent}{em.const(reposition)}({target}, {mark}, {locals_}, {stack})")
