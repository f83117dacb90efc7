"""Attributes the trace assigns to tensors (``y.tag = 3``, ``x.scale = 2.0``).

A tensor's instance dict is the object's, and one object may be several tensor values in
the trace (an in-place result is its target): the table is kept per tensor object, which
the trace knows by its fake tensor (see :func:`~sapwood_tracer.values.tensors.same_tensor`).
Reads look here first; the rebuilt outputs and the attribute writes of inputs set them on
the real tensors. Attributes an input tensor had before the call are read from its own
``__dict__`` (:func:`instance_attribute`), guarded.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import torch

from sapwood_graph import AttrSource

from ..guards.emitter import Emitter
from ..guards.sources import ContainsSource, ReaderSource
from .base import Context, Value

__all__ = [
    "assign_attribute",
    "assigned_attributes",
    "data_descriptor",
    "emit_with_attributes",
    "input_attribute",
    "instance_attribute",
    "shadows_tensor_names",
]

#: attributes the trace assigned to tensors (``t.scale = 2.0``), by the id of the tensor
#: object's fake tensor (with a weak reference that tells a reused id): read back before
#: the tensor's class, and set on the real tensor after the graph
_ASSIGNED: dict[int, tuple[weakref.ref[torch.Tensor], dict[str, Value]]] = {}


def assigned_attributes(value: Any) -> dict[str, Value]:
    """The attributes the trace assigned to the tensor ``value`` stands for, in order."""
    fake = getattr(value, "fake", None)
    found = _ASSIGNED.get(id(fake))
    return found[1] if found is not None and found[0]() is fake else {}


def assign_attribute(tensor: Any, name: str, value: Value) -> None:
    """``tensor.name = value`` for the tensor value ``tensor`` (one with a fake tensor)."""
    fake = tensor.fake
    found = _ASSIGNED.get(id(fake))
    if found is None or found[0]() is not fake:
        for key in [k for k, (ref, _) in _ASSIGNED.items() if ref() is None]:
            del _ASSIGNED[key]  # (tables of fake tensors gone with their traces)
        found = _ASSIGNED[id(fake)] = (weakref.ref(fake), {})
    found[1][name] = value


def emit_with_attributes(
    em: Emitter,
    value: Any,
    out: str,
    emit: Callable[[Value], str],
    built: dict[int, str],
    indent: str,
) -> str:
    """The tensor ``out`` (an expression of generated code) rebuilt with the attributes the
    trace assigned to ``value``: set on it before anything else may read it."""
    assigned = assigned_attributes(value)
    if not assigned:
        return out
    name = em.temp()
    em.lines.append(f"{indent}{name} = {out}")
    built[id(value)] = name  # (an attribute may lead back to the tensor itself)
    for k, v in assigned.items():
        em.lines.append(f"{indent}setattr({name}, {em.const(k)}, {emit(v)})")
    return name


@functools.cache
def data_descriptor(name: str) -> bool:
    """Whether ``Tensor.name`` is a data descriptor (``shape``, ``grad``), which an instance
    attribute of the same name cannot shadow."""
    for klass in torch.nn.Parameter.__mro__:
        if name in vars(klass):
            kind = type(vars(klass)[name])
            return hasattr(kind, "__set__") or hasattr(kind, "__delete__")
    return False


#: every name a tensor's class defines: an instance attribute of one of these shadows it
_TENSOR_NAMES = frozenset(n for k in torch.nn.Parameter.__mro__ for n in vars(k))


def shadows_tensor_names(tensor: torch.Tensor) -> bool:
    """Whether a tensor's own ``__dict__`` has a name its class defines (a guard reader)."""
    return not tensor.__dict__.keys().isdisjoint(_TENSOR_NAMES)


def instance_attribute(tx: Context, tensor: Any, name: str) -> Value | None:
    """``tensor.name`` from the input tensor's own ``__dict__`` (``x.scale = 2.0`` set before
    the call), where Python looks first for a name no data descriptor takes; None where the
    dict has no such name, and a guard that it still has none on later calls: for a name of
    the tensor API (a method), one guard per tensor that its dict shadows no such name."""
    return input_attribute(tx, tx.graph.input_object(tensor), tensor.input_source, name)


def input_attribute(tx: Context, real: Any, source: Any, name: str) -> Value | None:
    """:func:`instance_attribute` of the input tensor ``real`` found at ``source`` (None:
    not an input)."""
    if real is None or source is None:
        return None
    attrs = real.__dict__
    if name in attrs:
        return tx.wrap(attrs[name], AttrSource(source, name))
    if name in _TENSOR_NAMES:
        tx.guard_false(ReaderSource(source, shadows_tensor_names))
    else:
        tx.guard_false(ContainsSource(AttrSource(source, "__dict__"), name))
    return None
