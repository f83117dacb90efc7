"""``collections.namedtuple(...)`` called inside the compiled function.

Eagerly, each call makes a new class. The trace makes one class per call site it meets (with
the same arguments, and ``module=`` the calling frame's ``__name__``, which the real function
would read off the frame) and uses it for everything inside the trace: building instances,
``isinstance``, ``_fields``. What leaves the trace (an output, a value handed to the code
after a graph break) is rebuilt with a class made again at each call, from the same
arguments, once per class per call: so, as eagerly, two calls never share a class, and a
class that never leaves the trace costs nothing at run time.

:func:`class_expression` writes, for the code that rebuilds outputs, a class as itself or,
for one the trace made, as a class made again.
"""

from __future__ import annotations

import collections
import types
import weakref
from typing import Any

from ..errors import Unsupported
from ..guards.emitter import Emitter
from ..values.base import Context, Value
from ..values.objects import ClassValue
from .builtins import handles

__all__ = ["class_expression", "made_class_recipe", "remake_class"]

#: the classes the trace made, with the arguments that make them again
_RECIPES: weakref.WeakKeyDictionary[type, tuple[tuple[Any, ...], dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)


def made_class_recipe(obj: Any) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The arguments of ``collections.namedtuple`` that made ``obj`` in a trace, or None."""
    if not isinstance(obj, type):
        return None
    return _RECIPES.get(obj)


def remake_class(args: tuple[Any, ...], kwargs: dict[str, Any]) -> type:
    """The class a traced ``collections.namedtuple`` call makes at run time."""
    return collections.namedtuple(*args, **kwargs)


def class_expression(em: Emitter, obj: Any, built: dict[int, str], indent: str) -> str:
    """``obj`` in generated code: itself (a held constant), but a class the trace made, which
    is made again (once per call: ``built`` holds what this call made already)."""
    recipe = made_class_recipe(obj)
    if recipe is None:
        if _refers_to_made_class(obj):
            raise Unsupported(
                f"handing on {obj!r}, made from a class the compiled function creates (a "
                "class made again at each call: the value would keep the traced one)"
            )
        return em.const(obj)
    known = built.get(id(obj))
    if known is None:
        known = built[id(obj)] = em.temp()
        args, kwargs = recipe
        em.lines.append(
            f"{indent}{known} = {em.const(remake_class)}({em.const(args)}, {em.const(kwargs)})"
        )
    return known


def _refers_to_made_class(obj: Any, depth: int = 4) -> bool:
    """Whether the constant ``obj`` holds a class the trace made (``Group[int]``, a tuple of
    them): handed on, it would keep the traced class where the program has a new one."""
    if not _RECIPES or depth == 0:
        return False
    if isinstance(obj, type):
        return obj in _RECIPES
    if isinstance(obj, (tuple, list, set, frozenset)):
        return any(_refers_to_made_class(x, depth - 1) for x in obj)
    if isinstance(obj, dict):
        return any(_refers_to_made_class(x, depth - 1) for x in (*obj.keys(), *obj.values()))
    origin = getattr(obj, "__origin__", None)  # a generic alias or union of the class
    if origin is not None or isinstance(obj, types.UnionType):
        parts = (origin, *getattr(obj, "__args__", ()))
        return any(_refers_to_made_class(x, depth - 1) for x in parts)
    return False


@handles(collections.namedtuple)
def _namedtuple_factory(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported("collections.namedtuple() with arguments that are not constants")
    real_args = tuple(a.as_constant() for a in args)
    real_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
    if real_kwargs.get("module") is None:
        # what namedtuple reads off the frame that calls it
        real_kwargs["module"] = tx.frames[-1].f_globals.get("__name__", "__main__")
    try:
        cls = remake_class(real_args, real_kwargs)
    except (TypeError, ValueError) as exc:
        raise Unsupported(f"collections.namedtuple() raising {type(exc).__name__}: {exc}") from None
    _RECIPES[cls] = (real_args, real_kwargs)
    return ClassValue(cls, None)
