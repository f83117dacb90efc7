"""Calls that run eagerly for now, whatever the code: while the program has replaced builtins,
or while a torch function or dispatch mode of the program's is active.

A ``TorchFunctionMode`` or ``TorchDispatchMode`` (a ``FlopCounterMode``, a logging or
debugging mode, ``FakeTensorMode``) sees every torch call made while it is active. A trace
made then would show it sapwood's own calls (fake tensors, metadata, the backend's compile),
and a graph compiled under one mode would bake that mode's choices in and serve calls made
under another. So such a call runs eagerly: the mode sees exactly what eager code does.
This is reported once per code (a :class:`ModeFallbackWarning`), in ``explain()`` and in
the ``graph_breaks`` log; the next call without the mode is traced or served as usual.
"""

from __future__ import annotations

import types
import warnings

import torch

from ..errors import user_stacklevel
from ..pinned import replaced_builtins

__all__ = ["ModeFallbackWarning", "eager_for_now"]


class ModeFallbackWarning(UserWarning):
    """A compiled function was called while a torch function or dispatch mode of the
    program's was active, so it ran eagerly. Warned once per code object."""


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
    reason = f"a {mode} is active (a mode sees the calls eager code makes, not a trace)"
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
    if torch._C._is_torch_function_mode_enabled():
        mode = torch.overrides._get_current_function_mode()
        return f"TorchFunctionMode ({type(mode).__qualname__})"
    if torch._C._len_torch_dispatch_stack() > 0:
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        mode = _get_current_dispatch_mode()
        return f"TorchDispatchMode ({type(mode).__qualname__})"
    return None
