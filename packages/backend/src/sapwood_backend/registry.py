"""The backend registry: names to backend callables.

A backend is anything with the torch.compile protocol ``backend(gm, example_inputs) -> callable``;
the registry never wraps or changes the callables it holds, so a backend registered here works
with ``torch.compile`` too, and any ``torch.compile`` backend can be registered here as it is.

Invariants:

* names are unique; registering a taken name is an error unless ``replace=True`` (so two
  plugins cannot silently shadow each other);
* third-party backends come from the ``sapwood.backends`` entry-point group, loaded once, on the
  first lookup of a name that is not registered directly, or on ``list_backends()``; a broken
  plugin is reported with its entry point's name when someone asks for it, and never breaks
  lookups of other backends.
"""

from __future__ import annotations

import difflib
import importlib.metadata
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

import torch

__all__ = [
    "ENTRY_POINT_GROUP",
    "Backend",
    "BackendError",
    "UnknownBackendError",
    "list_backends",
    "lookup_backend",
    "register_backend",
]

Backend = Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]]
"""The torch.compile backend protocol: a graph and its example inputs to a callable."""

ENTRY_POINT_GROUP = "sapwood.backends"

_B = TypeVar("_B", bound=Callable[..., Any])

_registered: dict[str, Callable[..., Any]] = {}
_entry_points: dict[str, importlib.metadata.EntryPoint] | None = None


class BackendError(ValueError):
    """A backend name or registration that cannot be used."""


class UnknownBackendError(BackendError):
    """No backend is registered under the name asked for."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        self.known = tuple(known)
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        super().__init__(
            f"no sapwood backend is named {name!r}.{hint} Known backends: "
            f"{', '.join(sorted(known)) or '(none)'}. Pass a callable "
            "`backend(gm, example_inputs) -> callable` to use an unregistered one, or register "
            "it with `sapwood.register_backend`."
        )


def _discover() -> dict[str, importlib.metadata.EntryPoint]:
    global _entry_points
    if _entry_points is None:
        found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        _entry_points = {ep.name: ep for ep in found}
    return _entry_points


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name or not name.replace("_", "a").isalnum():
        raise BackendError(
            f"a backend name must be a non-empty identifier-like string, got {name!r}"
        )
    return name


@overload
def register_backend(
    compiler_fn: None = None, *, name: str | None = None, replace: bool = False
) -> Callable[[_B], _B]: ...
@overload
def register_backend(compiler_fn: _B, *, name: str | None = None, replace: bool = False) -> _B: ...
def register_backend(
    compiler_fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    replace: bool = False,
) -> Any:
    """Register a backend under ``name`` (default: the callable's ``__name__``).

    Works as a decorator, with or without arguments, and as a plain call::

        @sapwood.register_backend
        def my_backend(gm, example_inputs):
            return gm.forward

        sapwood.register_backend(other_backend, name="other")

    Raises :class:`BackendError` if the name is taken (pass ``replace=True`` to override) or
    the object is not callable. Returns the callable unchanged.
    """

    def register(fn: _B) -> _B:
        if not callable(fn):
            raise BackendError(f"a backend must be callable, got {fn!r}")
        key = _check_name(name if name is not None else getattr(fn, "__name__", None))
        if key in _registered and not replace and _registered[key] is not fn:
            raise BackendError(
                f"a backend named {key!r} is already registered ({_registered[key]!r}); "
                "pass replace=True to override it"
            )
        _registered[key] = fn
        return fn

    if compiler_fn is None:
        return register
    return register(compiler_fn)


def lookup_backend(backend: str | Callable[..., Any]) -> Callable[..., Any]:
    """Return the backend callable for a name, or the callable itself if given one.

    Raises :class:`UnknownBackendError` with the known names (and close matches) for a name
    nobody registered, and :class:`BackendError` if an entry-point plugin fails to load.
    """
    if callable(backend):
        return backend
    if not isinstance(backend, str):
        raise BackendError(
            f"backend must be a name or a callable `backend(gm, example_inputs)`, "
            f"got {type(backend).__name__}"
        )
    if backend in _registered:
        return _registered[backend]
    entry = _discover().get(backend)
    if entry is None:
        theirs = _torch_backend(backend)
        if theirs is not None:
            return theirs
        raise UnknownBackendError(backend, list_backends())
    try:
        loaded = entry.load()
    except Exception as error:
        raise BackendError(
            f"the backend {backend!r} from entry point {entry.value!r} "
            f"(group {ENTRY_POINT_GROUP!r}) failed to load: {error}"
        ) from error
    if not callable(loaded):
        raise BackendError(f"entry point {entry.value!r} for backend {backend!r} is not callable")
    _registered[backend] = loaded
    return loaded


def _torch_backend(name: str) -> Callable[..., Any] | None:
    """torch.compile's backend of that name (``aot_eager_decomp_partition``, ``tvm``, ...)
    where sapwood has none: the same callable torch.compile would call, on sapwood's graphs.
    torch's registry (torch._dynamo) is loaded only for a name sapwood does not know."""
    import torch._dynamo

    if name not in torch._dynamo.list_backends(exclude_tags=()):
        return None
    from torch._dynamo.backends.registry import lookup_backend as torch_lookup

    found: Callable[..., Any] = torch_lookup(name)
    _registered[name] = found
    return found


def list_backends() -> list[str]:
    """Names of every registered backend and of every installed plugin, sorted."""
    return sorted(set(_registered) | set(_discover()))


def _forget_entry_points() -> None:
    """Drop the cached entry points, so that newly installed plugins are seen (for tests)."""
    global _entry_points
    _entry_points = None
