"""Copying plain objects: ``copy.deepcopy`` and ``object.__reduce_ex__``.

``copy.copy`` is Python and is traced like any other code; for an instance of a user class
it calls ``x.__reduce_ex__(4)`` (C code, modelled here) and makes the copy from the answer:
``copyreg.__newobj__`` (``cls.__new__(cls)``), then ``y.__dict__.update(state)``.

``copy.deepcopy`` is modelled as a whole (:func:`_deepcopy`): its memo is keyed by ``id()``
of every object it meets, constants and tuples included, which the trace cannot hash
(``id()`` of a value is no number here). The model walks the value as ``copy.deepcopy``
does — atomic constants, functions and classes are themselves; lists, dicts and tuples are
copied item by item (a tuple whose items all come back the same is itself); a plain object
becomes ``cls.__new__(cls)`` with its ``__dict__`` deep-copied and then copied in — with a
memo keyed by the trace's identity of values, so shared and cyclic references come out
shared and cyclic. Objects from the inputs the memo tells apart are guarded to be distinct
objects on later calls. Anything else (a tensor, a module, a set, a class with its own
copying or pickling hooks, a memo passed in) runs ``copy.py``'s own code, traced like any
other (which may break the graph there).

The plain answer of ``object.__reduce_ex__`` is ``(copyreg.__newobj__, (cls,), state, None,
None)`` with ``state`` the instance ``__dict__`` itself (``None`` when it is empty), given:

* protocol 2 or more (``copy`` asks 4);
* a Python class whose only builtin base is ``object``, with no ``__slots__`` anywhere in
  its MRO, that defines none of ``__reduce__``, ``__reduce_ex__``, ``__getstate__``,
  ``__setstate__``, ``__getnewargs__``, ``__getnewargs_ex__``, ``__getattr__``,
  ``__getattribute__``, ``__copy__``, ``__deepcopy__``, nor its own ``__new__``, and that
  ``copyreg``/``copy``'s dispatch tables do not name (all guarded);
* for an object from the inputs, no attribute written by the trace so far (the state is
  the real ``__dict__``, read through its source; its length is guarded, which decides
  ``None``).

Like CPython, the first answer for a class caches its slot names on it (``copyreg``'s
``__slotnames__``, an empty list here).
"""

from __future__ import annotations

import copy
import copyreg
from typing import Any

from sapwood_graph import AttrSource, GuardKind, Source

from ..errors import TracedException, Unsupported
from ..guards.sources import ContainsSource, DistinctIdsSource
from ..values.attributes import held
from ..values.base import BuiltinValue, ConstantValue, Context, Value
from ..values.containers import DictValue, ListValue, TupleValue
from ..values.functions import NestedFunctionValue, UserFunctionValue
from ..values.objects import ClassValue, NewObjectValue, ObjectValue
from .builtins import handles
from .construct import is_plain_python_class

__all__: list[str] = []

#: what a class must not define for the plain answer (its own reduction, state, copy hooks,
#: attribute lookup, construction)
_OVERRIDES = (
    "__reduce__",
    "__reduce_ex__",
    "__getstate__",
    "__setstate__",
    "__getnewargs__",
    "__getnewargs_ex__",
    "__slots__",
    "__getattr__",
    "__getattribute__",
    "__copy__",
    "__deepcopy__",
    "__new__",
)


@handles(object.__reduce_ex__)
def _object_reduce_ex(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``object.__reduce_ex__(obj, protocol)`` for a plain object (see the module)."""
    if len(args) != 2 or kwargs or not args[1].is_constant():
        raise Unsupported("object.__reduce_ex__ with these arguments")
    obj, protocol = args[0], args[1].as_constant()
    if type(protocol) is not int or protocol < 2:
        raise Unsupported(f"object.__reduce_ex__ with protocol {protocol!r}")
    if not isinstance(obj, (NewObjectValue, ObjectValue)):
        raise Unsupported(f"object.__reduce_ex__ of {obj.describe()}")
    cls = obj.python_type()
    if not _plain_reduction(tx, cls):
        raise Unsupported(f"object.__reduce_ex__ of {obj.describe()} (its class reduces itself)")
    state = _state(tx, obj)
    newobj = tx.wrap_trusted(copyreg.__newobj__)
    klass = tx.wrap(cls, held(cls, cls.__qualname__))
    none = ConstantValue(None)
    return TupleValue([newobj, TupleValue([klass]), state, none, none])


def _plain_reduction(tx: Context, cls: type) -> bool:
    """Whether ``cls`` reduces, copies and is made the plain way (guarded where it is)."""
    if not is_plain_python_class(cls) or type(cls) is not type:
        return False
    for table, label in (
        (copyreg.dispatch_table, "copyreg.dispatch_table"),
        (copy._deepcopy_dispatch, "copy._deepcopy_dispatch"),  # type: ignore[attr-defined]
        (copy._copy_dispatch, "copy._copy_dispatch"),  # type: ignore[attr-defined]
    ):
        if cls in table:
            return False
        tx.guard_false(ContainsSource(held(table, label), cls))
    for klass in cls.__mro__:
        if klass is object:
            continue
        if any(name in klass.__dict__ for name in _OVERRIDES):
            return False
        namespace = AttrSource(held(klass, klass.__qualname__), "__dict__")
        for name in _OVERRIDES:
            tx.guard_false(ContainsSource(namespace, name))
    # (as CPython does on the first reduction of a class: computes and caches the names)
    return copyreg._slotnames(cls) == []  # type: ignore[attr-defined]


def _state(tx: Context, obj: NewObjectValue | ObjectValue) -> Value:
    """The instance ``__dict__`` itself, or ``None`` where it is empty."""
    if isinstance(obj, NewObjectValue):
        state = obj.getattr(tx, "__dict__")
        if not isinstance(state, DictValue):
            raise Unsupported(f"the __dict__ of {obj.describe()}")
        return state if state.entries else ConstantValue(None)
    real: Any = obj.obj
    source = obj.source
    assert source is not None
    if any(w.obj is real for w in tx.side_effects.writes):  # type: ignore[attr-defined]
        raise Unsupported(f"the __dict__ of {obj.describe()} after attributes written")
    namespace = getattr(real, "__dict__", None)
    if type(namespace) is not dict:
        raise Unsupported(f"the __dict__ of {obj.describe()}")
    dict_source = AttrSource(source, "__dict__")
    tx.guard_len(dict_source, len(namespace))
    if not namespace:
        return ConstantValue(None)
    state = tx.wrap(namespace, dict_source)
    if not isinstance(state, DictValue):
        raise Unsupported(f"the __dict__ of {obj.describe()}")
    return state


#: the value kinds ``copy.deepcopy`` returns as themselves (its "atomic" types)
def _atomic(kind: type) -> bool:
    return copy._deepcopy_dispatch.get(kind) is copy._deepcopy_atomic  # type: ignore[attr-defined]


@handles(copy.deepcopy)
def _deepcopy(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``copy.deepcopy(x)`` (see the module)."""
    if len(args) == 1 and not kwargs:
        copier = _DeepCopier(tx)
        try:
            result = copier.copy(args[0])
        except TracedException:
            raise
        except Unsupported:
            pass
        else:
            if len(copier.sourced) > 1:
                # the objects the memo told apart must stay apart on later calls
                sources = tuple(copier.sourced)
                tx.guard(GuardKind.CONSTANT_MATCH, DistinctIdsSource(sources), len(sources))
            return result
    # what the model does not cover (a memo passed in, a class's own __deepcopy__, ...) runs
    # copy.py's own code, traced as any other: it may break there
    original = UserFunctionValue(copy.deepcopy, held(copy.deepcopy, "copy.deepcopy"))
    return tx.call(original, args, kwargs)


class _DeepCopier:
    """One ``copy.deepcopy`` call: the memo, keyed by the trace's identity of values."""

    def __init__(self, tx: Context) -> None:
        self.tx = tx
        self.memo: dict[Any, Value] = {}
        #: sources of the objects from the inputs the memo holds (told apart by identity)
        self.sourced: dict[Source, None] = {}

    def _remember(self, original: Value, copied: Value) -> None:
        self.memo[self.tx.identity_key(original)] = copied
        if original.source is not None:
            self.sourced[original.source] = None

    def copy(self, value: Value) -> Value:
        tx = self.tx
        if isinstance(value, ConstantValue):
            return self._constant(value)
        kind = value.python_type()
        if isinstance(value, (ClassValue, UserFunctionValue, NestedFunctionValue, BuiltinValue)):
            if _atomic(kind) or (isinstance(value, ClassValue) and issubclass(kind, type)):
                return value
            raise Unsupported(f"copy.deepcopy of {value.describe()}")
        known = self.memo.get(tx.identity_key(value))
        if known is not None:
            return known
        if isinstance(value, TupleValue) and kind is tuple:
            items = [self.copy(item) for item in value.items]
            known = self.memo.get(tx.identity_key(value))  # (reached again through an item)
            if known is not None:
                return known
            if all(a is b for a, b in zip(items, value.items)):
                return value
            if value.source is not None:
                # two sources may reach one tuple as two values: its copy must be one
                raise Unsupported("copy.deepcopy of a tuple of the inputs that holds objects")
            made: Value = TupleValue(items)
            self._remember(value, made)
            return made
        if isinstance(value, ListValue) and kind is list:
            made = ListValue([])
            self._remember(value, made)
            for item in value.items:
                made.items.append(self.copy(item))
            return made
        if isinstance(value, DictValue) and value.cls is dict and value.obj is None:
            made = DictValue({})
            self._remember(value, made)
            for key, item in list(value.entries.values()):
                copied_item = self.copy(item)  # (``y[deepcopy(k)] = deepcopy(v)``: v first)
                made.setitem(tx, self.copy(key), copied_item)
            return made
        if isinstance(value, (NewObjectValue, ObjectValue)) and _plain_reduction(tx, kind):
            made = NewObjectValue(kind)
            self._remember(value, made)
            state = _state(tx, value)
            if isinstance(state, DictValue):
                copied = self.copy(state)
                assert isinstance(copied, DictValue)
                for key, item in list(copied.entries.values()):
                    if not (isinstance(key, ConstantValue) and type(key.value) is str):
                        raise Unsupported(
                            f"copy.deepcopy of {value.describe()} (its __dict__ keys)"
                        )
                    made.set_own(tx, key.value, item)
            return made
        raise Unsupported(f"copy.deepcopy of {value.describe()}")

    def _constant(self, value: ConstantValue) -> Value:
        obj = value.value
        if _atomic(type(obj)):
            return value
        if type(obj) is tuple and all(_atomic(type(item)) for item in obj):
            return value  # (its items come back themselves: the tuple is itself)
        raise Unsupported(f"copy.deepcopy of {value.describe()}")
