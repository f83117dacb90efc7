"""List comprehensions run by Python itself at trace time, where running them is exactly
what the program would do: ``[2**e + i for e in range(60, 200) for i in range(-40, 40)]``.

Interpreting such a comprehension costs thousands of times what running it costs, and a long
one meets the frame budget (:mod:`.budget`) though it computes nothing but constants. On
Python 3.11 a comprehension is a function of its own (``<listcomp>``), called with the
iterator of its outermost loop: when that function is *pure* and its input known, the trace
calls a real function of the same code on a real iterator of the same items, and the list it
returns is the comprehension's value.

Pure, checked on the bytecode and on the input, before anything runs:

* every instruction is one of a fixed set that only moves values, loops, branches, builds
  tuples and the list, and applies operators (no attribute, no item store, no closure cell,
  no import, no function made, no yield);
* every global it reads is a builtin of a fixed set of pure functions (``range``, ``abs``,
  ``min``, ...), not shadowed by a global of the function's module (guarded, as any read of
  a builtin is) nor assigned in the trace, and the module's builtins are Python's own;
* the input is a range iterator, or an iterator over known values, whose items (like every
  constant of the code) are numbers, strings, bytes, None or tuples of them: values on
  which operators and those builtins run only CPython's own code, never the user's.

Then the run has no effect but its result (each item is built from the input and the
code's constants by builtin operations), and its result, made of the same kinds of value,
is a list of constants. A run that raises is dropped: the comprehension is interpreted as
usual (which raises the same way, with the trace's exception model). The traced iterator is
left exhausted, as the comprehension leaves it.
"""

from __future__ import annotations

import builtins
import types
from typing import Any

from ..guards.sources import ContainsSource, HeldObjectSource
from ..values.base import Context, ListIteratorValue, RangeIteratorValue, Value
from ..values.containers import ListValue
from ..values.functions import FunctionValue
from .instructions import decode

__all__ = ["run_pure_comprehension"]

_PURE_OPCODES = frozenset(
    {
        "RESUME",
        "NOP",
        "BUILD_LIST",
        "BUILD_TUPLE",
        "LIST_APPEND",
        "LOAD_FAST",
        "STORE_FAST",
        "LOAD_CONST",
        "GET_ITER",
        "FOR_ITER",
        "JUMP_FORWARD",
        "JUMP_BACKWARD",
        "POP_JUMP_FORWARD_IF_FALSE",
        "POP_JUMP_FORWARD_IF_TRUE",
        "POP_JUMP_BACKWARD_IF_FALSE",
        "POP_JUMP_BACKWARD_IF_TRUE",
        "POP_JUMP_FORWARD_IF_NONE",
        "POP_JUMP_FORWARD_IF_NOT_NONE",
        "BINARY_OP",
        "COMPARE_OP",
        "IS_OP",
        "CONTAINS_OP",
        "UNARY_NEGATIVE",
        "UNARY_POSITIVE",
        "UNARY_NOT",
        "UNARY_INVERT",
        "UNPACK_SEQUENCE",
        "POP_TOP",
        "COPY",
        "SWAP",
        "LOAD_GLOBAL",
        "PRECALL",
        "CALL",
        "RETURN_VALUE",
    }
)
#: builtins that, on the values allowed here, run CPython's code only and return such values
_PURE_BUILTINS = frozenset(
    {"range", "abs", "len", "min", "max", "divmod", "pow", "round", "int", "float", "str"}
)
_ORIGINAL_BUILTINS = {name: builtins.__dict__[name] for name in _PURE_BUILTINS}
_PLAIN = (int, float, complex, bool, str, bytes, type(None))


def _plain(obj: Any) -> bool:
    if type(obj) is tuple:
        return all(_plain(item) for item in obj)
    return type(obj) in _PLAIN


def _pure_code(code: types.CodeType) -> bool:
    if code.co_name != "<listcomp>" or code.co_freevars or code.co_cellvars:
        return False
    if code.co_argcount != 1 or code.co_flags & (0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200):
        return False
    if not all(_plain(c) for c in code.co_consts):
        return False
    return all(ins.opname in _PURE_OPCODES for ins in decode(code))


def _input_items(iterator: Value) -> Any:
    """A real iterator over what ``iterator`` still yields, or None where it is not known to
    yield only plain values."""
    if isinstance(iterator, RangeIteratorValue):
        return iter(iterator.rest)
    if isinstance(iterator, ListIteratorValue) and iterator.kind is None:
        items = iterator.remaining() or []
        if not all(v.is_constant() for v in items):
            return None
        values = [v.as_constant() for v in items]
        return iter(values) if all(_plain(v) for v in values) else None
    return None


def _exhaust(iterator: Value) -> None:
    if isinstance(iterator, RangeIteratorValue):
        iterator.rest = iterator.rest[len(iterator.rest) :]
    elif isinstance(iterator, ListIteratorValue):
        iterator.index = len(iterator.items)


def _globals_pure(tx: Context, fn: FunctionValue) -> bool:
    """Every global the code reads is a pure builtin, guarded as not shadowed."""
    g = fn.f_globals
    module_builtins = g.get("__builtins__")
    if module_builtins is not builtins and module_builtins is not builtins.__dict__:
        return False
    names = {ins.argval for ins in decode(fn.code) if ins.opname == "LOAD_GLOBAL"}
    for name in names:
        if name not in _PURE_BUILTINS or name in g:
            return False
        if builtins.__dict__.get(name) is not _ORIGINAL_BUILTINS[name]:
            return False  # (replaced by the program)
        assigned, _ = tx.side_effects.pending_global(g, name)  # type: ignore[attr-defined]
        if assigned:
            return False
    for name in names:
        held = HeldObjectSource(id(g), f"globals of {g.get('__name__', '?')}", g)
        tx.guard_false(ContainsSource(fn.globals_source or held, name))
    return True


def run_pure_comprehension(tx: Context, fn: FunctionValue, args: list[Value]) -> Value | None:
    """The list ``fn`` (a comprehension's function) makes of ``args``, run for real where it
    is pure (see the module's docstring); None where it is to be interpreted."""
    code = fn.code
    if len(args) != 1 or not _pure_code(code):
        return None
    items = _input_items(args[0])
    if items is None or not _globals_pure(tx, fn):
        return None
    real = types.FunctionType(code, fn.f_globals)
    try:
        result = real(items)
    except Exception:  # (interpreted instead: the trace raises it as Python does)
        return None
    if type(result) is not list or not all(_plain(v) for v in result):
        return None
    _exhaust(args[0])
    return ListValue([tx.wrap_trusted(v) for v in result])
