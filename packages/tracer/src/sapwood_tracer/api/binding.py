"""A call's arguments as the compiled function's parameters, and back.

The wrapper :func:`~sapwood_tracer.api.entry.compile` returns binds each call's arguments to
the function's parameters as Python does (:func:`binder`): a tuple of the parameters' values
in binding order (positional, keyword-only, ``*args``, ``**kwargs``), which the cache
entries read as ``L``. A function run eagerly is called back on that tuple
(:func:`call_bound`).
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

__all__ = ["binder", "call_bound"]


def binder(fn: types.FunctionType) -> Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]]:
    """Maps ``(args, kwargs)`` to the parameters' values in binding order, as Python binds a
    call (defaults are read from the function at each call, so changing them is seen)."""
    code = fn.__code__
    argc = code.co_argcount
    posonly = code.co_posonlyargcount
    kwonly = code.co_kwonlyargcount
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    plain = not kwonly and not has_varargs and not has_varkw
    names = code.co_varnames[: argc + kwonly]
    keywordable = {name: i for i, name in enumerate(names) if i >= posonly}
    missing = object()

    def slow(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        values: list[Any] = [missing] * (argc + kwonly)
        if len(args) > argc and not has_varargs:
            raise TypeError(
                f"{fn.__qualname__}() takes {argc} positional arguments but {len(args)} were given"
            )
        values[: min(len(args), argc)] = args[:argc]
        extra: dict[str, Any] = {}
        for key, value in kwargs.items():
            index = keywordable.get(key)
            if index is None:
                if not has_varkw:
                    raise TypeError(
                        f"{fn.__qualname__}() got an unexpected keyword argument {key!r}"
                    )
                extra[key] = value
            elif values[index] is not missing:
                raise TypeError(f"{fn.__qualname__}() got multiple values for argument {key!r}")
            else:
                values[index] = value
        defaults = fn.__defaults__ or ()
        first_default = argc - len(defaults)
        kwdefaults = fn.__kwdefaults__ or {}
        for i, name in enumerate(names):
            if values[i] is missing:
                if i < argc and i >= first_default:
                    values[i] = defaults[i - first_default]
                elif i >= argc and name in kwdefaults:
                    values[i] = kwdefaults[name]
                else:
                    raise TypeError(f"{fn.__qualname__}() missing required argument {name!r}")
        if has_varargs:
            values.append(tuple(args[argc:]))
        if has_varkw:
            values.append(extra)
        return tuple(values)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        if not kwargs and len(args) <= argc:
            if plain and len(args) == argc:
                return args
            if not kwonly:
                # positional arguments only: the rest from the defaults, as read now
                defaults = fn.__defaults__ or ()
                skip = len(args) - (argc - len(defaults))
                if skip >= 0:
                    values = args + defaults[skip:]
                    if has_varargs:
                        values += ((),)
                    return (*values, {}) if has_varkw else values
        return slow(args, kwargs)

    return bind


def _plain(code: types.CodeType) -> bool:
    return not code.co_kwonlyargcount and not code.co_flags & (
        inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
    )


def call_bound(fn: types.FunctionType, L: tuple[Any, ...]) -> Any:
    """``fn`` called on ``L``, the parameters' values in binding order (as :func:`binder`
    made them)."""
    if _plain(fn.__code__):
        return fn(*L)
    code = fn.__code__
    argc = code.co_argcount
    names = code.co_varnames
    args = list(L[:argc])
    kwargs: dict[str, Any] = {}
    i = argc
    for k in range(code.co_kwonlyargcount):
        kwargs[names[argc + k]] = L[i]
        i += 1
    if code.co_flags & inspect.CO_VARARGS:
        args.extend(L[i])
        i += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(L[i])
    return fn(*args, **kwargs)
