"""Iterators of the trace rebuilt as real iterator objects in the entry function.

An iterator the trace made (``iter()`` of a container, ``map``/``zip``/``enumerate`` over
others, ...) has a recipe: the callable that makes it again and its arguments, where an
argument may be an inner recipe, another iterator value or a value. The entry function makes
it from the recipe after the graph; a live iterator from the inputs is itself. Each iterator
value is made once, by name, so two holders of one iterator share the rebuilt object.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import Unsupported
from ..guards.emitter import Emitter
from ..values.base import IteratorRecipe, IteratorValue, Value
from ..values.sequence_iterators import NextOnly, user_iterator_of

__all__ = ["emit_iterator"]


def emit_iterator(
    em: Emitter,
    value: IteratorValue,
    emit: Callable[[Value], str],
    built: dict[int, str],
    indent: str,
) -> str:
    """An iterator of the trace as a real iterator object, made by its recipe (``iter()`` of
    the items still to come, ``map``/``zip`` over such, ...); a live one is itself."""
    if value.source is not None:
        return em.source(value.source, indent)
    recipe = value.rebuild()
    if recipe is None:
        raise Unsupported(f"rebuilding {value.describe()} after the graph")

    def made(recipe: IteratorRecipe, nested: bool = False) -> str:
        if nested and recipe.fn is user_iterator_of:
            # the outer builtin calls iter() on it: the object's __iter__ ran already
            recipe = IteratorRecipe(NextOnly, recipe.args)
        parts = []
        for arg in recipe.args:
            if isinstance(arg, IteratorRecipe):
                parts.append(made(arg, nested=True))
            elif isinstance(arg, IteratorValue):
                # an iterator of its own (made once, shared with whatever else holds it)
                inner = emit(arg)
                inner_recipe = arg.rebuild() if arg.source is None else None
                if inner_recipe is not None and inner_recipe.fn is user_iterator_of:
                    inner = f"{em.const(NextOnly)}({inner})"
                parts.append(inner)
            elif isinstance(arg, tuple):
                items = [emit(v) for v in arg]
                parts.append(f"({', '.join(items)}{',' if len(items) == 1 else ''})")
            else:
                parts.append(emit(arg))
        return f"{em.const(recipe.fn)}({', '.join(parts)})"

    name = em.temp()
    em.lines.append(f"{indent}{name} = {made(recipe)}")
    built[id(value)] = name
    return name
