"""Object identity in the trace: ``a is b`` and ``id(x)``.

Invariants:

* An identity test is answered from what the trace knows, never guessed: two tensors by
  :func:`~sapwood_tracer.values.tensors.same_tensor` (one value, or torch's fake kernel
  returned the very input), anything else by the interpreter's identity rules
  (constants by value identity, objects from the inputs by the object they were made of,
  values made in the trace by value identity). A test that cannot be answered raises
  :class:`~sapwood_tracer.Unsupported`.
* An answer about two objects from the inputs holds for later calls only where their
  sources relate alike: it is guarded (one alias guard, or a guard that they are distinct)
  unless both objects' identities are guarded already.
* ``id(x)`` is an :class:`ObjectIdValue`: it stands for a number the trace does not know, so
  the only thing it supports is comparison with another ``id()`` (``==``/``!=``), which is an
  identity test of the two objects, or with a number where the object is one from the
  inputs (its identity then guarded) or a class, function or module. Arithmetic, hashing,
  printing or comparing it with another number is refused. As a dict key it stands for its object's identity (see
  :meth:`ObjectIdValue.hash_key`).
"""

from __future__ import annotations

import operator
import types
from typing import Any

from sapwood_graph import GuardKind

from ..errors import Unsupported
from ..guards.sources import DistinctIdsSource
from .base import ConstantValue, Context, Value
from .containers import ListValue, TupleValue
from .dicts import DictValue
from .exceptions import TracebackValue
from .sets import SetValue
from .tensors import TensorValue, same_tensor
from .tuple_identity import tuples_identical

__all__ = [
    "ObjectIdValue",
    "compare_ids",
    "guard_distinct",
    "rebuilt_as_itself",
    "same_input_object",
    "same_object",
]

_ID_HINT = "Compare objects with `is`, or compare id() with another id() only."


def same_object(tx: Context, a: Value, b: Value) -> bool:
    """``a is b``, answered from the trace's knowledge (or refused)."""
    if a is b:
        return True
    if isinstance(a, ConstantValue) and isinstance(b, ConstantValue):
        return a.value is b.value
    if isinstance(a, TensorValue) or isinstance(b, TensorValue):
        if isinstance(a, TensorValue) and isinstance(b, TensorValue):
            return same_tensor(a, b)
        return False
    if isinstance(a, TracebackValue) or isinstance(b, TracebackValue):
        if a.is_constant() or b.is_constant():
            return False  # a traceback is no constant
        # two values may stand for one traceback object (or for two, as it grows)
        raise Unsupported(f"`is` between {a.describe()} and {b.describe()}")
    if _tuple_value(a) and _tuple_value(b):
        known = tuples_identical(a, b)
        if known is not None:
            return known
        # Any other tuple value is rebuilt from its items: whether two are one object (two sources
        # reaching the same tuple, or a tuple and a code constant) is not known here.
        raise Unsupported("`is` between two tuples (their identity is not modelled)")
    ka, kb = tx.identity_key(a), tx.identity_key(b)
    same = same_input_object(tx, a, b, ka, kb)
    if same is not None:
        return same
    if a.is_constant() != b.is_constant():
        if isinstance(a, ConstantValue) or isinstance(b, ConstantValue):
            const = a if isinstance(a, ConstantValue) else b
            other = b if const is a else a
            if other.is_constant():
                return const.as_constant() is other.as_constant()
        return False
    if a.is_constant() and b.is_constant():
        try:
            return a.as_constant() is b.as_constant()
        except Unsupported:
            pass
    return ka == kb


def same_input_object(tx: Context, a: Value, b: Value, ka: Any, kb: Any) -> bool | None:
    """Whether two values made of objects from the inputs (their identity keys ``ka`` and
    ``kb``) are one object, or None when either is not one: the objects answer (a list's
    contents, equal or not, say nothing of its identity), and the answer holds for calls
    where the sources relate alike, which is guarded unless both identities are."""
    if not ka[0] == kb[0] == "__object__":
        return None
    guarded = tx.identity_guarded(a) and tx.identity_guarded(b)
    if ka == kb:
        if not guarded and a is not b and a.source is not None and b.source is not None:
            tx.guard(GuardKind.ALIAS_MATCH, b.source, a.source)
        return True
    if not guarded:
        guard_distinct(tx, a, b)
    return False


def guard_distinct(tx: Context, a: Value, b: Value) -> None:
    """Two objects from the inputs are guarded by what they hold, not who they are (modules,
    plain objects): an answer that they differ holds for calls where they are still two."""
    if a.source is not None and b.source is not None:
        tx.guard(GuardKind.CONSTANT_MATCH, DistinctIdsSource((a.source, b.source)), 2)


def _tuple_value(v: Value) -> bool:
    return isinstance(v, TupleValue) or (isinstance(v, ConstantValue) and type(v.value) is tuple)


def _one_object(obj: Any) -> bool:
    """A constant that is one object wherever the program reaches it (a class, a function,
    a module, a singleton), so ``id()`` of it is a key for that object; an int or a string
    may be one object or several."""
    if obj is None or obj is True or obj is False or obj is Ellipsis or obj is NotImplemented:
        return True
    if isinstance(obj, types.BuiltinFunctionType):  # a module's builtin, not a bound method
        return obj.__self__ is None or isinstance(obj.__self__, types.ModuleType)
    return isinstance(obj, (type, types.FunctionType, types.ModuleType))


def _fresh_container(value: Value) -> bool:
    """A list, dict or set (never a frozenset, which ``frozenset(s)`` may return as ``s``
    itself): an object of its own even when its items are all constants."""
    return (
        isinstance(value, (ListValue, DictValue, SetValue)) and value.python_type() is not frozenset
    )


def rebuilt_as_itself(value: Value) -> bool:
    """Whether ``value``, rebuilt at a graph break, is the object the program has eagerly, so
    that ``id()`` of it taken there is the id eager computes: read from the inputs, a constant
    that is one object wherever the program reaches it (a class, a function, a module,
    ``None``), or a list, dict or set made in the trace (rebuilt once, as the program's own).
    A tuple, frozenset or number made in the trace is not: eagerly it may be another object
    (``frozenset(s)`` is ``s``; ``zip`` reuses its tuple)."""
    if value.source is not None or _fresh_container(value):
        return True
    if isinstance(value, TensorValue) or not value.is_constant():
        return False
    return _one_object(value.as_constant())


class ObjectIdValue(Value):
    """``id(target)``: comparable only with another ``id()``."""

    __slots__ = ("target",)

    def __init__(self, target: Value) -> None:
        super().__init__(None)
        self.target = target

    def describe(self) -> str:
        return f"id() of {self.target.describe()}"

    def python_type(self) -> type:
        return int

    def as_constant(self) -> Any:
        raise Unsupported(
            f"the number {self.describe()} (it is not known while tracing)", hint=_ID_HINT
        )

    def truth(self, tx: Context) -> bool:
        return True  # an id is never 0

    def hash_key(self, tx: Context) -> Any:
        """As a dict key or set member (``memo[id(x)]`` in ``copy.deepcopy``): two ids are one
        key exactly when their objects are one object, as :func:`same_object` decides it. A
        target whose identity the trace cannot tell apart from another's is refused."""
        target = self.target
        if isinstance(target, TensorValue) or _tuple_value(target):
            refused = True
        elif target.is_constant():
            obj = target.as_constant()
            if _one_object(obj):  # a class, function or module, None: the object itself
                return ("__id__", ("__object__", id(obj)))
            refused = not _fresh_container(target)  # (a list of constants is still its own)
        else:
            refused = False
        key = None if refused else tx.identity_key(target)
        # tensors are told apart by their fake tensors, tuples and constants not at all; a
        # value read from the inputs counts only when its key is the real object's (two reads
        # of one input may be two values), a value made in the trace is its own object
        if key is None or (key[0] != "__object__" and target.source is not None):
            raise Unsupported(f"{self.describe()} as a dict key or set member", hint=_ID_HINT)
        # keys of a dict are told apart for the objects of this call only
        tx.pin_identity(target)
        return ("__id__", key)


def _known_id(tx: Context, target: Value) -> int | None:
    """``id(target)`` where the trace may know it: a class, function, module or None, or an
    object from the inputs, whose identity is then guarded (a later call with another
    object traces again); None for a value made in the trace (a new object's id may be
    anything, even a number seen before) or one whose object the trace cannot name."""
    if target.is_constant() and not isinstance(target, TensorValue):
        obj = target.as_constant()
        return id(obj) if _one_object(obj) else None
    if target.source is None or isinstance(target, TensorValue) or _tuple_value(target):
        return None
    key = tx.identity_key(target)
    if key is None or key[0] != "__object__":
        return None
    tx.pin_identity(target)  # (the entry holds the object: its id is not reused meanwhile)
    return key[1]  # type: ignore[no-any-return]


def compare_ids(tx: Context, op: Any, a: Value, b: Value) -> Value | None:
    """``a == b`` or ``a != b`` where either side is an ``id()``; None if neither is."""
    if not (isinstance(a, ObjectIdValue) or isinstance(b, ObjectIdValue)):
        return None
    if op not in (operator.eq, operator.ne):
        raise Unsupported(f"ordering {a.describe()} and {b.describe()}", hint=_ID_HINT)
    if not (isinstance(a, ObjectIdValue) and isinstance(b, ObjectIdValue)):
        ident, number = (a, b) if isinstance(a, ObjectIdValue) else (b, a)
        known = _known_id(tx, ident.target)  # type: ignore[union-attr]
        if known is None or not number.is_constant() or type(number.as_constant()) is not int:
            raise Unsupported(f"comparing {a.describe()} with {b.describe()}", hint=_ID_HINT)
        same = known == number.as_constant()
        return ConstantValue(same if op is operator.eq else not same)
    same = same_object(tx, a.target, b.target)
    return ConstantValue(same if op is operator.eq else not same)
