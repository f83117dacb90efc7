"""``isinstance``, ``issubclass`` and ``cls.__subclasses__()`` in the trace.

``isinstance`` and ``issubclass`` are answered from the value's Python type, for
classes whose metaclass decides by the type (ABCs, ``type``), the legacy tensor types (by
dtype and device), and ``nn.Parameter``, whose metaclass also counts tensors of other classes
flagged ``_is_param`` (what ``nn.Parameter(subclass_tensor)`` makes). Other metaclasses
that decide ``isinstance`` themselves are refused.

``cls.__subclasses__()`` is the list of the class's live subclasses now, guarded by their
identities in order (a class defined or collected since traces again); the entry holds them
weakly, so it keeps none alive (which would change what the program's own calls return).
"""

from __future__ import annotations

import abc
import builtins
import types
import typing
from typing import Any

import torch

from sapwood_graph import GuardKind

from ..errors import Unsupported
from ..guards.sources import ReaderSource
from ..values.attributes import class_attribute, held
from ..values.base import ConstantValue, Context, Value
from ..values.containers import ListValue
from ..values.objects import ClassValue
from ..values.tensor_attributes import assigned_attributes, instance_attribute
from ..values.tensors import TensorValue
from .builtins import handles

__all__: list[str] = []


def _classinfo(value: Value) -> Any:
    return value.as_constant()


def _classes(info: Any) -> list[Any]:
    """The classes of an ``isinstance`` class-info: a class, a tuple or ``X | Y`` of them."""
    if isinstance(info, tuple):
        return [c for item in info for c in _classes(item)]
    if typing.get_origin(info) in (typing.Union, types.UnionType):
        return _classes(typing.get_args(info))
    return [info]


#: Metaclasses whose ``isinstance`` answer is ``issubclass(type(obj), cls)`` for every value
#: the tracer has (ABCs; ``nn.Parameter``'s marks tensor subclasses, which are never inputs).
_PLAIN_INSTANCECHECKS = frozenset(
    {type.__instancecheck__, abc.ABCMeta.__instancecheck__}
    | {type(torch.nn.Parameter).__instancecheck__}
)
#: torch.FloatTensor, torch.cuda.LongTensor, ...: ``isinstance`` asks the tensor's dtype and
#: device, which the fake tensor has (and the guards fix).
_LEGACY_TENSOR_TYPES = frozenset(torch._tensor_classes)  # type: ignore[attr-defined]


def _is_instance(tx: Context, obj: Value, cls: Any) -> bool:
    if cls in _LEGACY_TENSOR_TYPES:
        return isinstance(obj, TensorValue) and isinstance(obj.fake, cls)
    if cls is torch.nn.Parameter and isinstance(obj, TensorValue):
        # a tensor of another class counts as a Parameter when flagged ``_is_param`` (what
        # ``nn.Parameter(subclass_tensor)`` makes): Parameter's metaclass asks the object
        return issubclass(obj.python_type(), cls) or _parameter_flag(tx, obj)
    if not isinstance(cls, type):
        raise Unsupported(f"isinstance with {cls!r} (not a class) (TypeError)")
    hook = type(cls).__instancecheck__
    if hook in _PLAIN_INSTANCECHECKS:
        return issubclass(obj.python_type(), cls)
    if isinstance(hook, types.FunctionType):  # a metaclass's own, written in Python: inlined
        method = class_attribute(tx, type(cls), "__instancecheck__", tx.wrap_trusted(cls))
        assert method is not None
        return tx.truth(tx.call(method, [obj], {}))
    raise Unsupported(
        f"isinstance with {cls.__qualname__}, whose metaclass decides isinstance itself"
    )


@handles(type.__instancecheck__)
def _type_instancecheck(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``type.__instancecheck__(cls, obj)`` (a metaclass's ``super().__instancecheck__``):
    the check without any metaclass's hook, by the object's type."""
    if len(args) != 2 or kwargs or not isinstance(args[0], ClassValue):
        raise Unsupported("type.__instancecheck__ with these arguments")
    return ConstantValue(issubclass(args[1].python_type(), args[0].cls))


def _parameter_flag(tx: Context, obj: TensorValue) -> bool:
    """``getattr(t, "_is_param", False)`` of the tensor ``obj`` stands for: assigned in the
    trace, or read (guarded) from the input it is; a tensor the trace made has none."""
    assigned = assigned_attributes(obj)
    if "_is_param" in assigned:
        return tx.truth(assigned["_is_param"])
    target = tx.graph.input_of(obj)
    if target is None:
        return False
    flag = instance_attribute(tx, target, "_is_param")
    return flag is not None and tx.truth(flag)


@handles(builtins.isinstance)
def _isinstance(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    obj, info = args
    classes = _classes(_classinfo(info))
    return ConstantValue(any(_is_instance(tx, obj, cls) for cls in classes))


@handles(builtins.issubclass)
def _issubclass(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ConstantValue(issubclass(args[0].as_constant(), _classinfo(args[1])))


def subclass_ids(cls: type) -> tuple[int, ...]:
    """The identities of ``cls``'s live subclasses, in order (a guard reader)."""
    return tuple(map(id, type.__subclasses__(cls)))


@handles(type.__subclasses__)
def _subclasses(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if len(args) != 1 or kwargs or not isinstance(args[0], ClassValue):
        raise Unsupported("type.__subclasses__ with these arguments")
    owner = args[0]
    found = type.__subclasses__(owner.cls)
    source = owner.source or held(owner.cls, owner.cls.__qualname__)
    tx.guard(GuardKind.CONSTANT_MATCH, ReaderSource(source, subclass_ids), subclass_ids(owner.cls))
    for cls in found:
        tx.hold(cls)  # (weakly, as classes are: the entry dies with any of them)
    return ListValue([tx.wrap_trusted(cls) for cls in found])
