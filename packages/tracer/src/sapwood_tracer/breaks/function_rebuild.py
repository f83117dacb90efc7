"""A nested function's assigned fields and ``__dict__``, on the function :mod:`.outputs`
rebuilds at a graph break.

It takes ``emit``, the caller's rebuild of one value, so a value reached twice is built once.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import Unsupported
from ..guards.emitter import Emitter
from ..values.base import Value
from ..values.containers import DictValue
from ..values.functions import NestedFunctionValue

__all__ = ["emit_function_attributes"]


def emit_function_attributes(
    em: Emitter,
    value: NestedFunctionValue,
    name: str,
    emit: Callable[[Value], str],
    built: dict[int, str],
    indent: str,
) -> None:
    """The fields the program assigned and the ``__dict__`` it filled, on the rebuilt
    function ``name`` (its ``__dict__`` is that dict, wherever else it is reached from)."""
    for field, item in value.fields.items():
        em.lines.append(f"{indent}{name}.{field} = {emit(item)}")
    namespace = value.namespace
    if namespace is None:
        return
    if id(namespace) in built:
        raise Unsupported(f"rebuilding the __dict__ of {value.describe()} before the function")
    built[id(namespace)] = f"{name}.__dict__"
    if isinstance(namespace, DictValue) and namespace.entries:
        pairs = [f"({emit(k)}, {emit(v)})" for k, v in namespace.entries.values()]
        em.lines.append(f"{indent}{name}.__dict__.update([{', '.join(pairs)}])")
