"""Modules that ``torch.distributed`` wraps: DDP and FSDP2.

Both wrappers do their work in Python around the model's own ``forward``: DDP's ``forward``
prepares its reducer, broadcasts buffers and calls ``self.module``; FSDP2's forward hooks
all-gather a block's parameters before its ``forward`` and free them after. That work is
communication and bookkeeping, not graph material, so it runs eagerly, and what it wraps is
compiled:

* ``compile(DDP(model))`` returns a :class:`CompiledDDP`: each call runs DDP's ``forward``
  eagerly while the wrapped model's ``forward`` is, for that call, its compiled ``forward``
  (an instance attribute, which ``nn.Module.__call__`` and DDP's direct ``module.forward``
  both read). The backend is wrapped so each graph is cut at DDP's gradient-bucket
  boundaries (:func:`sapwood_graph.buckets.split_at_buckets`), unless turned off.
* A module whose forward hooks the tracer does not inline (FSDP2's, see the module model) is
  called through :func:`call_with_forward`: ``nn.Module.__call__`` runs every hook as it
  would eagerly, around the module's compiled ``forward``.

Invariant: the compiled ``forward`` is installed only for the duration of one call and the
attribute found before (if any) is put back, so the wrapped module outside a compiled call
is exactly the user's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from sapwood_graph import Backend
from sapwood_graph.buckets import split_at_buckets

from .forwards import Forwards

__all__ = ["CompiledDDP", "OriginalModuleProxy", "bucketed_backend", "call_with_forward", "is_ddp"]

_MISSING = object()


def is_ddp(module: torch.nn.Module) -> bool:
    """Whether ``module`` is a ``DistributedDataParallel`` (without importing
    ``torch.distributed`` where nothing has)."""
    if not torch.distributed.is_available():
        return False
    from torch.nn.parallel import DistributedDataParallel

    return isinstance(module, DistributedDataParallel)


def call_with_forward(
    module: torch.nn.Module,
    forward: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    call: Callable[..., Any] | None = None,
) -> Any:
    """``call(*args, **kwargs)`` (default: ``module``'s own ``__call__``) while ``module.forward``
    is ``forward``; the attribute is restored afterwards."""
    d = module.__dict__
    prior = d.get("forward", _MISSING)
    d["forward"] = forward
    try:
        return (call or module)(*args, **kwargs)
    finally:
        if prior is _MISSING:
            d.pop("forward", None)
        else:
            d["forward"] = prior


def bucketed_backend(ddp: torch.nn.Module, backend: Backend) -> Backend:
    """``backend`` behind a split at ``ddp``'s gradient buckets: its byte caps, and the
    parameters it reduces (trainable, not in ``parameters_to_ignore``)."""
    ignored = getattr(ddp, "parameters_to_ignore", set())
    params = {
        id(p)
        for name, p in ddp.module.named_parameters()  # type: ignore[union-attr]
        if p.requires_grad and name not in ignored
    }
    cap = int(ddp.bucket_bytes_cap)  # type: ignore[arg-type]
    config = getattr(ddp, "_bucket_config", None)
    first = getattr(config, "first_bucket_bytes_cap", None)
    if first is None:  # older DDP: the reducer's default first bucket
        first = min(cap, getattr(torch.distributed, "_DEFAULT_FIRST_BUCKET_BYTES", cap))
    return split_at_buckets(
        backend, bucket_cap_bytes=cap, first_bucket_cap_bytes=int(first), params=params
    )


class OriginalModuleProxy(torch.nn.Module):
    """A compiled module's wrapper: the original is its only child, ``_orig_mod``, and what
    the wrapper does not have itself (attributes, ``state_dict``) is the original's."""

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod.load_state_dict(*args, **kwargs)


class CompiledDDP(OriginalModuleProxy):
    """``compile(DDP(model))``: DDP's ``forward`` eagerly, the wrapped model's compiled.

    ``_orig_mod`` is the DDP module (``state_dict()`` keeps DDP's ``module.`` keys; attribute
    access such as ``no_sync()`` falls through to it).
    """

    __sapwood_compiled_module__ = True

    def __init__(
        self,
        ddp: torch.nn.Module,
        compile_forward: Callable[[Any], Callable[..., Any]],
    ) -> None:
        super().__init__()
        self._orig_mod = ddp
        assert isinstance(ddp.module, torch.nn.Module)
        # whatever the wrapped model's forward is at each call, compiled (see .forwards)
        object.__setattr__(self, "_sapwood_others", Forwards(compile_forward))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        ddp = self._orig_mod
        inner = ddp.module
        assert isinstance(inner, torch.nn.Module)
        forward = self._sapwood_others.bound(inner.forward)
        return call_with_forward(inner, forward, args, kwargs, call=ddp)
