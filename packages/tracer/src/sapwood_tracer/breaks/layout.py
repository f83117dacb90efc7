"""The resume layout of a graph break: how each value the rest of the function needs reaches
the resume function (a stack slot passed as itself, the NULL of a call sequence pushed again,
a ``with`` block's torch context entered again, an iterator made again by the prologue), and
the torch contexts that can be made again.

Invariant: one object stays one object. A value the entry hands on in several places (a local
and a stack slot, an iterator inside a ``zip`` and a local) is passed once, as itself; only an
iterator nothing else holds is made again from its recipe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Unsupported
from ..values.base import NULL, IteratorRecipe, IteratorValue, Value
from ..values.containers import DictValue, ListValue, TupleValue
from ..values.contexts import (
    AutocastValue,
    ContextExitValue,
    GradModeValue,
    ProfilerRangeValue,
    SubclassFunctionsOffValue,
    _AlreadyEntered,
)
from ..values.functions import CellValue
from ..values.generators import GeneratorValue
from ..values.runtime_objects import LockValue
from .resume import ResumeLayout, StackSlot

__all__ = ["TorchContext", "passable", "resume_layout", "torch_context"]


@dataclass(frozen=True, slots=True)
class TorchContext:
    """A torch context manager open at the break: made again by ``factory(*args)``."""

    factory: Any
    args: tuple[Any, ...]


def torch_context(value: Value) -> TorchContext | None:
    import torch

    if isinstance(value, _AlreadyEntered):
        value = value.inner
    if isinstance(value, GradModeValue):
        return TorchContext(torch.enable_grad if value.enabled else torch.no_grad, ())
    if isinstance(value, AutocastValue):
        return TorchContext(torch.autocast, tuple(value.args))
    if isinstance(value, ProfilerRangeValue):
        return TorchContext(torch.autograd.profiler.record_function, tuple(value.args))
    if isinstance(value, LockValue):
        return TorchContext(the_lock, (value.lock,))
    if isinstance(value, SubclassFunctionsOffValue):
        return TorchContext(value.cls, ())
    return None


def the_lock(lock: Any) -> Any:
    """A ``threading.Lock`` open at a break: entered again as itself."""
    return lock


def resume_layout(
    stack: list[Value],
    local_names: tuple[str, ...],
    local_values: list[Value],
    cell_names: tuple[str, ...],
    held: list[Value],
) -> tuple[ResumeLayout, list[Value], list[Value]]:
    """The resume layout of ``stack`` and the live locals (``held``: the whole value stack at
    the break, the eager construct's operands too), the values passed for the stack
    (and for iterators made again), and the values of the locals passed as themselves.

    The iterator of a loop the break is inside (a stack slot) is passed as a real iterator
    object: made by the entry from what the trace knows of it (its recipe), or the live
    object itself. The resume function's trace does not know its items (see
    :class:`~sapwood_tracer.values.iterators.LiveIteratorValue`): its loop stops at each
    ``FOR_ITER`` (a ``next`` break), so one resume function serves every iteration.

    An iterator made in the trace that only a local holds (``it = iter(xs)``) is made again
    by the resume function's prologue from its recipe, so the rest of the function knows its
    items; one from the inputs, or the very iterator of a stack slot, is passed as itself
    (one object)."""
    slots: list[StackSlot] = []
    passed: list[Value] = []
    plain_names: list[str] = []
    plain_values: list[Value] = []
    local_iterators: list[tuple[str, Any]] = []
    for name, value in zip(local_names, local_values):
        if isinstance(value, IteratorValue):
            recipe = value.rebuild() if value.source is None else None
            others = [*stack, *held, *(v for v in local_values if v is not value)]
            if (
                recipe is not None
                and not any(isinstance(arg, IteratorValue) for arg in recipe.args)
                and not any(held is value for held in _iterators_within(others))
            ):
                local_iterators.append((name, _recipe_shape(recipe, passed)))
                continue
            if not passable(value):
                raise Unsupported(
                    f"a graph break while the local {name!r} holds {value.describe()}"
                )
        plain_names.append(name)
        plain_values.append(value)
    for value in stack:
        if value is NULL:
            slots.append(StackSlot("null"))
        elif isinstance(value, ContextExitValue):
            ctx = torch_context(value.context)
            if ctx is None:
                raise Unsupported(
                    f"a graph break inside a with block over {value.context.describe()}"
                )
            slots.append(StackSlot("context", ctx.factory, ctx.args))
        else:
            if isinstance(value, IteratorValue) and not passable(value):
                raise Unsupported(f"a graph break inside a loop over {value.describe()}")
            slots.append(StackSlot("value"))
            passed.append(value)
    layout = ResumeLayout(
        tuple(slots), tuple(plain_names), cell_names, local_iterators=tuple(local_iterators)
    )
    return layout, passed, plain_values


def _iterators_within(values: list[Value]) -> list[IteratorValue]:
    """The iterators ``values`` hold: themselves, those a combinator iterates, the items of
    lists, tuples and dicts (compared by identity)."""
    found: list[IteratorValue] = []
    todo = list(values)
    seen: set[int] = set()
    while todo:
        value = todo.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, IteratorValue):
            found.append(value)
            recipe = value.rebuild() if value.source is None else None
            if recipe is not None:
                todo += [arg for arg in recipe.args if isinstance(arg, Value)]
        elif isinstance(value, (ListValue, TupleValue)):
            todo += list(value.items)
        elif isinstance(value, DictValue):
            todo += [v for _, v in value.entries.values()]
        elif isinstance(value, CellValue) and value.contents is not None:
            todo.append(value.contents)
    return found


def _recipe_shape(recipe: IteratorRecipe, passed: list[Value]) -> tuple[Any, ...]:
    """The recipe as the resume layout's shape (``("call", fn, parts)``, ``("value",)`` for a
    passed argument), appending the values it passes to ``passed`` in order."""
    parts: list[tuple[Any, ...]] = []
    for arg in recipe.args:
        if isinstance(arg, IteratorRecipe):
            parts.append(_recipe_shape(arg, passed))
        else:
            passed.append(TupleValue(list(arg)) if isinstance(arg, tuple) else arg)
            parts.append(("value",))
    return ("call", recipe.fn, tuple(parts))


def passable(value: IteratorValue) -> bool:
    """Whether the entry can hand ``value`` on as a real iterator object (a generator of the
    trace is rebuilt as one, see :mod:`.generator_rebuild`, or refused there)."""
    if isinstance(value, GeneratorValue):
        return True
    return value.source is not None or value.rebuild() is not None
