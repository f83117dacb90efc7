"""Making values from real Python objects, and the guards that make using them sound.

:func:`wrap` is called with an object found at a source (an argument, a global, an
attribute, ...). It picks the value kind and records what the trace will rely on:

===========================  =====================================================
object                       guards
===========================  =====================================================
tensor                       TENSOR_MATCH (type, dtype, device, shape, strides,
                             requires_grad, dispatch keys) via the graph input
int/float/bool/str/None/...  TYPE_MATCH and CONSTANT_MATCH
tuple/list                   TYPE_MATCH and len; each item through ItemSource
dict                         TYPE_MATCH and the keys in order; values by key
ModelOutput                  TYPE_MATCH, the keys (entries agreeing with the
                             attributes); each field through its attribute
nn.Module                    TYPE_MATCH: guarded by structure, not identity (below)
function, class, module,     ID_MATCH (the cache entry keeps the object alive)
builtin
other objects                TYPE_MATCH; attributes read later are guarded then
===========================  =====================================================

An ``nn.Module`` is guarded like any other object: its class, then whatever the trace read
of it, each read guarded through its source (the ``training`` flag and other attributes by
value, the hook dicts, submodules by class in turn, parameters and buffers as graph inputs
with their tensor guards: shape, dtype, requires_grad, ...). So one trace serves every
instance of a class with the same structure: blocks of one model, a deep copy. Identity
between two modules is guarded where the trace relied on it (an ALIAS_MATCH where two
sources reached one module, a distinctness guard where ``is`` found two different ones).

:func:`wrap_trusted` makes values for objects with no source (constants in code, attributes
of library namespaces such as ``torch`` or ``math``); it records no guard.

Invariant: one source gives one value per trace (memoised), and one tensor object gives one
graph input, however many sources reach it (later sources get an ALIAS_MATCH guard); so
does one list, dict, set, plain object, module, live iterator or partial
(:data:`SHARED_VALUES`), so a change through one source is seen through the others. Sources
that held two such objects get two values, guarded distinct where the trace relied on it
(:mod:`.aliasing`).
"""

from __future__ import annotations

import _thread
import collections
import dataclasses
import enum
import functools
import os
import sys
import types
import weakref
from typing import Any

import torch

from sapwood_graph import AttrSource, GuardKind, ItemSource, Source

from ..errors import Unsupported
from ..guards.sources import (
    HeldObjectSource,
    KeysSource,
    LenSource,
    ReaderSource,
    ViewedDictSource,
    dict_of_view,
)
from ..pymodel.builtins import is_modelled_builtin
from ..pymodel.dtensor_calls import is_placement
from ..pymodel.overriding_tensors import OverridingTensorValue, overriding_class, overriding_input
from ..pymodel.torch_functions import is_modelled_torch_function
from ..values.base import BoundBuiltinMethod, BuiltinValue, ConstantValue, Value, is_constant_type
from ..values.containers import DictValue, DictViewValue, ListValue, NamedTupleValue, TupleValue
from ..values.contexts import CONTEXT_CLASSES, ContextClassValue
from ..values.default_dicts import DefaultDictValue
from ..values.dict_storage_objects import DictStorageObjectValue
from ..values.enums import EnumClassValue, EnumMemberValue
from ..values.functions import (
    BoundMethodValue,
    ConstantResultFunctionValue,
    UserFunctionValue,
    marked_constant_result,
)
from ..values.generators import GeneratorValue
from ..values.iterators import LiveIteratorValue
from ..values.modules import ModuleValue
from ..values.numpy_functions import NumpyFunctionValue, is_numpy_api
from ..values.objects import (
    ClassValue,
    ObjectValue,
    PyModuleValue,
)
from ..values.ordered_dataclasses import OrderedDataclassValue, is_model_output_class, stored_keys
from ..values.partials import PartialValue, c_partial_base
from ..values.random_generators import is_generator_primitive
from ..values.runtime_objects import EnvironValue, LockValue, WeakRefValue
from ..values.set_subclasses import SetSubclassValue, plain_set_subclass
from ..values.sets import SetValue, function_member
from ..values.tensors import TensorValue, TorchFunctionValue
from .real_generators import wrap_repositionable_generator
from .wrapping_session import WrappingSession

__all__ = ["SHARED_VALUES", "WrappingSession", "wrap", "wrap_trusted"]


def wrap(tx: WrappingSession, obj: Any, source: Source, guard_identity_of: Any = None) -> Value:
    known = tx.by_source.get(source)
    if known is not None:
        return known
    # One object reached through several sources is one value: later sources get an alias
    # guard, and what is read from the object is read (and guarded) once, so a mutation
    # through one source is seen through the others.
    seen = tx.by_object.get(id(obj))
    if (
        seen is not None
        and seen[0] is obj
        and isinstance(seen[1], SHARED_VALUES)
        and seen[1].source is not None
    ):
        tx.guard(GuardKind.ALIAS_MATCH, source, seen[1].source)
        tx.by_source[source] = seen[1]
        return seen[1]
    value = _make(tx, obj, source)
    tx.by_source[source] = value
    if isinstance(value, SHARED_VALUES):
        tx.by_object[id(obj)] = (obj, value)
    if value.source is source and not isinstance(value, _NO_IDENTITY):
        # (a value made for another source, as a compiled function's original, is not obj)
        tx.object_of.setdefault(id(value), obj)
    return value


_VIEW_KINDS = {type({}.keys()): "keys", type({}.values()): "values", type({}.items()): "items"}

#: Kinds of values that stand for one object of the inputs, however many sources reach it.
SHARED_VALUES = (
    LockValue,
    ModuleValue,
    ObjectValue,
    ListValue,
    DictValue,
    SetValue,
    LiveIteratorValue,
    PartialValue,
    GeneratorValue,
    OrderedDataclassValue,
    OverridingTensorValue,
)

#: Kinds of values whose identity the trace does not take from the object they were made of:
#: constants by value, tensors by their graph input, tuples not at all.
_NO_IDENTITY = (ConstantValue, TupleValue, TensorValue)


def _is_plain_object(obj: Any) -> bool:
    cls = type(obj)
    return (
        cls.__module__ != "builtins"
        and not isinstance(
            obj, (type, types.ModuleType, types.FunctionType, torch.Tensor, enum.Enum)
        )
        and _has_instance_dict(cls)
    )


def _has_instance_dict(cls: type) -> bool:
    """Whether instances of ``cls`` have a ``__dict__``, asked of the class: reading
    ``obj.__dict__`` makes the dict of some objects, and a ``functools.partial`` that has one
    is no longer flattened by ``partial(p, ...)``."""
    return bool(getattr(cls, "__dictoffset__", 0))


def _id_match(tx: WrappingSession, source: Source, obj: Any) -> None:
    tx.hold(obj)
    tx.guard(GuardKind.ID_MATCH, source, id(obj))


def _type_match(tx: WrappingSession, source: Source, obj: Any) -> None:
    tx.guard(GuardKind.TYPE_MATCH, source, type(obj))


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def _make(tx: WrappingSession, obj: Any, source: Source) -> Value:
    cls = type(obj)
    if isinstance(obj, torch.Tensor):
        if overriding_class(cls):  # (a class with a __torch_function__ that runs)
            return overriding_input(tx, obj, source)
        return tx.tensor_input(obj, source)
    if isinstance(obj, torch.nn.Module):
        _type_match(tx, source, obj)
        return ModuleValue(obj, source)
    if is_placement(obj):  # (a DTensor placement: an immutable value, guarded by equality)
        _type_match(tx, source, obj)
        tx.guard(GuardKind.CONSTANT_MATCH, source, obj)
        return ConstantValue(obj, source)
    if cls in (tuple, list) or _is_namedtuple(obj) or cls is torch.Size:
        if cls is torch.Size or (cls is tuple and is_constant_type(obj)):
            _type_match(tx, source, obj)
            tx.guard(GuardKind.CONSTANT_MATCH, source, obj)
            if cls is torch.Size:
                return ConstantValue(obj, source)
            return TupleValue([ConstantValue(v) for v in obj], source)
        _type_match(tx, source, obj)
        tx.guard(GuardKind.CONSTANT_MATCH, LenSource(source), len(obj))
        items = [wrap(tx, v, ItemSource(source, i)) for i, v in enumerate(obj)]
        if cls is list:
            return ListValue(items, source)
        if cls is tuple:
            return TupleValue(items, source)
        return NamedTupleValue(cls, items, source)
    if hasattr(cls, "n_fields") and isinstance(obj, tuple):  # torch.return_types structseq
        _type_match(tx, source, obj)
        items = [wrap(tx, v, ItemSource(source, i)) for i, v in enumerate(obj)]
        return NamedTupleValue(cls, items, source)
    if is_model_output_class(cls):
        keys = stored_keys(obj)
        try:
            if keys is not None:  # (else an object: its methods are inlined)
                return _model_output(tx, obj, source, keys)
        except Unsupported:  # a field the trace cannot hold: an object, its fields read lazily
            pass
    if cls is collections.defaultdict:
        return _default_dict(tx, obj, source)
    if cls in (dict, collections.OrderedDict) or _plain_dict_subclass(cls):
        _type_match(tx, source, obj)
        out = DictValue(
            {}, source, cls=cls, obj=obj if cls not in (dict, collections.OrderedDict) else None
        )
        _fill_entries(tx, obj, source, out.entries)
        return out
    if cls in _VIEW_KINDS:
        # a view of a dict (not a subclass's, whose order or items may be its own): a view
        # of the dict it shows, which is wrapped as any other dict (one value per object)
        _type_match(tx, source, obj)
        owner = wrap(tx, dict_of_view(obj), ViewedDictSource(source))
        if not isinstance(owner, DictValue) or owner.cls is not dict:
            raise Unsupported(f"a {cls.__name__} of {owner.describe()} as an input")
        view = DictViewValue(owner, _VIEW_KINDS[cls], TupleValue)
        view.source = source
        return view
    if cls in (set, frozenset):
        members = tuple(obj)
        if not all(is_constant_type(v) or function_member(v) for v in members):
            raise Unsupported("a set input of non-constant members")
        _type_match(tx, source, obj)
        for v in members:
            if function_member(v):  # (compared by identity: the entry keeps it alive)
                tx.hold(v)
        # the members in iteration order: equal sets may iterate in different orders, and
        # the trace followed this one's (a builtin function is equal only to itself)
        tx.guard(GuardKind.CONSTANT_MATCH, KeysSource(source), members)
        return SetValue({v: _set_member(tx, v) for v in obj}, cls is frozenset, source, order=obj)
    if plain_set_subclass(cls):
        members = tuple(obj)
        if not all(is_constant_type(v) for v in members):
            raise Unsupported(f"a {cls.__qualname__} input of non-constant members")
        _type_match(tx, source, obj)
        tx.guard(GuardKind.CONSTANT_MATCH, KeysSource(source), members)
        return SetSubclassValue(cls, {v: ConstantValue(v) for v in members}, obj, source)
    if cls is _thread.LockType:
        _type_match(tx, source, obj)
        return LockValue(obj, source)
    if isinstance(obj, os._Environ):
        _type_match(tx, source, obj)
        return EnvironValue(obj, source)
    if isinstance(obj, enum.Enum):
        _id_match(tx, source, obj)
        return EnumMemberValue(obj, source)
    if is_constant_type(obj):
        if cls is int and tx.graph.shape_plan.int_is_symbolic(source):
            return tx.graph.symint_input(tx, obj, source)
        _type_match(tx, source, obj)
        tx.guard(GuardKind.CONSTANT_MATCH, source, obj)
        return ConstantValue(obj, source)
    if isinstance(obj, types.FunctionType):
        _id_match(tx, source, obj)
        original = obj.__dict__.get("__sapwood_original__")
        if original is not None:
            # a compiled function called from traced code: trace what it compiles
            return wrap(tx, original, AttrSource(source, "__sapwood_original__"))
        if _is_modelled(obj):
            return BuiltinValue(obj, source)
        if _is_graph_function(obj):
            return TorchFunctionValue(obj, source)
        if marked_constant_result(obj):
            return ConstantResultFunctionValue(obj, UserFunctionValue(obj, source), source)
        return UserFunctionValue(obj, source)
    if isinstance(obj, weakref.ReferenceType) and type(obj) is weakref.ReferenceType:
        _type_match(tx, source, obj)
        return WeakRefValue(obj, source)
    if isinstance(obj, functools._lru_cache_wrapper):
        # a memoised function: calling it is calling the function (the cache only saves time)
        _id_match(tx, source, obj)
        traced = wrap(tx, obj.__wrapped__, AttrSource(source, "__wrapped__"))  # type: ignore[attr-defined]
        if marked_constant_result(obj) and not isinstance(traced, ConstantResultFunctionValue):
            # run through the cache itself: the promised constant is computed once per process
            return ConstantResultFunctionValue(obj, traced, source)
        return traced
    if _rebuilt_per_access(obj):
        return _per_access_method(tx, obj, source)
    if isinstance(obj, types.MethodType):
        _type_match(tx, source, obj)
        fn = wrap(tx, obj.__func__, AttrSource(source, "__func__"))
        receiver = wrap(tx, obj.__self__, AttrSource(source, "__self__"))
        return BoundMethodValue(fn, receiver)
    if c_partial_base(cls) is not None:  # (a subclass with methods of its own is not one)
        _type_match(tx, source, obj)
        fn = wrap(tx, obj.func, AttrSource(source, "func"))
        args = wrap(tx, obj.args, AttrSource(source, "args"))
        kwargs = wrap(tx, obj.keywords, AttrSource(source, "keywords"))
        assert isinstance(args, TupleValue) and isinstance(kwargs, DictValue)
        return PartialValue(fn, args, kwargs, cls, source, obj)
    if isinstance(obj, types.ModuleType):
        _id_match(tx, source, obj)
        return PyModuleValue(obj, source)
    if is_numpy_api(obj):  # a ufunc (np.sqrt), an array function (np.mean), np.asarray
        _id_match(tx, source, obj)
        return NumpyFunctionValue(obj, source)
    if _is_callable_builtin(obj) or isinstance(obj, type):
        _id_match(tx, source, obj)
        return _callable_value(tx, obj, source)
    if isinstance(obj, types.GeneratorType):
        rebuilt = wrap_repositionable_generator(tx, obj, source)
        if rebuilt is not None:
            return rebuilt
    if _is_live_iterator(obj):
        _type_match(tx, source, obj)
        return LiveIteratorValue(obj, source)
    if isinstance(obj, types.CoroutineType):
        raise Unsupported(f"a {cls.__name__} object as an input")
    if _has_dict_or_slots(obj) or dataclasses.is_dataclass(obj) or cls is property:
        _type_match(tx, source, obj)
        if isinstance(obj, dict):  # (its entries read through dict's own methods)
            return DictStorageObjectValue(obj, source)
        return ObjectValue(obj, source)
    raise Unsupported(f"an input of type {cls.__qualname__}")


def _default_dict(tx: WrappingSession, obj: Any, source: Source) -> DefaultDictValue:
    """A defaultdict input: guarded as a dict (type, then keys in order), its factory read
    through ``default_factory``."""
    _type_match(tx, source, obj)
    factory = wrap(tx, obj.default_factory, AttrSource(source, "default_factory"))
    out = DefaultDictValue({}, factory, source, obj)
    _fill_entries(tx, obj, source, out.entries)
    return out


def _fill_entries(
    tx: WrappingSession, obj: dict, source: Source, entries: dict[Any, tuple[Value, Value]]
) -> None:
    """The entries of a dict input, in its order. Keys that are constants (or lasting
    classes) are guarded together, as the tuple of keys; any other key (a tensor, a function,
    an object hashed by identity) is an input itself, read by position from the keys, and
    its value by position from the values."""
    keys = tuple(obj.keys())
    if all(is_constant_type(k) or _lasting_class(k) for k in keys):
        # (the guard may hold a lasting class, as in ``copy``'s tables of copiers by type)
        tx.guard(GuardKind.CONSTANT_MATCH, KeysSource(source), keys)
        for k in keys:
            key = _callable_value(tx, k, None) if _lasting_class(k) else ConstantValue(k)
            entries[k] = (key, wrap(tx, obj[k], ItemSource(source, k)))
        return
    tx.guard(GuardKind.CONSTANT_MATCH, LenSource(source), len(keys))
    values = ReaderSource(source, dict_values)
    for i, k in enumerate(keys):
        at = ItemSource(KeysSource(source), i)
        if is_constant_type(k) or _lasting_class(k):
            _type_match(tx, at, k)
            tx.guard(GuardKind.CONSTANT_MATCH, at, k)
            key = _callable_value(tx, k, None) if _lasting_class(k) else ConstantValue(k)
            entries[k] = (key, wrap(tx, obj[k], ItemSource(source, k)))
            continue
        key = wrap(tx, k, at)
        hashed = key.hash_key(tx)  # (Unsupported for a key the trace cannot tell apart)
        if hashed in entries:  # (one object reached twice cannot be two keys: defensive)
            raise Unsupported(f"a dict input with {key.describe()} as two of its keys")
        entries[hashed] = (key, wrap(tx, obj[k], ItemSource(values, i)))


def dict_values(d: dict) -> tuple[Any, ...]:
    """The values of a dict in its order (a guard reader: a value by position)."""
    return tuple(d.values())


def _model_output(
    tx: WrappingSession, obj: Any, source: Source, keys: tuple[str, ...]
) -> OrderedDataclassValue:
    """A ``ModelOutput`` input: its keys guarded through :func:`stored_keys` (the entries
    are the attributes that are not None, in field order), so each field is read, and
    guarded, through its attribute alone."""
    _type_match(tx, source, obj)
    tx.guard(GuardKind.CONSTANT_MATCH, ReaderSource(source, stored_keys), keys)
    names = [f.name for f in dataclasses.fields(obj)]
    attrs = vars(obj)
    fields = {n: wrap(tx, attrs[n], AttrSource(source, n)) for n in names}
    return OrderedDataclassValue(type(obj), fields, source, obj)


def _is_live_iterator(obj: Any) -> bool:
    """A generator, or an iterator object of the interpreter or the standard library
    (``list_iterator``, ``map``, ``enumerate``, ``itertools.count``, ...): wrapped as itself,
    its items unknown to the trace (see :class:`LiveIteratorValue`)."""
    if isinstance(obj, types.GeneratorType):
        return True
    cls = type(obj)
    return (
        cls.__module__ in ("builtins", "itertools", "collections")
        and getattr(cls, "__next__", None) is not None
        and getattr(cls, "__iter__", None) is not None
    )


#: Descriptors whose ``__get__`` makes a new bound object at every attribute read.
_BINDING_DESCRIPTORS = (
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.ClassMethodDescriptorType,
)


def _rebuilt_per_access(obj: Any) -> bool:
    """Whether ``obj`` is a bound builtin method made afresh at each read (``s.remove``,
    ``dict.fromkeys``, ``(1).__add__``): its ``id`` differs at every access, so an identity
    guard on it could never hold."""
    if isinstance(obj, types.MethodWrapperType):
        return True
    if not isinstance(obj, types.BuiltinMethodType):
        return False
    owner = obj.__self__
    if owner is None or isinstance(owner, types.ModuleType):
        return False
    name = obj.__name__
    mro = (owner.__mro__ if isinstance(owner, type) else ()) + type(owner).__mro__
    for klass in mro:
        found = vars(klass).get(name)
        if found is not None:
            return isinstance(found, _BINDING_DESCRIPTORS)
    return False


def _per_access_method(tx: WrappingSession, obj: Any, source: Source) -> Value:
    """A bound builtin method rebuilt per read: guarded through what is stable, its type, its
    name and the object it is bound to (which gets its own guards), never its ``id``."""
    _type_match(tx, source, obj)
    name = obj.__name__
    tx.guard(GuardKind.CONSTANT_MATCH, AttrSource(source, "__name__"), name)
    owner = wrap(tx, obj.__self__, AttrSource(source, "__self__"))
    if isinstance(owner, (ListValue, DictValue, SetValue)):
        return BoundBuiltinMethod(owner, name)
    descriptor = getattr(type(obj.__self__), name, None)
    if is_generator_primitive(descriptor):  # (``random.random``: the module's generator's)
        return BoundMethodValue(BuiltinValue(descriptor), owner)
    return BuiltinValue(obj, source)


def _plain_dict_subclass(cls: type) -> bool:
    """A dict subclass that keeps dict's storage (its Python methods are inlined) and dict's
    ``in``, ``reversed`` and truth (applied to the storage without looking at the class)."""
    if not issubclass(cls, dict) or "__getattribute__" in vars(cls) or hasattr(cls, "__bool__"):
        return False
    kept = ("__getitem__", "__iter__", "__len__", "keys", "__contains__", "__reversed__")
    return all(getattr(cls, m) is getattr(dict, m) for m in kept)


def _has_dict_or_slots(obj: Any) -> bool:
    # (a bare object(), a sentinel, is an object without attributes of its own)
    return _has_instance_dict(type(obj)) or hasattr(type(obj), "__slots__") or type(obj) is object


def _is_callable_builtin(obj: Any) -> bool:
    return isinstance(
        obj,
        (
            types.BuiltinFunctionType,
            types.BuiltinMethodType,
            types.MethodDescriptorType,
            types.WrapperDescriptorType,
            types.MethodWrapperType,
            types.ClassMethodDescriptorType,
            torch._ops.OpOverloadPacket,
            torch._ops.OpOverload,
        ),
    )


#: Python-level torch functions recorded as one node (their bodies are not traced).
_GRAPH_FUNCTION_MODULES = frozenset(
    {
        "torch.nn.functional",
        "torch.functional",
        "torch._tensor",
        "torch.random",
        "torch._refs",
    }
)


def _is_modelled(fn: Any) -> bool:
    return is_modelled_builtin(fn)


def _is_graph_function(fn: Any) -> bool:
    module = getattr(fn, "__module__", None) or ""
    return module in _GRAPH_FUNCTION_MODULES or is_modelled_torch_function(fn)


def _is_torch_builtin(fn: Any) -> bool:
    if isinstance(fn, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        return True
    module = getattr(fn, "__module__", None) or ""
    if module.startswith("torch"):
        return True
    owner = getattr(fn, "__objclass__", None)
    if owner is not None and owner in (torch.Tensor, torch._C.TensorBase):
        return True
    return is_modelled_torch_function(fn)  # (``torch.Tensor._make_subclass``)


def _lasting_class(obj: Any) -> bool:
    """A class that is a dict key only to itself and lives as long as the interpreter or its
    module: a static type (defined in C), or a class its module holds under its name; its
    metaclass compares and hashes by identity."""
    if not isinstance(obj, type):
        return False
    meta = type(obj)
    if meta.__eq__ is not type.__eq__ or meta.__hash__ is not type.__hash__:
        return False
    if not obj.__flags__ & (1 << 9):  # not Py_TPFLAGS_HEAPTYPE: static
        return True
    module = sys.modules.get(obj.__module__)
    return "<locals>" not in obj.__qualname__ and getattr(module, obj.__name__, None) is obj


def _callable_value(tx: WrappingSession, obj: Any, source: Source | None) -> Value:
    if obj in CONTEXT_CLASSES:
        return ContextClassValue(obj)
    if is_modelled_builtin(obj):
        return BuiltinValue(obj, source)
    if isinstance(obj, enum.EnumType):
        return EnumClassValue(obj, source)
    if isinstance(obj, type):
        return ClassValue(obj, source)
    if _is_torch_builtin(obj):
        return TorchFunctionValue(obj, source)
    return BuiltinValue(obj, source)


def wrap_trusted(tx: WrappingSession, obj: Any) -> Value:
    """A value for ``obj`` with no source and no guards (code constants, library attributes)."""
    cls = type(obj)
    if cls is tuple:
        return TupleValue([wrap_trusted(tx, v) for v in obj])
    if isinstance(obj, enum.Enum):
        return EnumMemberValue(obj)
    if is_constant_type(obj) or isinstance(obj, types.CodeType):
        return ConstantValue(obj)
    if isinstance(obj, types.ModuleType):
        return PyModuleValue(obj, None)
    if isinstance(obj, types.FunctionType):
        if _is_modelled(obj):
            return BuiltinValue(obj)
        if _is_graph_function(obj):
            return TorchFunctionValue(obj)
        return wrap(tx, obj, _held(obj))
    if _is_callable_builtin(obj) or isinstance(obj, type):
        return _callable_value(tx, obj, None)
    if isinstance(obj, torch.Tensor):
        return wrap(tx, obj, _held(obj))
    return wrap(tx, obj, _held(obj))


def _held(obj: Any) -> HeldObjectSource:
    label = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return HeldObjectSource(id(obj), str(label), obj)


def _set_member(tx: WrappingSession, v: Any) -> Value:
    """A member of a set input: a constant, or a function (hashed by identity, held)."""
    return wrap_trusted(tx, v) if function_member(v) else ConstantValue(v)
