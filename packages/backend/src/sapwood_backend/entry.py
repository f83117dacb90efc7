"""``compile``: torch.compile's signature, sapwood's stack.

``compile(model, backend=..., mode=..., options=...)`` resolves the backend (registry, mode,
options), hands the model to the tracer, and, when the backend replays through CUDA graph
trees, tells the tree runtime when each top-level invocation begins.

The generation rule: a call of a compiled function or module that is not nested inside
another compiled call starts a new generation (``sapwood_cudagraph_trees.new_generation``);
nested calls, e.g. a compiled submodule called from a compiled model, do not. The depth is
kept per thread.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar, overload

import torch

from .modes import _USES_TREES, resolve_backend

__all__ = ["compile", "compile_in_place"]

_F = TypeVar("_F", bound=Callable[..., Any])
_local = threading.local()


def _enter() -> None:
    depth = getattr(_local, "depth", 0)
    if depth == 0:
        from sapwood_cudagraph_trees import new_generation

        new_generation()
    _local.depth = depth + 1


def _leave() -> None:
    _local.depth = getattr(_local, "depth", 1) - 1


def _top_level(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def top_level_call(*args: Any, **kwargs: Any) -> Any:
        _enter()
        try:
            return fn(*args, **kwargs)
        finally:
            _leave()

    return top_level_call


def _signal_generations(compiled: Any) -> Any:
    if isinstance(compiled, torch.nn.Module):
        inner = getattr(compiled, "_sapwood_forward", None)
        others = getattr(compiled, "_sapwood_others", None)
        if inner is not None or others is not None:
            # the tracer's compiled module: wrap its compiled forwards (module hooks would put
            # every call on nn.Module's slow hook path, several microseconds each)
            if inner is not None:
                object.__setattr__(compiled, "_sapwood_forward", _top_level(inner))
            if others is not None:  # the forwards the module has at later calls
                others.set_wrap(_top_level)
            return compiled
        compiled.register_forward_pre_hook(lambda module, args: _enter())
        compiled.register_forward_hook(lambda module, args, out: _leave(), always_call=True)
        return compiled
    return _top_level(compiled)


@overload
def compile(
    model: None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Callable[..., Any] = "inductor",
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    name: str | None = None,
    disable: bool = False,
    recompile_limit: int | None = None,
    isolate_recompiles: bool = False,
    shapes_spec: None = None,
    ddp_split: bool = True,
) -> Callable[[_F], _F]: ...
@overload
def compile(
    model: _F,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Callable[..., Any] = "inductor",
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    name: str | None = None,
    disable: bool = False,
    recompile_limit: int | None = None,
    isolate_recompiles: bool = False,
    shapes_spec: None = None,
    ddp_split: bool = True,
) -> _F: ...
def compile(
    model: Any = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Callable[..., Any] = "inductor",
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    name: str | None = None,
    disable: bool = False,
    recompile_limit: int | None = None,
    isolate_recompiles: bool = False,
    shapes_spec: None = None,
    ddp_split: bool = True,
) -> Any:
    """Compile a function or ``nn.Module`` with sapwood; the signature is torch.compile's.

    Used bare (``compile(fn)``) or as a decorator (``@compile(mode="reduce-overhead")``).
    ``backend`` is a registered name or a callable ``backend(gm, example_inputs)``; ``mode``
    and ``options`` configure the ``inductor`` backend (see :mod:`sapwood_backend.modes`).
    ``dynamic`` is the tracer's shape policy: ``None`` compiles static shapes first and makes
    the sizes that vary symbolic on the recompile, ``True`` symbolic from the start, ``False``
    never (``sapwood.mark_dynamic``/``mark_static`` override it per tensor dim).
    ``recompile_limit`` (variants traced before calls that match none run eagerly; with
    ``fullgraph=True`` they raise ``RecompileLimitExceeded``), ``isolate_recompiles`` (this
    compile's variants and limit are its own, not shared with other compiles of the same
    function) and ``name`` (the label of this compile's captures in the logs) are
    torch.compile's. ``shapes_spec`` is refused (``NotImplementedError``).
    ``ddp_split`` (sapwood's own): a ``DistributedDataParallel`` module compiles the model it
    wraps, each graph cut at DDP's gradient buckets so all-reduces overlap the backward;
    ``False`` keeps one graph (see the "Distributed training" docs page).
    ``options={"guards": "inputs"}`` (sapwood's own, never the default) declares the modules
    passed in frozen, for serving: each call checks their identity, not their whole tree
    (the exact contract is in the tracer docs, "Frozen models"; ``explain()`` says whether
    an entry uses it). The other options are Inductor's.
    Errors in these arguments are raised here, before anything is traced.
    """
    if shapes_spec is not None:
        raise NotImplementedError(
            "sapwood.compile: shapes_spec= is not supported; mark the dims that vary with "
            "sapwood.mark_dynamic(tensor, dim, min=..., max=...) or pass dynamic=True"
        )
    options = dict(options or {})
    guards = options.pop("guards", "all")  # (the front end's, not Inductor's: see below)
    if guards not in ("all", "inputs"):
        raise ValueError(f"options['guards'] must be 'all' or 'inputs', not {guards!r}")
    resolved = resolve_backend(backend, mode, options or None)

    def apply(target: Any) -> Any:
        if disable:
            return target
        import sapwood_tracer

        compiled = sapwood_tracer.compile(
            target,
            backend=resolved,
            fullgraph=fullgraph,
            dynamic=dynamic,
            ddp_split=ddp_split,
            recompile_limit=recompile_limit,
            isolate_recompiles=isolate_recompiles,
            name=name,
            guards=guards,
        )
        if mode in _USES_TREES or backend == "cudagraphs":
            return _signal_generations(compiled)
        return compiled

    if model is None:
        return apply
    return apply(model)


def compile_in_place(module: torch.nn.Module, **options: Any) -> None:
    """``module.compile(...)`` with sapwood: compile ``module`` in place, so that calling it
    (and the modules that hold it) runs it compiled, while it stays the same object with
    the same ``state_dict()`` keys (no ``_orig_mod.`` prefix). ``options`` are
    :func:`compile`'s. Like torch's ``nn.Module.compile``, it sets the module's
    ``_compiled_call_impl``; ``module._compiled_call_impl = None`` undoes it."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"compile_in_place takes an nn.Module, not {type(module).__name__}")
    compiled = compile(module, **options)
    # the compiled wrapper's __call__ (not the wrapper: nn.Module.__setattr__ would make a
    # module attribute its child); it runs the original's hooks around the compiled forward
    module._compiled_call_impl = None if compiled is module else compiled.__call__
