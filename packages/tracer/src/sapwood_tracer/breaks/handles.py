"""Making again, in the entry, the objects whose making was itself an effect of the trace
(hook handles: see :mod:`sapwood_tracer.values.hook_handles`)."""

from __future__ import annotations

from collections.abc import Callable

from ..guards.emitter import Emitter
from ..values.base import Value
from ..values.hook_handles import HookHandleValue

__all__ = ["emit_made_again"]


def emit_made_again(
    em: Emitter,
    made: list[Value],
    emit: Callable[[Value], str],
    built: dict[int, str],
    indent: str,
) -> None:
    """Make each of ``made`` for real, in order; ``built`` learns their names (and a hook
    handle's id, used as the key of the hook dicts written back after)."""
    for value in made:
        assert isinstance(value, HookHandleValue)
        name = em.temp()
        table = emit(value.dicts[0])
        extra = "None" if value.extra_arg is None else emit(value.extra_arg)
        em.lines.append(f"{indent}{name} = {em.const(value.cls)}({table}, extra_dict={extra})")
        built[id(value)] = name
        built[id(value.hook_id)] = f"{name}.id"
