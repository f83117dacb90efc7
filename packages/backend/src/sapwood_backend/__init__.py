"""sapwood-backend: the backend registry, the built-in backends, and modes.

A backend follows the torch.compile protocol ``backend(gm, example_inputs) -> callable``.
Backends are looked up by name (``"eager"``, ``"aot_eager"``, ``"inductor"``, ``"cudagraphs"``, third-party ones
from the ``sapwood.backends`` entry-point group) or passed as callables::

    import sapwood_backend

    @sapwood_backend.register_backend
    def my_backend(gm, example_inputs):
        return gm.forward

    fn = sapwood_backend.resolve_backend("inductor", mode="max-autotune-no-cudagraphs")
"""

from . import builtin as _builtin  # registers eager, aot_eager, inductor
from . import cudagraphs as _cudagraphs  # registers cudagraphs
from .artifacts import ArtifactsWarning, load_artifacts, save_artifacts
from .entry import compile, compile_in_place
from .modes import MODES, InvalidModeError, resolve_backend, torch_backend
from .registry import (
    ENTRY_POINT_GROUP,
    Backend,
    BackendError,
    UnknownBackendError,
    list_backends,
    lookup_backend,
    register_backend,
)

__version__ = "0.1.0"

__all__ = [
    "ENTRY_POINT_GROUP",
    "MODES",
    "ArtifactsWarning",
    "Backend",
    "BackendError",
    "InvalidModeError",
    "UnknownBackendError",
    "__version__",
    "compile",
    "compile_in_place",
    "list_backends",
    "load_artifacts",
    "lookup_backend",
    "register_backend",
    "resolve_backend",
    "save_artifacts",
    "torch_backend",
]

del _builtin, _cudagraphs
