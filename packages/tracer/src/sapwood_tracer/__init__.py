"""sapwood-tracer: a symbolic interpreter of CPython 3.11/3.12 bytecode that captures PyTorch
programs as whole FX graphs, guarded and cached per code object.

Public API:

* :func:`compile` — wrap a function or ``nn.Module``; calls trace on a cache miss.
* :func:`reset` — drop every cache entry.
* :class:`Unsupported` — a construct the tracer cannot capture (names it and ``file:line``).
* :class:`RecompileLimitWarning` — a function that kept recompiling now runs eagerly.
* :class:`CompiledModule` — what :func:`compile` returns for a module.
"""

from . import handlers as _handlers  # registers the opcode handlers
from ._api import CompiledModule, compile
from ._cache import RecompileLimitWarning, reset
from .errors import TracerError, Unsupported

__version__ = "0.1.0"

__all__ = [
    "CompiledModule",
    "RecompileLimitWarning",
    "TracerError",
    "Unsupported",
    "__version__",
    "compile",
    "reset",
]

del _handlers
