"""The ``__torch_function__`` protocol in the trace, as eager torch runs it.

Where an operation meets a tensor of a class with a ``__torch_function__`` of its own
(:class:`~.overriding_tensors.OverridingTensorValue`) while subclass dispatch is on, eager
torch calls that method instead, with the public function, the types, the arguments and the
keywords. The trace does the same, inlining the user's method:

* a torch function written in C (``torch.add``, ``Tensor.add``, the ``Tensor.shape``
  getter, operators) is first called for real on meta tensors of the same classes under a
  probing ``TorchFunctionMode``: the mode sees exactly what the first ``__torch_function__``
  would (which public function: ``x + 1`` is ``Tensor.add``, ``1 - x`` is
  ``Tensor.__rsub__``; the types in precedence order; the arguments; keywords or None),
  so the trace hands the same to the user's method. A function that does not dispatch
  runs as on plain tensors;
* a torch function written in Python (``F.relu``, ``Tensor.split``) is inlined, and its
  own ``has_torch_function`` / ``handle_torch_function`` are modelled here;
* ``torch.Tensor.__torch_function__`` (the default, or ``super().__torch_function__``) is
  modelled: the call with dispatch off, then the result converted to the class
  (``as_subclass``) except for torch's "no wrap" getters.

With dispatch off (inside ``torch._C.DisableTorchFunctionSubclass()``, as the default runs
the function) an operation runs on the plain tensors, and its result is plain, except that
an operation returning its own argument (``x.add_(1)``) returns that object, of its class.
"""

from __future__ import annotations

import operator
import types
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ..errors import Unsupported
from ..values.attributes import class_attribute, held, is_tensor_getter, lookup_mro
from ..values.base import (
    ConstantValue,
    Context,
    Value,
    answers_not_implemented,
    bind_named,
    is_constant_type,
)
from ..values.contexts import subclass_functions_enabled
from ..values.dicts import DictValue
from ..values.functions import BoundMethodValue, UserFunctionValue
from ..values.sequences import ListValue, NamedTupleValue, TupleValue
from ..values.tensors import TensorValue, TorchFunctionValue
from .operator_names import DUNDER, INPLACE_DUNDER, INPLACE_TO_BINARY, UNARY_DUNDER
from .overriding_tensors import OverridingTensorValue, as_subclass

_COMPARISONS = (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne)

__all__ = [
    "SPECIAL_FUNCTIONS",
    "call_overridden",
    "overriding_operator",
    "tensor_getter_name",
    "uses_overrides",
]

_TENSOR_TORCH_FUNCTION = torch.Tensor.__torch_function__.__func__  # type: ignore[attr-defined]
_DISABLED = torch._C._disabled_torch_function_impl


def uses_overrides(args: list[Value], kwargs: dict[str, Value]) -> list[OverridingTensorValue]:
    """The overriding tensors among the arguments (a list or tuple argument's items too)."""
    found: list[OverridingTensorValue] = []
    for value in [*args, *kwargs.values()]:
        if isinstance(value, OverridingTensorValue):
            found.append(value)
        elif _sequence(value):
            found.extend(v for v in value.items if isinstance(v, OverridingTensorValue))
    return found


def call_overridden(
    tx: Context, fn: Any, args: list[Value], kwargs: dict[str, Value]
) -> Value | None:
    """``fn(*args, **kwargs)`` where an argument is an overriding tensor (see the module);
    None where none is."""
    found = uses_overrides(args, kwargs)
    if not found:
        return None
    if subclass_functions_enabled(tx):
        if isinstance(fn, types.FunctionType):  # torch's Python: inlined, it dispatches
            return tx.call(UserFunctionValue(fn, held(fn, fn.__qualname__)), args, kwargs)
        seen = _probe(fn, args, kwargs)
        if seen is not None:
            return _dispatch(tx, *seen)
    plain = [_unwrap(a) for a in args]
    plain_kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
    return _rewrap(_plain_call(tx, fn, plain, plain_kwargs), found)


def _unwrap(value: Value) -> Value:
    if isinstance(value, OverridingTensorValue):
        return value.tensor
    if _sequence(value) and any(isinstance(v, OverridingTensorValue) for v in value.items):  # type: ignore[attr-defined]
        items = [_unwrap(v) for v in value.items]  # type: ignore[attr-defined]
        return ListValue(items) if isinstance(value, ListValue) else TupleValue(items)
    return value


def _sequence(value: Value) -> bool:
    """A plain tuple or list (what torch takes as a list of tensors)."""
    return isinstance(value, (TupleValue, ListValue)) and not isinstance(value, NamedTupleValue)


def _rewrap(result: Value, found: list[OverridingTensorValue]) -> Value:
    """An operation's result that is one of its overriding arguments (``x.add_(1)``, a
    ``contiguous()`` that had nothing to do) is that object, of its class."""
    if isinstance(result, TensorValue):
        return next((v for v in found if v.tensor.fake is result.fake), result)
    if _sequence(result) and isinstance(result, TupleValue):
        return TupleValue([_rewrap(v, found) for v in result.items])
    return result


#: Tensor's special methods that are protocol operations of a value
_PROTOCOL = {"__getitem__", "__setitem__", "__len__", "__iter__", "__bool__", "__contains__"}


def _plain_call(tx: Context, fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``fn`` on plain tensors: a ``Tensor`` getter or method as the tensor value answers
    it (metadata from the fake tensor, ...), anything else as a torch function."""
    getter = tensor_getter_name(fn)
    if getter is not None and len(args) == 1 and not kwargs:
        return args[0].getattr(tx, getter)
    name = getattr(fn, "__name__", None)
    receiver = args[0] if args else None
    if isinstance(receiver, TensorValue) and name and getattr(torch.Tensor, name, None) is fn:
        if name in _PROTOCOL and not kwargs:
            return _protocol(tx, receiver, name, args[1:])
        return tx.call(receiver.getattr(tx, name), args[1:], kwargs)
    return tx.call_torch_function(fn, args, kwargs)


def _protocol(tx: Context, receiver: TensorValue, name: str, rest: list[Value]) -> Value:
    if name == "__getitem__" and len(rest) == 1:
        return receiver.getitem(tx, rest[0])
    if name == "__setitem__" and len(rest) == 2:
        receiver.setitem(tx, rest[0], rest[1])
        return ConstantValue(None)
    if name == "__len__" and not rest:
        return ConstantValue(receiver.length(tx))
    if name == "__bool__" and not rest:
        return ConstantValue(receiver.truth(tx))
    if name == "__contains__" and len(rest) == 1:
        return ConstantValue(receiver.contains(tx, rest[0]))
    if name == "__iter__" and not rest:
        return receiver.iterate(tx)
    raise Unsupported(f"Tensor.{name} with {len(rest)} arguments")


def tensor_getter_name(fn: Any) -> str | None:
    """The attribute name of ``Tensor.<name>.__get__`` (a getter torch dispatches)."""
    owner = getattr(fn, "__self__", None)
    if getattr(fn, "__name__", None) == "__get__" and is_tensor_getter(owner):
        return str(owner.__name__)
    return None


# ------------------------------------------------------------------------- the probe
class _Seen(Exception):
    pass


class _Probe(TorchFunctionMode):
    """Stops at the first ``__torch_function__`` call, with what it would be handed."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        raise _Seen(func, types, args, kwargs)


def _meta(fake: torch.Tensor) -> torch.Tensor:
    shape = fake.shape
    if all(type(s) is int for s in shape) and all(type(s) is int for s in fake.stride()):
        return torch.empty_strided(shape, fake.stride(), dtype=fake.dtype, device="meta")
    return torch.empty((0,) * fake.dim(), dtype=fake.dtype, device="meta")


def _probe(
    fn: Any, args: list[Value], kwargs: dict[str, Value]
) -> tuple[Any, tuple[type, ...], list[Value], dict[str, Value] | None] | None:
    """What ``fn(*args, **kwargs)`` hands the first ``__torch_function__`` (see the
    module), or None where it calls none."""
    by_id: dict[int, Value] = {}
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))

    def real(value: Value) -> Any:
        if isinstance(value, (OverridingTensorValue, TensorValue)):
            obj = _meta(value.fake)
            if isinstance(value, OverridingTensorValue):
                with torch._C.DisableTorchFunctionSubclass():
                    obj = obj.as_subclass(value.cls)
        elif _sequence(value):
            items = [real(v) for v in value.items]  # type: ignore[attr-defined]
            obj = items if isinstance(value, ListValue) else tuple(items)
        elif value.is_constant() and is_constant_type(value.as_constant()):
            return value.as_constant()
        else:
            raise Unsupported(f"{name} with {value.describe()} and a __torch_function__ tensor")
        by_id[id(obj)] = value
        return obj

    def back(obj: Any) -> Value:
        found = by_id.get(id(obj))
        if found is not None:
            return found
        if type(obj) is tuple:
            return TupleValue([back(o) for o in obj])
        if is_constant_type(obj):
            return ConstantValue(obj)
        raise Unsupported(f"{name} handing __torch_function__ a {type(obj).__name__}")

    real_args = [real(a) for a in args]
    real_kwargs = {k: real(v) for k, v in kwargs.items()}
    try:
        with _Probe():
            fn(*real_args, **real_kwargs)
    except _Seen as seen:
        func, kinds, given, keywords = seen.args
    except Exception as exc:
        raise Unsupported(
            f"{name} on a __torch_function__ tensor raising {type(exc).__name__}: {exc}"
        ) from None
    else:
        return None
    out_kwargs = None if keywords is None else {k: back(v) for k, v in keywords.items()}
    return func, tuple(kinds), [back(a) for a in given], out_kwargs


# ---------------------------------------------------------------------- dispatching
def _dispatch(
    tx: Context,
    func: Any,
    kinds: tuple[type, ...],
    args: list[Value],
    kwargs: dict[str, Value] | None,
) -> Value:
    """Call each type's ``__torch_function__`` in turn until one does not answer
    ``NotImplemented`` (torch's loop)."""
    func_value = TorchFunctionValue(func)
    types_value = TupleValue([tx.wrap_trusted(k) for k in kinds])
    keywords: Value = ConstantValue(None) if kwargs is None else _dict_of(tx, kwargs)
    argv = [func_value, types_value, TupleValue(list(args)), keywords]
    for kind in kinds:
        raw = lookup_mro(kind, "__torch_function__")[1]
        if not isinstance(raw, classmethod):
            raise Unsupported(f"{kind.__qualname__}.__torch_function__, which is not a classmethod")
        method = class_attribute(tx, kind, "__torch_function__", None)
        assert method is not None
        result = tx.call(method, argv, {})
        if not answers_not_implemented(result):
            return result
    raise Unsupported(
        f"no __torch_function__ of {[k.__qualname__ for k in kinds]} implements "
        f"{getattr(func, '__qualname__', func)!s} (TypeError)"
    )


def _dict_of(tx: Context, kwargs: dict[str, Value]) -> DictValue:
    return DictValue.from_pairs(tx, [(ConstantValue(k), v) for k, v in kwargs.items()])


def _kwargs_of(tx: Context, value: Value) -> dict[str, Value]:
    if value.is_constant() and value.as_constant() is None:
        return {}
    if not isinstance(value, DictValue):
        raise Unsupported(f"__torch_function__ keywords given as {value.describe()}")
    out = {}
    for key, item in value.entries.values():
        if not (key.is_constant() and isinstance(key.as_constant(), str)):
            raise Unsupported("__torch_function__ keywords with a key that is not a string")
        out[key.as_constant()] = item
    return out


def _default_torch_function(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``torch.Tensor.__torch_function__(cls, func, types, args=(), kwargs=None)``."""
    names = ("cls", "func", "types", "args", "kwargs")
    bound = bind_named("Tensor.__torch_function__", names, args, kwargs)
    if not {"cls", "func", "types"} <= set(bound) or not bound["cls"].is_constant():
        raise Unsupported("Tensor.__torch_function__ with these arguments (TypeError)")
    cls = bound["cls"].as_constant()
    func = bound["func"]
    kinds = tx.unpack(bound["types"])
    if not all(k.is_constant() and isinstance(k.as_constant(), type) for k in kinds):
        raise Unsupported("Tensor.__torch_function__ with types that are not classes")
    if not all(issubclass(cls, k.as_constant()) for k in kinds):
        return ConstantValue(NotImplemented)
    call_args = tx.unpack(bound.get("args", TupleValue([])))
    call_kwargs = _kwargs_of(tx, bound.get("kwargs", ConstantValue(None)))
    prior = subclass_functions_enabled(tx)
    tx.subclass_functions = False
    try:
        result = tx.call(func, call_args, call_kwargs)
        if func.is_constant() and _no_wrap(func.as_constant()):
            return result
        return _convert(tx, result, cls)
    finally:
        tx.subclass_functions = prior


def _no_wrap(func: Any) -> bool:
    try:
        return func in torch.overrides.get_default_nowrap_functions()
    except TypeError:  # (unhashable)
        return False


def _convert(tx: Context, result: Value, cls: type) -> Value:
    """torch's ``_convert``: tensors (not already of ``cls``) made of ``cls``, in a tuple or
    list too."""
    if cls is torch.Tensor:
        return result
    if isinstance(result, TensorValue) or (
        isinstance(result, OverridingTensorValue) and not issubclass(result.cls, cls)
    ):
        return as_subclass(tx, result, cls)
    if isinstance(result, NamedTupleValue):
        return NamedTupleValue(result.cls, [_convert(tx, v, cls) for v in result.items])
    if _sequence(result):
        items = [_convert(tx, v, cls) for v in result.items]  # type: ignore[attr-defined]
        return ListValue(items) if isinstance(result, ListValue) else TupleValue(items)
    return result


# ----------------------------------------- torch.overrides' own functions, when inlined
def _overriding_type(value: Value) -> bool:
    """Whether eager torch counts ``value`` as overloaded (``has_torch_function``)."""
    if isinstance(value, OverridingTensorValue):
        return True
    if isinstance(value, TensorValue) or value.is_constant():
        return False
    kind = value.python_type()
    if getattr(kind, "__torch_function__", _DISABLED) is not _DISABLED:
        raise Unsupported(f"has_torch_function of {value.describe()}")
    return False


def _has_torch_function(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if kwargs or len(args) != 1:
        raise Unsupported("has_torch_function with these arguments")
    items = tx.unpack(args[0])
    return ConstantValue(any(_overriding_type(v) for v in items) and subclass_functions_enabled(tx))


def _has_torch_function_each(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if kwargs:
        raise Unsupported("has_torch_function with keywords")
    return ConstantValue(any(_overriding_type(v) for v in args) and subclass_functions_enabled(tx))


def _handle_torch_function(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``torch.overrides.handle_torch_function(public_api, relevant_args, *args, **kwargs)``."""
    if len(args) < 2 or not args[0].is_constant():
        raise Unsupported("handle_torch_function with these arguments")
    overloaded: list[Value] = []
    if subclass_functions_enabled(tx):
        for value in tx.unpack(args[1]):
            kind = value.python_type()
            if not isinstance(value, (TensorValue, OverridingTensorValue)):
                if getattr(kind, "__torch_function__", _DISABLED) is not _DISABLED:
                    raise Unsupported(f"handle_torch_function with {value.describe()}")
                continue
            if kind.__torch_function__ is _DISABLED or any(
                o.python_type() is kind for o in overloaded
            ):
                continue
            index = next(
                (i for i, o in enumerate(overloaded) if issubclass(kind, o.python_type())),
                len(overloaded),
            )
            overloaded.insert(index, value)
    kinds = tuple(v.python_type() for v in overloaded)
    return _dispatch(tx, args[0].as_constant(), kinds, list(args[2:]), dict(kwargs))


def _is_enabled(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if args or kwargs:
        raise Unsupported("torch._C._is_torch_function_enabled with arguments (TypeError)")
    return ConstantValue(subclass_functions_enabled(tx))


#: handlers of torch's Python-level functions (``pymodel.torch_functions`` takes them in)
SPECIAL_FUNCTIONS: dict[Any, Any] = {
    _TENSOR_TORCH_FUNCTION: _default_torch_function,
    torch.overrides.handle_torch_function: _handle_torch_function,
    torch._C._has_torch_function: _has_torch_function,
    torch.overrides.has_torch_function: _has_torch_function,
    torch._C._has_torch_function_unary: _has_torch_function_each,
    torch.overrides.has_torch_function_unary: _has_torch_function_each,
    torch._C._has_torch_function_variadic: _has_torch_function_each,
    torch.overrides.has_torch_function_variadic: _has_torch_function_each,
    torch._C._is_torch_function_enabled: _is_enabled,
}


# ------------------------------------------------------------------------- operators
def overriding_operator(tx: Context, fn: Any, a: Value, b: Value | None = None) -> Value:
    """``fn(a, b)`` (or ``fn(a)``) of :mod:`operator` where an operand is an overriding
    tensor: Python's protocol over the operands' special methods, each a ``Tensor`` method
    (or the class's own), so each goes through ``__torch_function__``."""
    if b is None:
        name = UNARY_DUNDER[operator.abs if fn is abs else fn]
        return tx.call(_method(tx, a, name), [], {})
    if fn in _RICH:
        return _compare(tx, fn, a, b)
    inplace = INPLACE_DUNDER.get(fn)
    if inplace is not None:
        if _has(a, inplace):
            result = tx.call(_method(tx, a, inplace), [b], {})
            if not answers_not_implemented(result):
                return result
        fn = INPLACE_TO_BINARY[fn]
    forward, reflected = DUNDER[fn]
    ta, tb = _kind(a), _kind(b)
    tries: list[tuple[Value, str, Value]] = []
    if ta is not None and _has(a, forward):
        tries.append((a, forward, b))
    if tb is not None and tb is not ta and _has(b, reflected):
        reflected_try = (b, reflected, a)
        if ta is not None and issubclass(tb, ta) and _differs(ta, tb, reflected):
            tries.insert(0, reflected_try)
        else:
            tries.append(reflected_try)
    for receiver, name, other in tries:
        result = tx.call(_method(tx, receiver, name), [other], {})
        if not answers_not_implemented(result):
            return result
    raise Unsupported(f"the operator {name} on {a.describe()} and {b.describe()} (TypeError)")


def _compare(tx: Context, fn: Any, a: Value, b: Value) -> Value:
    forward, reflected = _RICH[fn]
    ta, tb = _kind(a), _kind(b)
    tries: list[tuple[Value, str, Value]] = []
    if tb is not None and tb is not ta and ta is not None and issubclass(tb, ta):
        tries.append((b, reflected, a))
    if ta is not None:
        tries.append((a, forward, b))
    if tb is not None and (b, reflected, a) not in tries:
        tries.append((b, reflected, a))
    for receiver, name, other in tries:
        result = tx.call(_method(tx, receiver, name), [other], {})
        if not answers_not_implemented(result):
            return result
    if fn in (operator.eq, operator.ne):
        raise Unsupported(f"== / != by identity between {a.describe()} and {b.describe()}")
    raise Unsupported(f"comparing {a.describe()} and {b.describe()} (TypeError)")


def _kind(value: Value) -> type | None:
    """The class whose special methods Python tries for ``value``: a tensor's; None for a
    number or other constant (their methods answer NotImplemented to a tensor)."""
    if isinstance(value, (OverridingTensorValue, TensorValue)):
        return value.python_type()
    if value.is_constant() and type(value.as_constant()) in (int, float, bool, complex):
        return None
    raise Unsupported(f"an operator between {value.describe()} and a __torch_function__ tensor")


def _has(value: Value, name: str) -> bool:
    return lookup_mro(value.python_type(), name)[0] is not None


def _differs(left: type, right: type, name: str) -> bool:
    return lookup_mro(left, name)[1] is not lookup_mro(right, name)[1]


def _method(tx: Context, receiver: Value, name: str) -> Value:
    if isinstance(receiver, OverridingTensorValue):
        return receiver.getattr(tx, name)
    # (a plain tensor's: the torch function, which meets the overriding operand)
    return BoundMethodValue(TorchFunctionValue(getattr(torch.Tensor, name)), receiver)


#: the comparisons, whose reflection is tried as CPython's rich comparison does
_RICH = {fn: names for fn, names in DUNDER.items() if fn in _COMPARISONS}
