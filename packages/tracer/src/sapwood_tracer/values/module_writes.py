"""Attribute writes on Python modules the trace reaches (``sys.spam = 1``,
``setattr(sys, "breakpointhook", hook)``).

A plain module's attribute is an entry of its ``__dict__``, which is the globals of the code
defined in it: a write (or a ``del``) is recorded as an assignment of that global (later reads in the trace,
through the module or as a global of its functions, see the new value) and replayed into the
dict after the graph.

Replaying afterwards is exact only where nothing in the trace reads the attribute behind the
trace's back. For ``sys``, the interpreter itself reads some attributes from C (``print`` reads
``sys.stdout``, imports read ``sys.path``, tracebacks ``sys.tracebacklimit``, ...): writes to
those are refused (:data:`_READ_BY_THE_INTERPRETER`). The other modules keep refusing writes:
library code compiled into the graph (a torch function reading a module flag) would run before
the write is replayed.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from sapwood_graph import AttrSource, GuardKind, Source

from ..errors import Unsupported
from ..guards.sources import ContainsSource
from .base import Context, Value
from .exceptions import python_error

__all__ = ["delete_module_attribute", "pending_module_attribute", "write_module_attribute"]

#: ``sys`` attributes CPython's C code (or code sapwood runs for real while tracing, such as
#: the import system) reads: a write to one is seen there at once, not after the graph.
_READ_BY_THE_INTERPRETER = frozenset(
    {
        "stdin",
        "stdout",
        "stderr",
        "__stdin__",
        "__stdout__",
        "__stderr__",
        "displayhook",
        "excepthook",
        "unraisablehook",
        "ps1",
        "ps2",
        "tracebacklimit",
        "last_type",
        "last_value",
        "last_traceback",
        "last_exc",
        "path",
        "meta_path",
        "path_hooks",
        "path_importer_cache",
        "modules",
        "flags",
        "warnoptions",
        "_xoptions",
        "dont_write_bytecode",
        "pycache_prefix",
        "implementation",
        "argv",
        "orig_argv",
        "executable",
        "platlibdir",
        "monitoring",
    }
)


def _check_writable(module: types.ModuleType, name: Any, what: str, doing: str) -> None:
    if module is not sys or type(module) is not types.ModuleType:
        raise Unsupported(f"{doing} attribute {name!r} of {what}")
    if not isinstance(name, str):
        raise python_error(TypeError, f"attribute name must be string, not {type(name).__name__!r}")
    if name in _READ_BY_THE_INTERPRETER:
        raise Unsupported(
            f"{doing} attribute {name!r} of {what}, which the interpreter reads itself",
            hint="Do it outside the compiled function.",
        )


def write_module_attribute(
    tx: Context, module: types.ModuleType, name: str, value: Value, what: str
) -> None:
    """``module.name = value`` in the trace (``what`` names the module for reasons)."""
    _check_writable(module, name, what, "setting")
    tx.side_effects.store_global(vars(module), name, value)


def delete_module_attribute(
    tx: Context, module: types.ModuleType, name: str, source: Source, what: str
) -> None:
    """``del module.name`` in the trace (``source``: where the guards find the module)."""
    _check_writable(module, name, what, "deleting")
    written, pending = pending_module_attribute(tx, module, name)
    if written:
        present = pending is not None
    else:
        present = name in vars(module)
        tx.guard(
            GuardKind.CONSTANT_MATCH, ContainsSource(AttrSource(source, "__dict__"), name), present
        )
    if not present:
        try:  # (Python's own words, from a module of the same name)
            delattr(types.ModuleType(module.__name__), name)
        except AttributeError as exc:
            raise python_error(AttributeError, *exc.args) from None
    tx.side_effects.store_global(vars(module), name, None)


def pending_module_attribute(
    tx: Context, module: types.ModuleType, name: str
) -> tuple[bool, Value | None]:
    """``(True, value)`` if the trace wrote ``module.name`` (see :func:`write_module_attribute`)."""
    if module is not sys:
        return False, None
    return tx.side_effects.pending_global(vars(module), name)
