"""Attribute writes on Python modules the trace reaches (``sys.spam = 1``,
``setattr(sys, "breakpointhook", hook)``).

A plain module's attribute is an entry of its ``__dict__``, which is the globals of the code
defined in it: a write is recorded as an assignment of that global (later reads in the trace,
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

from ..errors import Unsupported
from .base import Context, Value

__all__ = ["pending_module_attribute", "write_module_attribute"]

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


def write_module_attribute(
    tx: Context, module: types.ModuleType, name: str, value: Value, what: str
) -> None:
    """``module.name = value`` in the trace (``what`` names the module for reasons)."""
    if module is not sys or type(module) is not types.ModuleType:
        raise Unsupported(f"setting attribute {name!r} of {what}")
    if name in _READ_BY_THE_INTERPRETER:
        raise Unsupported(
            f"setting attribute {name!r} of {what}, which the interpreter reads itself",
            hint="Set it outside the compiled function.",
        )
    tx.side_effects.store_global(vars(module), name, value)


def pending_module_attribute(
    tx: Context, module: types.ModuleType, name: str
) -> tuple[bool, Value | None]:
    """``(True, value)`` if the trace wrote ``module.name`` (see :func:`write_module_attribute`)."""
    if module is not sys:
        return False, None
    return tx.side_effects.pending_global(vars(module), name)
