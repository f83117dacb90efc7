"""Models of Python builtins and of the standard library functions model code uses.

Each modelled callable has a handler here; a callable without one is refused. Handlers work
on values: on constants they fold (calling the real function, which is pure for every
callable listed in ``_FOLDABLE``); on tensors they record graph nodes; on containers and
iterators they act on the values.
"""

from __future__ import annotations

import builtins
import collections
import functools
import inspect
import math
import operator
import struct
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ..errors import Unsupported, forget_handled, weakly_referenced
from ..foreign import numpy_errors_raise
from ..values.base import (
    BuiltinValue,
    ConstantValue,
    Context,
    IteratorValue,
    Value,
    _AttributeMissing,
    folds_for_real,
    holds_user_enum,
    is_constant_type,
)
from ..values.containers import DictValue, ListValue, TupleValue
from ..values.exceptions import ExceptionValue, python_error, raised_for_real
from ..values.functions import FunctionValue
from ..values.identity import ObjectIdValue
from ..values.objects import NewObjectValue, SuperValue
from ..values.partials import PartialValue
from ..values.sets import SetValue
from ..values.symbolic import SymNumberValue, specialised_int, symbolic_extreme
from ..values.tensors import TensorValue
from . import operators as ops
from . import text as text_model
from .caller_frames import reads_callers_frame
from .text import inlines_text, join_text, member_text, text_call, text_of_exception
from .torch_function_protocol import tensor_getter_name

__all__ = ["call_builtin", "is_modelled_builtin", "make_super", "new_set"]

Handler = Callable[["Context", list[Value], dict[str, Value]], Value]
_HANDLERS: dict[Any, Handler] = {}

#: Pure functions folded on constant arguments.
_FOLDABLE: set[Any] = {
    builtins.divmod,
    builtins.pow,
    builtins.chr,
    builtins.ord,
    builtins.repr,
    builtins.hash,
    builtins.complex,
    builtins.slice,
    builtins.ascii,
    builtins.bin,
    builtins.hex,
    builtins.oct,
    str.join,
    str.format,
}
_FOLDABLE |= {
    sys.intern,
    struct.pack,
    struct.unpack,
    struct.calcsize,
    float.fromhex,
    float.__getformat__,
    bytes.fromhex,
    int.from_bytes,
    bool.from_bytes,
}
for _name in dir(math):
    _obj = getattr(math, _name)
    if callable(_obj):
        _FOLDABLE.add(_obj)


def _key_of(fn: Any) -> Any:
    try:
        hash(fn)
    except TypeError:
        return None
    if type(fn) is types.BuiltinFunctionType:
        return _canonical_function(fn)
    return fn


#: C modules whose functions behave the same from any copy of the module (a test's
#: ``import_fresh_module('operator', fresh=['_operator'])`` makes new function objects)
_STATELESS_C_MODULES = {"_operator": operator}


def _canonical_function(fn: Any) -> Any:
    """The modelled function a function of a fresh copy of a stateless C module stands for."""
    owner = getattr(fn, "__self__", None)
    if not isinstance(owner, types.ModuleType):
        return fn
    canonical_module = _STATELESS_C_MODULES.get(owner.__name__)
    if canonical_module is None:
        return fn
    canonical = getattr(canonical_module, fn.__name__, None)
    if (
        type(canonical) is types.BuiltinFunctionType
        and getattr(canonical.__self__, "__name__", None) == owner.__name__
    ):
        return canonical
    return fn


def is_modelled_builtin(obj: Any) -> bool:
    key = _key_of(obj)
    return key is not None and (key in _HANDLERS or key in _FOLDABLE or key in _OPERATORS)


def handles(*fns: Any) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for fn in fns:
            _HANDLERS[fn] = handler
        return handler

    return register


def call_builtin(
    tx: Context, fn: BuiltinValue, args: list[Value], kwargs: dict[str, Value]
) -> Value:
    real = fn.fn
    if real is weakref.proxy:
        raise weakly_referenced("weakref.proxy")
    if reads_callers_frame(tx, real, args, kwargs):
        exc = Unsupported(
            f"calling {fn.describe()}, which reads the frame it is called from",
            hint="The function runs eagerly as a whole (a graph break would run the call "
            "in another frame).",
        )
        exc.frame_bound = True
        raise exc
    key = _key_of(real)
    handler = _HANDLERS.get(key) if key is not None else None
    if handler is not None:
        return handler(tx, args, kwargs)
    if key is not None and key in _OPERATORS:
        _check_arguments(key, args, kwargs)
        return _OPERATORS[key](tx, args, kwargs)
    if key is not None and key in _FOLDABLE:
        # a symbolic number a folded builtin needs (``hash(n)``, ``math.gcd(n, 4)``) is
        # specialised: the entry is guarded on its value
        args = [specialised_int(a) for a in args]
        kwargs = {k: specialised_int(v) for k, v in kwargs.items()}
        if all(a.is_constant() for a in args) and all(v.is_constant() for v in kwargs.values()):
            return _fold_call(tx, real, args, kwargs)
        if real in _MATH_TO_TORCH and len(args) == 1 and isinstance(args[0], TensorValue):
            raise Unsupported(f"math.{real.__name__} on a tensor (it needs the tensor's value)")
        raise Unsupported(f"{fn.describe()} on non-constant arguments")
    bound_to = getattr(real, "__self__", None)
    if type(bound_to) is str and real == bound_to.join and len(args) == 1 and not kwargs:
        return join_text(tx, bound_to, args[0])
    if type(bound_to) is bytes and real.__name__ == "join" and len(args) == 1:
        args = [TupleValue(args[0].collect(tx))]  # (join reads its argument whole, first)
    if (
        bound_to is not None
        and not isinstance(bound_to, type)
        and is_constant_type(bound_to)
        and folds_for_real(bound_to, getattr(real, "__name__", ""))
        and all(a.is_constant() for a in args)
        and all(v.is_constant() for v in kwargs.values())
        and not any(holds_user_enum(v.as_constant()) for v in [*args, *kwargs.values()])
    ):
        # methods of immutable builtin values (str.split, int.bit_length, ...) are pure
        return _fold_call(tx, real, args, kwargs)
    # (a bound method-wrapper, ``s.__init__``, names its class too: it is not unbound)
    owner = (
        None if isinstance(real, types.MethodWrapperType) else getattr(real, "__objclass__", None)
    )
    if owner is torch._C.TensorBase or tensor_getter_name(real) is not None:
        return tx.call_torch_function(real, args, kwargs)  # (``torch.Tensor.exp(x)``)
    if owner is object and getattr(real, "__name__", "") == "__init__":
        return ConstantValue(None)
    if owner is object and getattr(real, "__name__", "") == "__setattr__":
        target, name, value = args  # (object's own store, past a class's __setattr__)
        getattr(target, "set_own", target.setattr)(tx, name.as_constant(), value)
        return ConstantValue(None)
    if owner is not None and isinstance(owner, type) and args:
        # an unbound method of a builtin type (str.upper, dict.get, ...) called on a value:
        # the builtin type's own behaviour, even where a subclass overrides the method
        receiver, rest = args[0], args[1:]
        if not issubclass(receiver.python_type(), owner):
            raise Unsupported(
                f"calling {fn.describe()} on {receiver.describe()}, not a {owner.__name__} "
                "(TypeError)"
            )
        call_method = getattr(receiver, "call_method", None)
        if call_method is not None:
            return call_method(tx, real.__name__, rest, kwargs)  # type: ignore[no-any-return]
        if receiver.is_constant():
            return tx.call(tx.getattr(receiver, real.__name__), rest, kwargs)
        raise Unsupported(f"calling {fn.describe()} on {receiver.describe()}")
    raise Unsupported(f"calling {fn.describe()}", hint="This builtin is not modelled yet.")


@functools.cache
def _signature_of(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _check_arguments(fn: Any, args: list[Value], kwargs: dict[str, Value]) -> None:
    """Python's ``TypeError`` for a call of the C function ``fn`` with arguments it does not
    take: the real function, called with as many placeholders, raises it before reading them."""
    signature = _signature_of(fn)
    if signature is None:
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        try:
            fn(*([None] * len(args)), **dict.fromkeys(kwargs))
        except TypeError as exc:
            raise python_error(TypeError, *exc.args) from None
        raise Unsupported(f"calling {fn.__name__} with these arguments") from None


_MATH_TO_TORCH = {math.sqrt, math.exp, math.log, math.sin, math.cos}


def _fold_call(tx: Context, fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    for arg in (*args, *kwargs.values()):
        if holds_user_enum(arg.as_constant()):
            # (its class's code, or the enum module's calling it, would run at trace time)
            raise Unsupported(f"{getattr(fn, '__name__', fn)}() of {arg.describe()}")
    positional = [a.as_constant() for a in args]
    named = {k: v.as_constant() for k, v in kwargs.items()}
    try:
        with numpy_errors_raise([*positional, *named.values()]):
            result = fn(*positional, **named)
    except Exception as exc:
        raise raised_for_real(exc, getattr(fn, "__name__", repr(fn))) from exc
    return tx.wrap_trusted(result)


# ----------------------------------------------------------------- introspection
@handles(builtins.len)
def _len(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ConstantValue(tx.length(args[0]))


@handles(builtins.type)
def _type(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if len(args) != 1:
        raise Unsupported("type() with three arguments (creating a class)")
    return tx.wrap_trusted(args[0].python_type())


@handles(builtins.callable)
def _callable(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    v = args[0]
    if isinstance(v, (ConstantValue, TensorValue, TupleValue, ListValue, DictValue, SetValue)):
        return ConstantValue(v.is_constant() and callable(v.as_constant()))
    if isinstance(v, (FunctionValue, BuiltinValue, PartialValue)):
        return ConstantValue(True)
    # Python asks the type for a ``__call__`` (the class's own MRO, not its metaclass)
    return ConstantValue(any("__call__" in klass.__dict__ for klass in v.python_type().__mro__))


@handles(builtins.getattr)
def _getattr(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    obj, name = args[0], args[1].as_constant()
    if len(args) == 3:
        try:
            return tx.lookup(obj, name)
        except _AttributeMissing as missing:
            forget_handled(missing)
            return args[2]
    return tx.getattr(obj, name)


@handles(builtins.hasattr)
def _hasattr(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    obj, name = args[0], args[1].as_constant()
    try:
        tx.lookup(obj, name)
    except _AttributeMissing as missing:
        forget_handled(missing)
        return ConstantValue(False)
    return ConstantValue(True)


@handles(builtins.setattr)
def _setattr(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    args[0].setattr(tx, args[1].as_constant(), args[2])
    return ConstantValue(None)


@handles(builtins.id)
def _id(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if len(args) != 1 or kwargs:
        raise Unsupported("id() with other than one argument (TypeError)")
    return ObjectIdValue(args[0])


@handles(builtins.print)
def _print(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    raise Unsupported(
        "print()", hint="Printing is a side effect; print outside the compiled function."
    )


@handles(builtins.super)
def _super(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if args:
        return make_super(tx, None, args[0], args[1])
    frame = tx.frames[-1]
    cell = frame.cells.get("__class__")
    if cell is None or not frame.code.co_argcount:
        raise Unsupported("super() without arguments outside a method")
    cls = cell.load(tx, "__class__")  # type: ignore[attr-defined]
    first = frame.code.co_varnames[0]
    receiver: Value | None = frame.locals.get(first)
    if receiver is None and first in frame.cells:
        receiver = frame.cells[first].load(tx, first)  # type: ignore[attr-defined]
    if receiver is None:
        raise Unsupported("super() after the first argument was deleted")
    return make_super(tx, None, cls, receiver)


def make_super(tx: Context, super_fn: Value | None, cls: Value, receiver: Value) -> Value:
    if super_fn is not None and not (
        super_fn.is_constant() and super_fn.as_constant() is builtins.super
    ):
        raise Unsupported("LOAD_SUPER_ATTR with a shadowed `super`")
    return SuperValue(cls.as_constant(), receiver)


# ----------------------------------------------------------------- numbers
def _number_reduce(pick: Any) -> Handler:
    def handler(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        items = tx.unpack(args[0]) if len(args) == 1 else list(args)
        default = kwargs.pop("default", None)
        key = kwargs.pop("key", None)
        if kwargs:
            raise Unsupported(f"{pick.__name__}() with {sorted(kwargs)}")
        if not items:
            if default is not None:
                return default
            raise python_error(ValueError, f"{pick.__name__}() arg is an empty sequence")
        if key is not None:
            keys = [tx.call(key, [v], {}) for v in items]
        else:
            keys = items
        if key is None and any(isinstance(k, SymNumberValue) for k in keys):
            return symbolic_extreme(tx, pick, keys)  # sizes stay symbolic (no guard)
        if not all(k.is_constant() for k in keys):
            raise Unsupported(
                f"{pick.__name__}() over non-constant values",
                hint="For tensors use torch.maximum/torch.minimum or torch.max/torch.min.",
            )
        consts = [k.as_constant() for k in keys]
        best = pick(range(len(consts)), key=lambda i: consts[i])
        return items[best]

    return handler


_HANDLERS[builtins.min] = _number_reduce(min)
_HANDLERS[builtins.max] = _number_reduce(max)


@handles(builtins.abs)
def _abs(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return ops.unary(tx, operator.abs, args[0])


@handles(builtins.round)
def _round(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    number = args[0] if args else kwargs.get("number")  # (``round(number=x)``)
    if not isinstance(number, TensorValue):
        args = [specialised_int(a) for a in args]
        kwargs = {k: specialised_int(v) for k, v in kwargs.items()}
    if all(a.is_constant() for a in args) and all(v.is_constant() for v in kwargs.values()):
        return _fold_call(tx, round, args, kwargs)
    if isinstance(number, TensorValue):
        return tx.graph.call_function(tx, round, args, kwargs)
    raise Unsupported("round() of a non-constant")


@handles(builtins.any)
def _any(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    it = tx.iterate(args[0])
    assert isinstance(it, IteratorValue)
    while (v := it.next_value(tx)) is not None:
        if tx.truth(v):
            return ConstantValue(True)
    return ConstantValue(False)


@handles(builtins.all)
def _all(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    it = tx.iterate(args[0])
    assert isinstance(it, IteratorValue)
    while (v := it.next_value(tx)) is not None:
        if not tx.truth(v):
            return ConstantValue(False)
    return ConstantValue(True)


def _scalar_type(kind: type) -> Handler:
    def handler(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if not args:
            return ConstantValue(kind())
        if kind is bool:
            return ConstantValue(tx.truth(args[0]))
        if isinstance(args[0], TensorValue):
            raise Unsupported(f"{kind.__name__}() of a tensor (it needs the tensor's value)")
        symbolic_int = isinstance(args[0], SymNumberValue) and args[0].python_type() is int
        if kind is int and len(args) == 1 and symbolic_int:
            return args[0]  # int(size) is the size: it stays symbolic
        if kind is str and isinstance(args[0], ExceptionValue):
            return text_of_exception(args[0], str)
        if kind is str:  # (the text of a symbolic number: its value)
            args = [specialised_int(a) for a in args]
        if kind is str and not args[0].is_constant():
            return text_model.object_text(tx, str, args, kwargs)
        if kind is str and len(args) == 1 and not kwargs and inlines_text(args[0]):
            return member_text(tx, args[0], "__str__")
        return _fold_call(tx, kind, args, kwargs)

    return handler


for _kind in (int, float, bool, str):
    _HANDLERS[_kind] = _scalar_type(_kind)


def _text(tx: Context, args: list[Value], kwargs: dict[str, Value], fn: Any = None) -> Value:
    if len(args) == 1 and isinstance(args[0], ExceptionValue) and fn is repr:
        return text_of_exception(args[0], repr)
    args = [specialised_int(a) for a in args]  # (the text of a symbolic number: its value)
    return text_call(tx, fn, args, kwargs, _fold_call)


_HANDLERS[builtins.repr] = functools.partial(_text, fn=repr)
_HANDLERS[builtins.format] = functools.partial(_text, fn=format)  # (one model for both)


# ----------------------------------------------------------------- containers and iteration
@handles(builtins.range)
def _range(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return _fold_call(tx, range, args, kwargs)


def _one_iterable(name: str, args: list[Value], kwargs: dict[str, Value]) -> None:
    """Python's errors for ``tuple``/``list``/``set`` called with more than an iterable."""
    if kwargs:
        raise python_error(TypeError, f"{name}() takes no keyword arguments")
    if len(args) > 1:
        raise python_error(TypeError, f"{name} expected at most 1 argument, got {len(args)}")


@handles(builtins.tuple)
def _tuple(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    _one_iterable("tuple", args, kwargs)
    if args and isinstance(args[0], TupleValue) and args[0].python_type() is tuple:
        return args[0]  # tuple(t) is t itself, for an exact tuple
    return TupleValue(args[0].collect(tx) if args else [])


@handles(builtins.list)
def _list(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    _one_iterable("list", args, kwargs)
    return ListValue(args[0].collect(tx) if args else [])


@handles(builtins.set)
def _set(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return new_set(tx, args, kwargs, frozen=False)


def new_set(
    tx: Context, args: list[Value], kwargs: dict, *, frozen: bool, kind: type | None = None
) -> SetValue:
    """``set(x)``/``frozenset(x)`` (or ``kind(x)``, a subclass defining nothing): the key mirror
    is made by the same real construction, so it iterates in Python's order."""
    _one_iterable("frozenset" if frozen else "set", args, kwargs)
    kind = kind or (frozenset if frozen else set)
    if not args:
        return SetValue({}, frozen, order=kind())
    arg = args[0]
    if isinstance(arg, SetValue):
        return SetValue(dict(arg.members), frozen, order=kind(arg.order))
    if isinstance(arg, ConstantValue):
        items = list(arg.value)
        return SetValue({v: ConstantValue(v) for v in items}, frozen, order=kind(arg.value))
    values = tx.unpack(arg)
    keys = [v.hash_key(tx) for v in values]
    members: dict[Any, Value] = {}
    for k, v in zip(keys, values):
        members.setdefault(k, v)
    order = kind(dict.fromkeys(keys)) if isinstance(arg, DictValue) else kind(keys)
    return SetValue(members, frozen, order=order)


_HANDLERS[builtins.frozenset] = functools.partial(new_set, frozen=True)


def _dict_factory(cls: type) -> Handler:
    def handler(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        out = DictValue({}, cls=cls)
        if args:
            out.update_from(
                tx, tx.as_mapping(args[0]) if isinstance(args[0], DictValue) else args[0]
            )
        for k, v in kwargs.items():
            out.setitem(tx, ConstantValue(k), v)
        return out

    return handler


_HANDLERS[builtins.dict] = _dict_factory(dict)
_HANDLERS[collections.OrderedDict] = _dict_factory(collections.OrderedDict)


@handles(dict.fromkeys)
def _fromkeys(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    value = args[1] if len(args) > 1 else ConstantValue(None)
    return DictValue.from_pairs(tx, [(k, value) for k in tx.unpack(args[0])])


@handles(builtins.object)
def _object(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return NewObjectValue(object)


_OPERATORS: dict[Any, Handler] = {}
