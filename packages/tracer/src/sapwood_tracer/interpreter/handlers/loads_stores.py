"""Loads and stores: locals, constants, globals, cells, attributes, imports.

Version differences: 3.11 has ``LOAD_METHOD``; 3.12 folds it into ``LOAD_ATTR`` (low bit of
the argument) and adds ``LOAD_SUPER_ATTR``, ``LOAD_FAST_CHECK`` and ``LOAD_FAST_AND_CLEAR``
(inlined comprehensions save and restore the loop variable with it). 3.13 pushes the NULL of
a call sequence *above* the callable (``LOAD_GLOBAL``, method-form ``LOAD_ATTR`` and
``LOAD_SUPER_ATTR``), reads a cell for a closure with ``LOAD_FAST`` (``LOAD_CLOSURE`` became a
pseudo-instruction), and adds the paired ``LOAD_FAST_LOAD_FAST``, ``STORE_FAST_LOAD_FAST`` and
``STORE_FAST_STORE_FAST``.

The tracer always loads a method as its bound attribute (the ``NULL`` form), so a call sees
``NULL, bound`` on 3.11/3.12 and ``bound, NULL`` on 3.13.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

from sapwood_graph import GlobalSource, ItemSource, Source

from ...errors import Unsupported
from ...guards.sources import ContainsSource, HeldObjectSource
from ...pymodel.builtins import make_super
from ...values.base import NULL, ConstantValue, Value
from ...values.containers import TupleValue
from ...values.exceptions import python_error
from ...values.functions import CellValue
from ...values.objects import NewObjectValue
from ...values.tuple_identity import KnownTupleValue
from ..frame import SymbolicFrame
from ..instructions import Instruction
from ..registry import opcode

_BUILTINS = builtins.__dict__
_BUILTINS_SOURCE = HeldObjectSource(id(_BUILTINS), "builtins", _BUILTINS)


def _load_local(frame: SymbolicFrame, name: str) -> Value:
    value = frame.locals.get(name)
    if value is None:
        raise python_error(
            UnboundLocalError,
            f"cannot access local variable {name!r} where it is not associated with a value",
        )
    return value


@opcode("LOAD_FAST", until=(3, 13))
def load_fast(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(_load_local(frame, inst.argval))


def _load_slot_313(frame: SymbolicFrame, name: str) -> Value:
    # the slot of a cell or free variable holds the cell: a closure being built reads it
    return frame.cells[name] if name in frame.cells else _load_local(frame, name)


@opcode("LOAD_FAST", since=(3, 13))
def load_fast_313(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(_load_slot_313(frame, inst.argval))


@opcode("LOAD_FAST_LOAD_FAST", since=(3, 13))
def load_fast_load_fast(frame: SymbolicFrame, inst: Instruction) -> None:
    first, second = inst.argval
    frame.push(_load_slot_313(frame, first))
    frame.push(_load_slot_313(frame, second))


@opcode("STORE_FAST_LOAD_FAST", since=(3, 13))
def store_fast_load_fast(frame: SymbolicFrame, inst: Instruction) -> None:
    stored, loaded = inst.argval
    _store_local(frame, stored, frame.pop())
    frame.push(_load_slot_313(frame, loaded))


@opcode("STORE_FAST_STORE_FAST", since=(3, 13))
def store_fast_store_fast(frame: SymbolicFrame, inst: Instruction) -> None:
    first, second = inst.argval  # the top of the stack goes to the first
    _store_local(frame, first, frame.pop())
    _store_local(frame, second, frame.pop())


@opcode("LOAD_FAST_CHECK", since=(3, 12))
def load_fast_check(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(_load_local(frame, inst.argval))


@opcode("LOAD_FAST_AND_CLEAR", since=(3, 12))
def load_fast_and_clear(frame: SymbolicFrame, inst: Instruction) -> None:
    # Pushes NULL for an unbound local; STORE_FAST of that NULL unbinds it again. For a cell
    # variable (an inlined comprehension whose variable a closure captures) the slot holds
    # the cell itself, which is saved and later restored the same way.
    name = inst.argval
    value = frame.cells.pop(name, None) if name in frame.cells else frame.locals.pop(name, None)
    frame.push(NULL if value is None else value)


@opcode("STORE_FAST")
def store_fast(frame: SymbolicFrame, inst: Instruction) -> None:
    _store_local(frame, inst.argval, frame.pop())


def _store_local(frame: SymbolicFrame, name: str, value: Value) -> None:
    if name in frame.code.co_cellvars and (value is NULL or isinstance(value, CellValue)):
        # 3.12 restores a cell variable saved by LOAD_FAST_AND_CLEAR
        if value is NULL:
            frame.cells.pop(name, None)
        else:
            frame.cells[name] = value
    elif value is NULL:
        frame.locals.pop(name, None)
    else:
        frame.locals[name] = value


@opcode("DELETE_FAST")
def delete_fast(frame: SymbolicFrame, inst: Instruction) -> None:
    if frame.locals.pop(inst.argval, None) is None:
        raise Unsupported(f"del of unbound local {inst.argval!r}")


@opcode("LOAD_CONST")
def load_const(frame: SymbolicFrame, inst: Instruction) -> None:
    value = frame.tx.wrap_trusted(inst.argval)
    if type(inst.argval) is tuple and isinstance(value, TupleValue):
        value = KnownTupleValue(value.items, inst.argval)  # (the code's very constant)
    frame.push(value)


def global_value(frame: SymbolicFrame, name: str) -> Value:
    tx = frame.tx
    g = frame.f_globals
    assigned, pending = tx.side_effects.pending_global(g, name)
    if assigned:
        if pending is not None:
            return pending
        if name in _BUILTINS:  # deleted by the trace: the builtin of that name shows again
            return tx.wrap_trusted(_BUILTINS[name])
        raise python_error(NameError, f"name {name!r} is not defined")
    if name in g:
        source: Source
        if frame.globals_source is None and g is tx.f_globals:
            source = GlobalSource(name)
        else:
            source = ItemSource(frame.globals_source or _held_globals(g), name)
        return tx.wrap(g[name], source)
    if name in _BUILTINS:
        if g is tx.f_globals and frame.globals_source is None:
            tx.guard_false(ContainsSource(_held_globals(g), name))
        else:
            tx.guard_false(ContainsSource(frame.globals_source or _held_globals(g), name))
        return tx.wrap_trusted(_BUILTINS[name])
    raise python_error(NameError, f"name {name!r} is not defined")


def _held_globals(g: dict) -> HeldObjectSource:
    return HeldObjectSource(id(g), f"globals of {g.get('__name__', '?')}", g)


@opcode("LOAD_GLOBAL", until=(3, 13))
def load_global(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    if inst.arg & 1:
        frame.push(NULL)
    frame.push(global_value(frame, inst.argval))


@opcode("LOAD_GLOBAL", since=(3, 13))
def load_global_313(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    frame.push(global_value(frame, inst.argval))
    if inst.arg & 1:
        frame.push(NULL)


@opcode("LOAD_NAME")
def load_name(frame: SymbolicFrame, inst: Instruction) -> None:
    raise Unsupported("module- or class-level code (LOAD_NAME)")


@opcode("STORE_GLOBAL")
def store_global(frame: SymbolicFrame, inst: Instruction) -> None:
    # replayed on the real globals dict after the graph ran (see _side_effects)
    frame.tx.side_effects.store_global(frame.f_globals, inst.argval, frame.pop())


@opcode("DELETE_GLOBAL")
def delete_global(frame: SymbolicFrame, inst: Instruction) -> None:
    g = frame.f_globals
    assigned, pending = frame.tx.side_effects.pending_global(g, inst.argval)
    if (assigned and pending is None) or (not assigned and inst.argval not in g):
        raise Unsupported(f"del of the undefined global {inst.argval!r} (NameError)")
    frame.tx.side_effects.store_global(g, inst.argval, None)


@opcode("MAKE_CELL")
def make_cell(frame: SymbolicFrame, inst: Instruction) -> None:
    name = inst.argval
    frame.cells[name] = CellValue(frame.locals.pop(name, None))


@opcode("COPY_FREE_VARS")
def copy_free_vars(frame: SymbolicFrame, inst: Instruction) -> None:
    # The frame was created with its free cells already in place.
    pass


@opcode("LOAD_CLOSURE", until=(3, 13))
def load_closure(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(frame.cells[inst.argval])


@opcode("LOAD_DEREF")
def load_deref(frame: SymbolicFrame, inst: Instruction) -> None:
    cell = frame.cells[inst.argval]
    frame.push(cell.load(frame.tx, inst.argval))  # type: ignore[attr-defined]


@opcode("STORE_DEREF")
def store_deref(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.cells[inst.argval].store(frame.tx, frame.pop())  # type: ignore[attr-defined]


@opcode("DELETE_DEREF")
def delete_deref(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.cells[inst.argval].store(frame.tx, None)  # type: ignore[attr-defined]


@opcode("LOAD_CLASSDEREF", until=(3, 12))
def load_classderef(frame: SymbolicFrame, inst: Instruction) -> None:
    raise Unsupported("class bodies (LOAD_CLASSDEREF)")


@opcode("LOAD_ATTR", until=(3, 12))
def load_attr_311(frame: SymbolicFrame, inst: Instruction) -> None:
    obj = frame.pop()
    frame.push(frame.tx.getattr(obj, inst.argval))


@opcode("LOAD_METHOD", until=(3, 12))
def load_method_311(frame: SymbolicFrame, inst: Instruction) -> None:
    # Always the (NULL, bound attribute) form; CALL treats both forms alike.
    obj = frame.pop()
    frame.push(NULL)
    frame.push(frame.tx.getattr(obj, inst.argval))


def _push_callable(frame: SymbolicFrame, value: Value, with_null: bool, null_first: bool) -> None:
    if with_null and null_first:
        frame.push(NULL)
    frame.push(value)
    if with_null and not null_first:
        frame.push(NULL)


def _attr(frame: SymbolicFrame, inst: Instruction) -> Value:
    return frame.tx.getattr(frame.pop(), inst.argval)


def _super_attr(frame: SymbolicFrame, inst: Instruction) -> Value:
    receiver = frame.pop()
    cls = frame.pop()
    super_fn = frame.pop()
    return frame.tx.getattr(make_super(frame.tx, super_fn, cls, receiver), inst.argval)


@opcode("LOAD_ATTR", since=(3, 12), until=(3, 13))
def load_attr_312(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    _push_callable(frame, _attr(frame, inst), bool(inst.arg & 1), null_first=True)


@opcode("LOAD_ATTR", since=(3, 13))
def load_attr_313(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    _push_callable(frame, _attr(frame, inst), bool(inst.arg & 1), null_first=False)


@opcode("LOAD_SUPER_ATTR", since=(3, 12), until=(3, 13))
def load_super_attr(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    _push_callable(frame, _super_attr(frame, inst), bool(inst.arg & 1), null_first=True)


@opcode("LOAD_SUPER_ATTR", since=(3, 13))
def load_super_attr_313(frame: SymbolicFrame, inst: Instruction) -> None:
    assert inst.arg is not None
    _push_callable(frame, _super_attr(frame, inst), bool(inst.arg & 1), null_first=False)


@opcode("STORE_ATTR")
def store_attr(frame: SymbolicFrame, inst: Instruction) -> None:
    obj = frame.pop()
    value = frame.pop()
    if isinstance(obj, NewObjectValue) and obj.cls.__setattr__ is not object.__setattr__:
        # ``obj.name = value`` goes through the class's own __setattr__ (inlined); the
        # object's setattr is the plain store (``object.__setattr__``)
        hook = frame.tx.getattr(obj, "__setattr__")
        frame.tx.call(hook, [ConstantValue(inst.argval), value], {})
        return
    obj.setattr(frame.tx, inst.argval, value)


@opcode("DELETE_ATTR")
def delete_attr(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.pop().delattr(frame.tx, inst.argval)


@opcode("IMPORT_NAME")
def import_name(frame: SymbolicFrame, inst: Instruction) -> None:
    fromlist = frame.pop().as_constant()
    level = frame.pop().as_constant()
    name = inst.argval
    if level:
        name = _absolute_module_name(frame.f_globals, name, level)
    if name not in sys.modules:
        raise Unsupported(f"importing {name!r} for the first time inside the compiled function")
    module = sys.modules[name]
    for item in fromlist or ():
        # ``from pkg import sub`` imports a submodule that is not yet an attribute: only a
        # module already imported (and so already an attribute) is a plain lookup
        if item != "*" and not hasattr(module, item) and f"{name}.{item}" not in sys.modules:
            raise Unsupported(f"'from {name} import {item}' imports a module for the first time")
    if not fromlist:
        module = sys.modules[name.partition(".")[0]]
    frame.push(frame.tx.wrap_trusted(module))


def _absolute_module_name(f_globals: dict[str, Any], name: str, level: int) -> str:
    """The module a relative import names, resolved the way ``__import__`` does."""
    package = f_globals.get("__package__")
    spec = f_globals.get("__spec__")
    if package is None:
        if spec is not None:
            package = spec.parent
        else:
            module_name = f_globals.get("__name__", "")
            package = module_name if "__path__" in f_globals else module_name.rpartition(".")[0]
    if not isinstance(package, str) or not package:
        raise Unsupported("a relative import in a function that belongs to no package")
    parts = package.rsplit(".", level - 1)
    if len(parts) < level:
        raise Unsupported("a relative import beyond the top-level package")
    base = parts[0]
    return f"{base}.{name}" if name else base


@opcode("IMPORT_FROM")
def import_from(frame: SymbolicFrame, inst: Instruction) -> None:
    module = frame.peek()
    frame.push(frame.tx.getattr(module, inst.argval))


@opcode("LOAD_ASSERTION_ERROR")
def load_assertion_error(frame: SymbolicFrame, inst: Instruction) -> None:
    frame.push(frame.tx.wrap_trusted(AssertionError))  # (the builtin class, as LOAD_GLOBAL gives)


@opcode("LOAD_BUILD_CLASS")
def load_build_class(frame: SymbolicFrame, inst: Instruction) -> None:
    raise Unsupported("a class statement inside the compiled function")
