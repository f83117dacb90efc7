"""Modes and options: turning ``(backend, mode, options)`` into one backend callable.

The rules follow torch.compile so that code moves between the two unchanged:

* ``mode`` and ``options`` apply to the ``inductor`` backend only; giving either with another
  backend is an error rather than being silently ignored;
* ``mode`` and ``options`` may not both be given (``options`` is the finer tool);
* ``options`` keys are ``torch._inductor.config`` names; an unknown key is an error naming it.

Modes:

``default``
    Inductor as it is.
``reduce-overhead``
    Inductor with its own CUDA graphs off; every compiled forward, backward and inference
    function is replayed through sapwood's CUDA graph tree runtime, with parameters and
    buffers as static inputs. Needs CUDA; on CPU inputs the tree runtime runs the function
    eagerly and records why.
``max-autotune``
    Inductor's autotuning of matmuls and convolutions, plus the tree runtime as above.
``max-autotune-no-cudagraphs``
    Autotuning without CUDA graphs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .registry import BackendError, lookup_backend

__all__ = ["MODES", "InvalidModeError", "resolve_backend", "torch_backend"]

MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "reduce-overhead": {},
    "max-autotune": {"max_autotune": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True},
}
_USES_TREES = frozenset({"reduce-overhead", "max-autotune"})


class InvalidModeError(BackendError):
    """A mode or option set that sapwood does not know, or that does not fit the backend."""


def _check_options(options: dict[str, Any]) -> None:
    from torch._inductor import config as inductor_config

    known = set(inductor_config.get_config_copy())
    unknown = sorted(key for key in options if key not in known)
    if unknown:
        raise InvalidModeError(
            f"unknown Inductor option(s) {', '.join(map(repr, unknown))}; options are "
            "torch._inductor.config names, e.g. 'max_autotune' or 'triton.cudagraphs'"
        )


def resolve_backend(
    backend: str | Callable[..., Any] = "inductor",
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """Return the backend callable for ``backend`` under ``mode`` / ``options``.

    Raises :class:`InvalidModeError` for an unknown mode, for a mode or options given with a
    backend other than ``inductor``, or for both at once; :class:`UnknownBackendError` for an
    unknown backend name.
    """
    if mode is not None and options is not None:
        raise InvalidModeError(
            "give either mode or options, not both (options are the finer tool: "
            "e.g. options={'max_autotune': True})"
        )
    if mode is not None and mode not in MODES:
        raise InvalidModeError(
            f"unknown mode {mode!r}; the modes are {', '.join(map(repr, MODES))}"
        )
    is_inductor = backend == "inductor"
    if not is_inductor and (mode not in (None, "default") or options):
        name = backend if isinstance(backend, str) else getattr(backend, "__name__", "callable")
        raise InvalidModeError(
            f"mode and options apply to the 'inductor' backend only, not to {name!r}; "
            "drop them, or configure that backend directly"
        )
    if not is_inductor or (mode in (None, "default") and not options):
        return lookup_backend(backend)

    from .builtin import inductor_with

    patches = dict(MODES[mode]) if mode is not None else dict(options or {})
    _check_options(patches)
    trees = mode in _USES_TREES
    # one backend per configuration: compiles with equal settings share cache entries (the
    # tracer serves a call only with entries of its own backend)
    key: tuple[Any, ...] | None = (trees, *sorted(patches.items()))
    try:
        made = _MADE.get(key)  # type: ignore[arg-type]
    except TypeError:  # an option value that cannot be hashed: a backend of its own
        made, key = None, None
    if made is not None:
        return made
    if trees:
        from .cudagraphs import inductor_on_trees

        made = inductor_on_trees(patches)
    else:
        made = inductor_with(patches)
    if key is not None:
        _MADE[key] = made
    return made


_MADE: dict[tuple[Any, ...], Callable[..., Any]] = {}


def torch_backend(mode: str = "reduce-overhead") -> Callable[..., Any]:
    """A backend for ``torch.compile`` that replays torch's compiled graphs through sapwood's trees.

    ``torch.compile(model, backend=sapwood_backend.torch_backend())``. ``mode`` is
    ``"reduce-overhead"`` or ``"max-autotune"``.
    """
    from .cudagraphs import inductor_on_trees

    if mode not in ("reduce-overhead", "max-autotune"):
        raise InvalidModeError(
            f"torch_backend puts graphs on CUDA graph trees, so its mode is 'reduce-overhead' "
            f"or 'max-autotune', not {mode!r}"
        )
    return inductor_on_trees(MODES[mode])
