"""Parts of a rebuilt value that :mod:`.outputs` hands over at a graph break: a nested
function's assigned fields and ``__dict__``, and which values are objects living outside the
trace (an ``id()`` of one means the same number eagerly).

Each takes ``emit``, the caller's rebuild of one value, so a value reached twice is built once.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import Unsupported
from ..guards.emitter import Emitter
from ..values.base import Value
from ..values.containers import DictValue
from ..values.functions import NestedFunctionValue
from ..values.identity import fresh_container, one_object
from ..values.tensors import TensorValue

__all__ = ["emit_function_attributes", "lasting"]


def lasting(value: Value) -> bool:
    """A value whose rebuilt object is the one the program has eagerly: read from the
    inputs, a constant that is one object wherever the program reaches it (a class, a
    function, a module, ``None``), or a list, dict or set made in the trace (rebuilt once, as
    the program's own). A tuple, frozenset or number made in the trace is not: eagerly it
    may be another object (``frozenset(s)`` is ``s``; ``zip`` reuses its tuple)."""
    if value.source is not None or fresh_container(value):
        return True
    if isinstance(value, TensorValue) or not value.is_constant():
        return False
    return one_object(value.as_constant())


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
