"""What a call that failed a guard held there, for the recompile reason: "guard failed:
L['x'] matches Tensor(float32, cpu, [8]); seen: dtype float64 (expected float32)".

The value is read again from the call's arguments, closure and globals through the guard's
source (the same reads the guard made), only when a call already missed every entry. A
source that cannot be read here (one of the traced function's own defaults, a shape guard
over several sources) leaves the reason as it was.
"""

from __future__ import annotations

import reprlib
import types
from typing import Any

import torch

from sapwood_graph import Guard, GuardKind, TensorSpec

from ..interpreter.session import root_sources

__all__ = ["seen_at"]

_SHORT = reprlib.Repr()
_SHORT.maxstring = 60
_SHORT.maxother = 60


def seen_at(
    guard: Guard,
    code: types.CodeType,
    L: tuple[Any, ...],
    closure: tuple[types.CellType, ...],
    f_globals: dict[str, Any],
) -> str | None:
    """What the call held where ``guard`` looked, in words; None where it cannot be told."""
    source = guard.source
    if source is None:
        return None
    f_locals = dict(zip((name for name, _ in root_sources(code)), L))
    try:
        function = types.FunctionType(code, f_globals, code.co_name, None, closure or None)
        value = source.resolve(f_locals, f_globals, function)
    except Exception:
        return None
    return _describe(guard, value)


def _describe(guard: Guard, value: Any) -> str:
    expected = guard.expected
    if guard.kind is GuardKind.TENSOR_MATCH and isinstance(expected, TensorSpec):
        if not isinstance(value, torch.Tensor):
            return f"a {type(value).__qualname__}, not a tensor"
        return _tensor_difference(expected, value)
    if guard.kind is GuardKind.TYPE_MATCH:
        return f"type {type(value).__qualname__}"
    if guard.kind in (GuardKind.ID_MATCH, GuardKind.ALIAS_MATCH):
        return f"another object (a {type(value).__qualname__})"
    return _SHORT.repr(value)


def _tensor_difference(spec: TensorSpec, tensor: torch.Tensor) -> str:
    seen = TensorSpec.of(tensor)
    differences = []
    for name in ("tensor_type", "dtype", "device", "requires_grad"):
        want, got = getattr(spec, name), getattr(seen, name)
        if want != got:
            differences.append(f"{name} {_short(got)} (expected {_short(want)})")
    if len(spec.shape) != len(seen.shape):
        differences.append(f"{len(seen.shape)} dims (expected {len(spec.shape)})")
    else:
        for dim, (want, got) in enumerate(zip(spec.shape, seen.shape)):
            if want is not None and want != got:
                differences.append(f"size {got} at dim {dim} (expected {want})")
        if not differences and any(
            w is not None and w != g for w, g in zip(spec.stride, seen.stride)
        ):
            differences.append(f"strides {tensor.stride()} (expected {spec.stride})")
    if not differences and spec.dispatch_keys != seen.dispatch_keys:
        differences.append("other dispatch keys (a conjugate, negative or inference tensor?)")
    return ", ".join(differences) or seen.describe()


def _short(value: Any) -> str:
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, type):
        return value.__qualname__
    return str(value)
