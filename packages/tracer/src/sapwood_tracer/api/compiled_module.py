"""A compiled ``nn.Module`` (:class:`CompiledModule`).

It is still an ``nn.Module`` (same parameters, ``train()``/``eval()``, ``state_dict()`` with
the original keys, attribute access falls through to the original), whose ``forward`` runs
the compiled ``forward`` of the original, with the original's forward hooks around it.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch

from ..errors import Unsupported
from .distributed import OriginalModuleProxy
from .forwards import NO_RECEIVER, Forwards

__all__ = ["CompiledModule"]


class CompiledModule(OriginalModuleProxy):
    """A compiled ``nn.Module``: the original is its only child, ``_orig_mod``.

    Each call runs what ``_orig_mod.forward`` is at that call, compiled (see
    :mod:`.forwards`): a forward set on the instance or the class later is followed.
    """

    __sapwood_compiled_module__ = True

    def __init__(
        self,
        module: torch.nn.Module,
        make: Callable[[types.FunctionType], Callable[..., Any]],
        fullgraph: bool = False,
    ) -> None:
        """``make(function)`` compiles a forward function (called with the module first)."""
        super().__init__()
        self._orig_mod = module
        forward = type(module).forward
        if not isinstance(forward, types.FunctionType):
            raise TypeError(f"{type(module).__qualname__}.forward is not a Python function")

        # The forward is compiled unbound and called with the module at each call, so a copy
        # of the compiled module (``copy.deepcopy``) runs its own copy of the module.
        object.__setattr__(self, "_sapwood_traced", forward)
        object.__setattr__(self, "_sapwood_forward", make(forward))
        object.__setattr__(self, "_sapwood_others", Forwards(make))
        object.__setattr__(self, "_sapwood_fullgraph", fullgraph)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        # (``self._orig_mod`` goes through nn.Module.__getattr__; the child is always there)
        module: torch.nn.Module = self._modules["_orig_mod"]  # type: ignore[assignment]
        bound = module.forward  # what nn.Module.__call__ would run
        if type(bound) is types.MethodType and bound.__func__ is self._sapwood_traced:
            run, receiver = self._sapwood_forward, bound.__self__
        else:
            run, receiver = self._sapwood_others.resolve(bound)
        if module._forward_hooks or module._forward_pre_hooks:
            return self._forward_with_hooks(module, run, receiver, args, kwargs)
        if receiver is NO_RECEIVER:
            return run(*args, **kwargs)
        return run(receiver, *args, **kwargs)

    def _forward_with_hooks(
        self,
        module: torch.nn.Module,
        run: Callable[..., Any],
        receiver: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        # The original module's own forward (pre-)hooks run around the compiled forward,
        # in Module._call_impl's order (they are Python code, as they would be eagerly).
        if module._backward_hooks or module._backward_pre_hooks:
            if self._sapwood_fullgraph:
                raise Unsupported(
                    f"backward hooks on the compiled module {type(module).__qualname__}"
                )
            # eagerly, hooks and all (``_call_impl``: a module compiled in place would come
            # back here through ``__call__``)
            return module._call_impl(*args, **kwargs)
        for hook_id, hook in list(module._forward_pre_hooks.items()):
            if hook_id in module._forward_pre_hooks_with_kwargs:
                result = hook(module, args, kwargs)
                if result is not None:
                    args, kwargs = result
            else:
                result = hook(module, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        if receiver is NO_RECEIVER:
            output = run(*args, **kwargs)
        else:
            output = run(receiver, *args, **kwargs)
        for hook_id, hook in list(module._forward_hooks.items()):
            if hook_id in module._forward_hooks_with_kwargs:
                result = hook(module, args, kwargs, output)
            else:
                result = hook(module, args, output)
            if result is not None:
                output = result
        return output
