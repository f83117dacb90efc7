"""``torch._dynamo.config``, as sapwood reads it: each value a user changed is obeyed where
sapwood has the same control, and otherwise refused in words.

Obeyed (read where they act, each call or trace):

* ``recompile_limit`` (``cache_size_limit``), ``fail_on_recompile_limit_hit``
  (``fail_on_cache_limit_hit``): read here, used by
  :func:`~sapwood_tracer.api.cache.limit_for` and the entry;
* ``automatic_dynamic_shapes = False``: ``dynamic=None`` never makes sizes symbolic after a
  recompile (as ``dynamic=False``); ``assume_static_by_default = False`` or
  ``dynamic_shapes = False``: as ``dynamic=True`` / ``dynamic=False`` (:func:`shape_mode`);
* ``error_on_recompile = True``: a call that would trace again raises torch's
  ``RecompileError`` (:func:`error_on_recompile`);
* ``optimize_ddp = False``: a ``DistributedDataParallel`` model compiles to one graph
  (``ddp_split=False``);
* ``suppress_errors``: sapwood's own failures never reach the caller anyway.

Any other value changed from torch's default warns once (:class:`TorchConfigWarning`): sapwood
does not implement it, and the compile goes on without it. Read without importing Dynamo (a
program that set a value has loaded it).
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from ..errors import user_stacklevel

__all__ = [
    "TorchConfigWarning",
    "ddp_split",
    "error_on_recompile",
    "fails_on_limit",
    "recompile_limit",
    "shape_mode",
    "warn_unread",
]


class TorchConfigWarning(UserWarning):
    """A ``torch._dynamo.config`` value sapwood does not implement was changed."""


#: read where they act (above); what the user set takes effect
_OBEYED = frozenset(
    {
        "recompile_limit",
        "cache_size_limit",
        "fail_on_recompile_limit_hit",
        "fail_on_cache_limit_hit",
        "automatic_dynamic_shapes",
        "assume_static_by_default",
        "dynamic_shapes",
        "error_on_recompile",
        "optimize_ddp",
        "suppress_errors",
    }
)
_warned: set[tuple[str, str]] = set()


def _config() -> Any:
    return sys.modules.get("torch._dynamo.config")


def _changed(name: str) -> Any:
    """The value the user set for ``name``, or None where it is torch's default."""
    config = _config()
    if config is None:
        return None
    try:
        if config._is_default(name):
            return None
        return getattr(config, name)
    except Exception:  # (an older or newer torch without it)
        return None


def shape_mode(dynamic: bool | None) -> bool | None:
    """``compile(dynamic=...)`` with torch's shape switches applied to the default."""
    if dynamic is not None:
        return dynamic
    if _changed("dynamic_shapes") is False:
        return False
    if _changed("assume_static_by_default") is False:
        return True
    if _changed("automatic_dynamic_shapes") is False:
        return False
    return None


def recompile_limit() -> int | None:
    """``recompile_limit`` (or its old name ``cache_size_limit``) where the user set it."""
    value = _changed("recompile_limit")
    return max(value, 0) if type(value) is int else None


def fails_on_limit() -> bool:
    """``fail_on_recompile_limit_hit``: a call past the limit raises instead of running
    eagerly."""
    return _changed("fail_on_recompile_limit_hit") is True


def error_on_recompile() -> bool:
    return _changed("error_on_recompile") is True


def ddp_split(requested: bool) -> bool:
    """``compile(ddp_split=...)``, off where torch's ``optimize_ddp`` was set to False."""
    return requested and _changed("optimize_ddp") is not False


def warn_unread() -> None:
    """Warn once for each changed ``torch._dynamo.config`` value sapwood does not implement
    (or a value of ``optimize_ddp`` other than True/False)."""
    config = _config()
    if config is None:
        return
    try:
        names = [n for n in config._config if not n.startswith("_") and not config._is_default(n)]
    except Exception:  # (torch's config module changed: nothing to say)
        return
    for name in names:
        value = getattr(config, name, None)
        if name in _OBEYED and not (name == "optimize_ddp" and type(value) is not bool):
            continue
        key = (name, repr(value))
        if key in _warned:
            continue
        _warned.add(key)
        warnings.warn(
            f"sapwood: torch._dynamo.config.{name} = {value!r} is not implemented by sapwood; "
            "its compiles go on without it (see the 'Coming from torch.compile' docs page)",
            TorchConfigWarning,
            stacklevel=user_stacklevel(),
        )
