"""The builtins sapwood's own code calls, as they were when sapwood was imported.

A program may replace a builtin (``builtins.len = ...``: CPython's test_functools installs a
caching ``len``). sapwood's own code and the code it generates (guard checks, graph-break
tails) must keep calling the real ones: the program's replacement would otherwise change what
sapwood does, or raise inside it. :data:`BUILTINS` is a copy of the builtins namespace taken at
import; generated code runs with it as its builtins, and :func:`pin_modules` makes it the
fallback of the globals of sapwood's modules (a module's own names still come first).

Invariant: nothing here is ever updated from the live ``builtins`` module.

May import: the standard library only.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

__all__ = ["BUILTINS", "pin_modules", "replaced_builtins"]

#: The builtins namespace at import (a copy: later assignments to ``builtins`` do not show).
BUILTINS: dict[str, Any] = dict(vars(builtins))

#: The callables among them (the names a program could replace to change sapwood's work).
_CALLABLES = {name: value for name, value in BUILTINS.items() if callable(value)}


def pin_modules(*packages: str) -> None:
    """Make every imported module of ``packages`` resolve builtin names (``len``, ``type``,
    ``getattr``, ...) to :data:`BUILTINS`: they become fallback globals of the module.
    Packages' ``__init__`` modules are left alone (their namespace is the public API)."""
    prefixes = tuple(f"{p}." for p in packages)
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(prefixes) or hasattr(module, "__path__"):
            continue
        namespace = vars(module)
        for key, value in _CALLABLES.items():
            if not key.startswith("__"):  # (the interpreter reads __import__ & co. itself)
                namespace.setdefault(key, value)


def replaced_builtins() -> list[str]:
    """The builtins the program has replaced or deleted since sapwood was imported."""
    live = vars(builtins)
    return [name for name, value in _CALLABLES.items() if live.get(name) is not value]
