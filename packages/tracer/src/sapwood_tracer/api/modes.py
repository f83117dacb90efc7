"""Calls that run eagerly for now, whatever the code: while the program has replaced builtins,
while a torch function or dispatch mode of the program's is active, or inside a
``torch.func`` transform (``vmap(compiled)``).

A ``TorchFunctionMode`` or ``TorchDispatchMode`` (a ``FlopCounterMode``, a logging or
debugging mode, ``FakeTensorMode``) sees every torch call made while it is active. A trace
made then would show it sapwood's own calls (fake tensors, metadata, the backend's compile),
and a graph compiled under one mode would bake that mode's choices in and serve calls made
under another. So such a call runs eagerly: the mode sees exactly what eager code does.
This is reported once per code (a :class:`ModeFallbackWarning`), in ``explain()`` and in
the ``graph_breaks`` log; the next call without the mode is traced or served as usual.

torch's own default-device modes (``torch.set_default_device``, ``with torch.device(...)``:
``DeviceContext``) are the exception. They only give factory functions called without a
device that device; the trace does the same (see ``pymodel.torch_functions``), guarded on
the device, while sapwood traces and compiles with them set aside
(:func:`device_modes_set_aside`), so they see none of sapwood's own calls.
"""

from __future__ import annotations

import contextlib
import types
import warnings
from collections.abc import Iterator

import torch

from ..errors import user_stacklevel
from ..guards.sources import SET_ASIDE_DEVICE, default_device_mode, program_function_mode
from ..pinned import replaced_builtins

__all__ = ["ModeFallbackWarning", "device_modes_set_aside", "eager_for_now"]


class ModeFallbackWarning(UserWarning):
    """A compiled function was called while a torch function or dispatch mode of the
    program's was active, or inside a ``torch.func`` transform, so it ran eagerly. Warned
    once per code object."""


_warned: set[types.CodeType] = set()


def eager_for_now(code: types.CodeType) -> str | None:
    """Why this call of ``code`` runs eagerly, or None where it need not."""
    replaced = replaced_builtins()
    if replaced:
        # the trace would read the program's replacement where the interpreter's code (and
        # torch's) calls the builtin: this call runs eagerly; a later one, once the program
        # put the builtins back, is traced again
        return f"the program replaced the builtins {', '.join(replaced)}"
    mode = _active_mode()
    if mode is None:
        return None
    reason = f"a {mode} is active (it applies to the calls eager code makes, not to a trace)"
    if code not in _warned:
        _warned.add(code)
        warnings.warn(
            f"sapwood: {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}) runs "
            f"eagerly while {reason}",
            ModeFallbackWarning,
            stacklevel=user_stacklevel(),
        )
    return reason


def _active_mode() -> str | None:
    if torch._C._are_functorch_transforms_active():
        # (``vmap(compiled)``, ``grad(compiled)``: the arguments are functorch's wrappers,
        # whose transform the graph and its backend would not apply)
        return "torch.func transform (vmap, grad, jacrev, ...)"
    mode = program_function_mode()
    if mode is not None:
        return f"TorchFunctionMode ({type(mode).__qualname__})"
    if torch._C._len_torch_dispatch_stack() > 0:
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        mode = _get_current_dispatch_mode()
        return f"TorchDispatchMode ({type(mode).__qualname__})"
    return None


@contextlib.contextmanager
def device_modes_set_aside() -> Iterator[None]:
    """Trace and compile with the default-device modes (the only function modes a traced call
    may have, see :func:`eager_for_now`) off the stack; their device is what the trace reads
    (``guards.sources.default_device_mode``)."""
    if not torch._C._is_torch_function_mode_enabled():
        yield
        return
    device = default_device_mode()
    popped = [
        torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())
    ]
    SET_ASIDE_DEVICE[0] = device
    try:
        yield
    finally:
        SET_ASIDE_DEVICE[0] = None
        for mode in reversed(popped):
            torch._C._push_on_torch_function_stack(mode)
