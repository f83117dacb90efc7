"""Objects whose class defines ``__getattribute__`` in Python (Hugging Face configs map
attribute aliases in theirs).

``obj.name`` on such an object runs the class's hook, inlined like any other method, so the
guards record what the hook read (the instance ``__dict__``'s entries, class attributes such
as an alias map) instead of re-running the hook on every call. Inside it,
``super().__getattribute__(name)`` and ``object.__getattribute__(obj, name)`` are Python's
generic lookup (:func:`generic_getattr`), which never calls the hook again.

Invariants:

* The instance dict is read through :class:`InstanceDictSource` (past the hook): an entry is
  guarded by its ``ItemSource``, a missing one by ``name not in <dict>``; every class of the
  MRO that could later define the name (a property would take precedence) is guarded not to,
  and a class attribute the instance shadows is guarded to stay of its type (not a
  descriptor).
* ``obj.__dict__`` (as the hook reads it) is :class:`InstanceDictValue`: a read-only view
  that answers ``d.get(k)``, ``d[k]`` and ``k in d`` per key, with the trace's pending
  attribute writes; anything else it refuses (Unsupported).
* Where the hook cannot be inlined (Unsupported: a construct the tracer does not model) and
  the attempt recorded no side effect, the lookup runs for real as before
  (:meth:`ObjectValue.real_getattr`; a C-implemented hook too); a hook that recorded one
  (it counts its calls, say) breaks the graph: the read runs eagerly, as often as in eager.
"""

from __future__ import annotations

import types
from typing import Any

from sapwood_graph import AttrSource, GuardKind, ItemSource

from ..errors import TracedException, Unsupported, forget_handled
from ..guards.sources import ContainsSource, InstanceDictSource
from .attributes import (
    class_attribute,
    class_dict_source,
    held,
    is_data_descriptor,
    lookup_mro,
    plain_instance_dict,
)
from .base import BoundBuiltinMethod, ConstantValue, Context, Value
from .exceptions import ExceptionValue, exception_value, python_error

#: an :class:`~.objects.ObjectValue` (not imported: objects imports this module)
ObjectValue = Any

__all__ = ["InstanceDictValue", "generic_getattr", "python_getattribute"]

#: Py_TPFLAGS_IMMUTABLETYPE: a class whose dict cannot change (``object``)
_IMMUTABLE_TYPE = 1 << 8


def python_hook(cls: type) -> types.FunctionType | None:
    """``cls``'s ``__getattribute__`` where a Python function, else None."""
    _, hook = lookup_mro(cls, "__getattribute__")
    return hook if isinstance(hook, types.FunctionType) else None


def python_getattribute(tx: Context, value: ObjectValue, name: str) -> Value:
    """``value.name`` through its class's own ``__getattribute__`` (then ``__getattr__`` on
    an AttributeError, as Python's attribute slot does)."""
    cls = type(value.obj)
    if python_hook(cls) is None or value.source is None:
        return value.real_getattr(tx, name)
    changes = tx.side_effects.changes
    try:
        method = class_attribute(tx, cls, "__getattribute__", value)
        assert method is not None
        found = tx.call(method, [ConstantValue(name)], {})
        if isinstance(found, InstanceDictValue):
            found = found.whole(tx)  # (``obj.__dict__`` in the traced code: a dict to use)
    except TracedException as raised:
        if tx.side_effects.changes != changes:
            raise _changes_state(cls) from None
        error = exception_value(raised)
        if not (isinstance(error, ExceptionValue) and issubclass(error.cls, AttributeError)):
            raise
        if lookup_mro(cls, "__getattr__")[0] is not None:
            forget_handled(raised)
            return value.custom_getattr(tx, name)
        _guard_undefined(tx, cls, "__getattr__", None)
        raise
    except Unsupported as refused:
        if getattr(refused, "frame_bound", False) or tx.side_effects.changes != changes:
            raise  # (a half-run hook's effects cannot be taken back: a graph break)
        forget_handled(refused)
        return value.real_getattr(tx, name)
    if tx.side_effects.changes != changes:
        raise _changes_state(cls)
    return found


def _changes_state(cls: type) -> Unsupported:
    # (replayed after the graph, the effect would be guarded on as a constant, a count say:
    # a recompile per call)
    return Unsupported(
        f"{cls.__qualname__}.__getattribute__, which changes state on a lookup",
        hint="The attribute is read eagerly (a graph break).",
    )


def _guard_undefined(tx: Context, cls: type, name: str, until: type | None) -> None:
    """Guard that no class of ``cls``'s MRO before ``until`` comes to define ``name``."""
    for klass in cls.__mro__:
        if klass is until:
            return
        if not klass.__flags__ & _IMMUTABLE_TYPE:  # (``object``'s dict cannot change)
            dict_source = AttrSource(held(klass, klass.__qualname__), "__dict__")
            tx.guard_false(ContainsSource(dict_source, name))


def instance_entry(tx: Context, value: ObjectValue, name: str) -> tuple[bool, Value | None]:
    """``(True, v)`` where ``value``'s instance dict holds ``name`` (``v``; the trace's own
    write first), ``(False, None)`` where it does not (guarded to stay so)."""
    pending = tx.side_effects.pending_attr(value.obj, name)
    if pending is not None:
        return True, pending
    inst = object.__getattribute__(value.obj, "__dict__")
    known = tx.known(inst)
    if known is not None:  # the traced code holds the dict itself: it may have changed it
        key = ConstantValue(name)
        return (True, known.getitem(tx, key)) if known.contains(tx, key) else (False, None)
    assert value.source is not None
    source = InstanceDictSource(value.source)
    if name in inst:
        return True, tx.wrap(inst[name], ItemSource(source, name))
    tx.guard_false(ContainsSource(source, name))
    return False, None


def generic_getattr(tx: Context, value: ObjectValue, name: str) -> Value:
    """``object.__getattribute__(obj, name)``: data descriptors of the type (properties
    inlined), the instance dict, then the class's other attributes; never the class's own
    ``__getattribute__`` or ``__getattr__``."""
    obj = value.obj
    cls = type(obj)
    if value.source is None or not plain_instance_dict(cls):
        raise Unsupported(f"object.__getattribute__ of {value.describe()}")
    if name == "__dict__":
        return InstanceDictValue(value)
    if name == "__class__":
        return tx.wrap_trusted(cls)  # (the object's type is guarded)
    klass, raw = lookup_mro(cls, name)
    if klass is not None and is_data_descriptor(raw):
        if not isinstance(raw, property):
            raise Unsupported(f"the descriptor {name!r} of {cls.__qualname__}")
        found = class_attribute(tx, cls, name, value)
        assert found is not None
        return found
    present, item = instance_entry(tx, value, name)
    if present:
        assert item is not None
        _guard_undefined(tx, cls, name, klass)
        if klass is not None:
            # a class attribute the instance shadows: it must not become a data descriptor
            tx.guard(GuardKind.TYPE_MATCH, class_dict_source(klass, name), type(raw))
        return item
    if klass is not None:
        found = class_attribute(tx, cls, name, value)  # (refuses descriptors it cannot model)
        assert found is not None
        return found
    _guard_undefined(tx, cls, name, None)
    raise python_error(AttributeError, f"{cls.__name__!r} object has no attribute {name!r}")


class InstanceDictValue(Value):
    """The instance dict of an object from the inputs, as its class's ``__getattribute__``
    reads it (``super().__getattribute__('__dict__')``): read one key at a time."""

    __slots__ = ("owner",)

    def __init__(self, owner: ObjectValue) -> None:
        assert owner.source is not None
        super().__init__(InstanceDictSource(owner.source))
        self.owner = owner

    def describe(self) -> str:
        return f"the __dict__ of {self.owner.describe()}"

    def python_type(self) -> type:
        return dict

    def whole(self, tx: Context) -> Value:
        """The dict as a dict value (its keys guarded, each value read): for the traced code
        to use as it likes (then :func:`instance_entry` reads it through that value)."""
        if tx.side_effects.wrote_to(self.owner.obj):
            raise Unsupported(f"{self.describe()} after the trace assigned its attributes")
        inst = object.__getattribute__(self.owner.obj, "__dict__")
        assert self.source is not None
        return tx.wrap(inst, self.source)

    def _entry(self, tx: Context, key: Value) -> tuple[bool, Value | None]:
        if not (key.is_constant() and type(key.as_constant()) is str):
            raise Unsupported(f"a key other than a str constant of {self.describe()}")
        return instance_entry(tx, self.owner, key.as_constant())

    def getattr(self, tx: Context, name: str) -> Value:
        if name in ("get", "__getitem__", "__contains__"):
            return BoundBuiltinMethod(self, name)
        raise Unsupported(f"{name!r} of {self.describe()}")

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            present, item = self._entry(tx, args[0])
            if present:
                assert item is not None
                return item
            return args[1] if len(args) == 2 else ConstantValue(None)
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        if name == "__contains__" and len(args) == 1 and not kwargs:
            return ConstantValue(self.contains(tx, args[0]))
        raise Unsupported(f"{name}() of {self.describe()}")

    def getitem(self, tx: Context, key: Value) -> Value:
        present, item = self._entry(tx, key)
        if not present:
            raise python_error(KeyError, key.as_constant())
        assert item is not None
        return item

    def contains(self, tx: Context, item: Value) -> bool:
        return self._entry(tx, item)[0]

    def truth(self, tx: Context) -> bool:
        raise Unsupported(f"the truth value of {self.describe()}")
