"""Calls of torch callables.

Most torch functions become one graph node. A few answer questions about state or metadata
and are folded at trace time (their answer is fixed by the guards); a few are refused because
they change global state the graph cannot restore (``torch.manual_seed``).
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import Unsupported
from ..marks import is_disallowed
from ..values.base import ConstantValue, Context, Value
from ..values.tensors import metadata_call

__all__ = ["call_torch_function"]


def _const(value: Any) -> Any:
    def handler(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        return ConstantValue(value)

    return handler


def _resolve(*paths: str) -> list[Any]:
    """The torch objects at ``paths`` that this torch version has (others are skipped)."""
    found = []
    for path in paths:
        obj: Any = torch
        try:
            for part in path.split(".")[1:]:
                obj = getattr(obj, part)
        except AttributeError:
            continue
        found.append(obj)
    return found


#: Functions folded on fake values / constants: their result is metadata, not data.
_METADATA_FUNCTIONS: set[Any] = set(
    _resolve(
        "torch.is_tensor",
        "torch.is_floating_point",
        "torch.is_complex",
        "torch.numel",
        "torch.result_type",
        "torch.promote_types",
        "torch.can_cast",
        "torch.broadcast_shapes",
        "torch.get_default_dtype",
        "torch.is_grad_enabled",
        "torch.is_inference_mode_enabled",
        "torch.is_autocast_enabled",
        "torch.get_autocast_dtype",
        "torch.is_storage",
        "torch._C._get_tracing_state",
        "torch._C._is_tracing",
        "torch.jit.is_tracing",
        "torch.jit.is_scripting",
        "torch._C._are_functorch_transforms_active",
        "torch.cuda.device_count",
        "torch.backends.mps.is_available",
        "torch.cuda.is_available",
        "torch._C._is_torch_function_mode_enabled",
        "torch._C._len_torch_dispatch_stack",
        "torch._C._get_cudnn_enabled",
        "torch.are_deterministic_algorithms_enabled",
    )
)

#: Whether a torch-function override applies: never, since tensor subclass inputs are refused.
_HAS_TORCH_FUNCTION: set[Any] = set(
    _resolve(
        "torch._C._has_torch_function",
        "torch._C._has_torch_function_unary",
        "torch._C._has_torch_function_variadic",
        "torch.overrides.has_torch_function",
        "torch.overrides.has_torch_function_unary",
        "torch.overrides.has_torch_function_variadic",
    )
)

_SPECIAL: dict[Any, Any] = {
    fn: _const(True)
    for fn in _resolve(
        "torch.compiler.is_compiling",
        "torch.compiler.is_dynamo_compiling",
        "torch._dynamo.is_compiling",
        "torch._utils.is_compiling",
    )
}
_SPECIAL.update({fn: _const(False) for fn in _HAS_TORCH_FUNCTION})

_REFUSED = {
    torch.manual_seed: "torch.manual_seed changes global RNG state",
    torch.seed: "torch.seed changes global RNG state",
    torch.set_default_dtype: "it changes global state",
    torch.set_rng_state: "it changes global RNG state",
    torch.get_rng_state: "RNG state is data",
    torch.use_deterministic_algorithms: "it changes global state",
}


def is_modelled_torch_function(fn: Any) -> bool:
    """Python-level torch functions answered here rather than inlined."""
    try:
        return fn in _SPECIAL or fn in _METADATA_FUNCTIONS or fn in _REFUSED
    except TypeError:
        return False


def call_torch_function(tx: Context, fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if is_disallowed(fn):
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
        raise Unsupported(f"a call to {name}, which sapwood.disallow_in_graph keeps out of graphs")
    special = _SPECIAL.get(fn)
    if special is not None:
        return special(tx, args, kwargs)  # type: ignore[no-any-return]
    if fn in _REFUSED:
        raise Unsupported(f"calling {getattr(fn, '__name__', fn)}", hint=f"({_REFUSED[fn]}).")
    if fn in _METADATA_FUNCTIONS:
        return metadata_call(tx, fn, args, kwargs)
    if "out" in kwargs:
        raise Unsupported(f"{getattr(fn, '__name__', fn)}(out=...)")
    return tx.graph.call_function(tx, fn, args, kwargs)
