"""One guard record as one Python expression of the generated check (the slow, exact form).

:func:`guard_check` is the specification the fast path (:mod:`.fast_path`) is measured
against: the fast path leaves out implied guards and reorders the rest, and where it cannot
say which guard failed it falls back to these expressions, one guard at a time.
"""

from __future__ import annotations

from typing import cast

import torch

from sapwood_graph import Guard, GuardKind, Source, TensorSpec

from ..errors import Unsupported
from .emitter import Emitter, _has_float, _is_static_spec
from .shapes import dynamic_tensor_check, shape_guard_check
from .sources import WeakHandle

__all__ = ["guard_check"]


def guard_check(em: Emitter, guard: Guard, indent: str) -> str:
    """One guard as a Python boolean expression over the entry's arguments (``L, C, G``);
    the sources it reads are emitted into ``em`` first."""
    kind, source, expected = guard.kind, guard.source, guard.expected
    if kind is GuardKind.SHAPE:
        return shape_guard_check(em, guard, indent)
    if source is None:
        raise Unsupported(f"a {kind.value} guard without a source")
    value = em.source(source, indent)
    if kind is GuardKind.TYPE_MATCH:
        return f"type({value}) is {em.const(expected)}"
    if kind is GuardKind.ID_MATCH:
        obj = em.held.get(expected)  # type: ignore[call-overload]
        if obj is None:
            raise Unsupported(f"an identity guard on {source} whose object is not held")
        if isinstance(obj, WeakHandle):
            # (sound: the entry is dropped when the object dies, so the reference is live
            # whenever the check runs; calling it, unlike ``id()``, raises no audit event,
            # which costs a call into every audit hook a library installed)
            em.weak_targets.append(obj)
            return f"{value} is {em.const(obj.ref)}()"
        return f"{value} is {em.const(obj)}"
    if kind is GuardKind.CONSTANT_MATCH:
        if expected is None or isinstance(expected, bool):
            return f"{value} is {em.const(expected)}"
        if _has_float(expected):
            # == would let -0.0 pass for 0.0 (and never pass for nan): compare exactly
            return f"_same_constant({value}, {em.const(expected)})"
        return f"{value} == {em.const(expected)}"
    if kind is GuardKind.ALIAS_MATCH:
        assert isinstance(expected, Source)
        other = em.source(expected, indent)
        return f"{value} is {other}"
    if kind is GuardKind.TENSOR_MATCH:
        assert isinstance(expected, TensorSpec)
        if not _is_static_spec(expected):
            return dynamic_tensor_check(em, value, expected)
        parts = [
            f"type({value}) is {em.const(expected.tensor_type)}",
            f"{value}.dtype is {em.const(expected.dtype)}",
            f"{value}.device == {em.const(expected.device)}",
            f"{value}.shape == {em.const(torch.Size(cast(tuple[int, ...], expected.shape)))}",
            f"{value}.stride() == {em.const(tuple(expected.stride))}",
            f"{value}.requires_grad is {em.const(expected.requires_grad)}",
            f"_dispatch_keys({value}).raw_repr() == {em.const(expected.dispatch_keys)}",
        ]
        return " and ".join(parts)
    raise Unsupported(f"a guard of kind {kind}")
