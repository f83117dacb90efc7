"""Python's attribute lookup on classes, as the value model needs it.

:func:`class_attribute` answers ``instance.name`` / ``cls.name`` for a name that a class in
the MRO defines: functions become bound methods, static and class methods unwrap, properties
run their getter (inlined), builtin method descriptors become builtins. Every fact the answer
relies on is guarded: the defining class's dict entry is read through its source, and each
class earlier in the MRO is guarded not to define the name, so a later definition there
recompiles instead of being missed.
"""

from __future__ import annotations

import functools
import itertools
import types
from collections.abc import Iterable
from typing import Any

from sapwood_graph import AttrSource, ItemSource, Source

from ..errors import Unsupported
from ..guards.sources import ContainsSource, HeldObjectSource
from .base import BuiltinValue, ConstantValue, Context, Value
from .functions import BoundMethodValue
from .random_generators import is_generator_primitive

__all__ = [
    "class_attribute",
    "class_dict_source",
    "guard_not_defined",
    "has_python_special",
    "held",
    "indexes_in_python",
    "is_cached_property",
    "is_data_descriptor",
    "is_slot",
    "is_slot_name",
    "is_tensor_getter",
    "lookup_mro",
    "plain_instance_dict",
    "python_getattr_hook",
]


_MISSING = object()


def lookup_mro(cls: type, name: str) -> tuple[type | None, Any]:
    """The class in ``cls.__mro__`` defining ``name`` and the raw attribute, or (None, _MISSING)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass, klass.__dict__[name]
    return None, _MISSING


def has_python_special(cls: type, name: str) -> bool:
    """Whether ``cls``'s lookup of the special method ``name`` finds a Python function."""
    return isinstance(lookup_mro(cls, name)[1], types.FunctionType)


def indexes_in_python(value: Value) -> bool:
    """Whether ``operator.index(value)``, of a value that is no constant, runs a Python
    ``__index__`` of the user's (an int, a subclass too, is taken as it is)."""
    if value.is_constant():
        return False
    try:
        kind = value.python_type()
    except Unsupported:
        return False
    return not issubclass(kind, int) and has_python_special(kind, "__index__")


def held(obj: Any, label: str) -> HeldObjectSource:
    return HeldObjectSource(id(obj), label, obj)


def class_dict_source(klass: type, name: str) -> Source:
    return ItemSource(AttrSource(held(klass, klass.__qualname__), "__dict__"), name)


def is_data_descriptor(attr: Any) -> bool:
    t = type(attr)
    return hasattr(t, "__get__") and (hasattr(t, "__set__") or hasattr(t, "__delete__"))


def is_slot(klass: type, raw: Any) -> bool:
    """Whether ``raw``, found on ``klass``, is a slot a Python class declared (``__slots__``):
    the instance holds its value as it would an attribute of its ``__dict__``."""
    return (
        type(raw) is types.MemberDescriptorType
        and "__slots__" in klass.__dict__
        and raw.__objclass__ is klass
    )


def is_cached_property(raw: Any) -> bool:
    """Whether ``raw`` is a ``functools.cached_property`` (of any copy of the module: a
    test's ``import_fresh_module('functools')`` makes another class, with the same code)."""
    kind = type(raw)
    return kind is functools.cached_property or (
        kind.__name__ == "cached_property"
        and kind.__module__ == "functools"
        and getattr(kind.__get__, "__code__", None) is not None
        and kind.__get__.__code__.co_code == functools.cached_property.__get__.__code__.co_code
    )


def is_slot_name(cls: type, name: str) -> bool:
    """Whether ``name`` is a slot of a Python class of ``cls``'s MRO."""
    klass, raw = lookup_mro(cls, name)
    return klass is not None and is_slot(klass, raw)


def plain_instance_dict(cls: type) -> bool:
    """Whether instances of ``cls`` have the ``__dict__`` a Python class gives them."""
    klass, raw = lookup_mro(cls, "__dict__")
    return (
        bool(cls.__dictoffset__)
        and klass is not None
        and klass.__module__ != "builtins"
        and type(raw) is types.GetSetDescriptorType
    )


def class_attribute(tx: Context, cls: type, name: str, receiver: Value | None) -> Value | None:
    """The value of class attribute ``name`` seen through an instance (``receiver``) or the
    class itself (``receiver is None``); ``None`` if the class has no such attribute."""
    if name in tx.side_effects.class_attr_names:
        written = _written_class_attribute(tx, cls, name)
        if written is not None:
            return written
    klass, raw = lookup_mro(cls, name)
    if klass is None:
        return None
    # a class earlier in the MRO that later defined `name` would take precedence
    guard_not_defined(tx, itertools.takewhile(lambda k: k is not klass, cls.__mro__), name)
    source = class_dict_source(klass, name)
    if isinstance(raw, staticmethod):
        return tx.wrap(raw.__func__, AttrSource(source, "__func__"))
    if isinstance(raw, classmethod):
        fn = tx.wrap(raw.__func__, AttrSource(source, "__func__"))
        return BoundMethodValue(fn, tx.wrap(cls, held(cls, cls.__qualname__)))
    if isinstance(raw, types.FunctionType):
        fn = tx.wrap(raw, source)
        return fn if receiver is None else BoundMethodValue(fn, receiver)
    if isinstance(raw, property):
        if receiver is None:
            return tx.constant_or_wrap(raw)
        if raw.fget is None:
            raise Unsupported(f"reading write-only property {name!r}")
        fget = tx.wrap(raw.fget, AttrSource(source, "fget"))
        return tx.call(fget, [receiver], {})
    if isinstance(raw, types.ClassMethodDescriptorType):
        # a class method of a builtin base (``object.__init_subclass__``, ``dict.fromkeys``):
        # bound to the class, a new bound method on each read, as in Python
        return BuiltinValue(raw.__get__(None, cls))
    if receiver is None and is_cached_property(raw):
        return tx.wrap(raw, source)  # (its __get__ gives itself for the class)
    if receiver is not None and raw is object.__reduce_ex__:
        # (modelled for plain objects: what ``copy`` asks; see pymodel.copying)
        return BoundMethodValue(BuiltinValue(raw), receiver)
    if receiver is None and is_tensor_getter(raw):
        return ConstantValue(raw)  # (``torch.Tensor.ndim``: read through the class, itself)
    if hasattr(type(raw), "__get__") and not isinstance(raw, type):
        # builtin method descriptors of builtin bases (e.g. object.__init__), slots, ...
        if receiver is None and isinstance(
            raw, (types.WrapperDescriptorType, types.MethodDescriptorType)
        ):
            return BuiltinValue(raw)
        if receiver is not None and is_generator_primitive(raw):
            return BoundMethodValue(BuiltinValue(raw), receiver)  # (``rng.random``)
        raise Unsupported(f"the descriptor {name!r} of {cls.__qualname__} ({type(raw).__name__})")
    return tx.wrap(raw, source)


def is_tensor_getter(raw: Any) -> bool:
    """A getter of torch's tensor class (``TensorBase.ndim``, the descriptor itself), the
    calls of which torch dispatches to ``__torch_function__``."""
    if type(raw) is not types.GetSetDescriptorType:
        return False
    owner = raw.__objclass__
    return owner.__module__ == "torch._C" and owner.__name__ == "TensorBase"


def guard_not_defined(tx: Context, classes: Iterable[type], name: str) -> None:
    """Guard that none of ``classes`` defines ``name`` (a later definition there would take
    precedence over what the trace found further along the MRO)."""
    for klass in classes:
        tx.guard_false(
            ContainsSource(AttrSource(held(klass, klass.__qualname__), "__dict__"), name)
        )


def _written_class_attribute(tx: Context, cls: type, name: str) -> Value | None:
    """The value the trace assigned to ``name`` of a class in ``cls``'s MRO (a constant, see
    :meth:`ClassValue.setattr`), unless a class before it defines the name."""
    for klass in cls.__mro__:
        written = tx.side_effects.pending_attr(klass, name)
        if written is not None:
            return written
        if name in klass.__dict__:
            return None
    return None


def python_getattr_hook(tx: Context, cls: type, receiver: Value, name: str) -> Value | None:
    """``receiver.__getattr__(name)`` inlined, where ``cls`` defines ``__getattr__`` in Python
    (its AttributeError is "missing", as for any attribute); None where it does not."""
    _, hook = lookup_mro(cls, "__getattr__")
    if not isinstance(hook, types.FunctionType):
        return None
    method = class_attribute(tx, cls, "__getattr__", receiver)
    assert method is not None
    return tx.call(method, [ConstantValue(name)], {})
