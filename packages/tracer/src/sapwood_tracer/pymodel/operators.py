"""Python operators over values: arithmetic, comparisons, identity, containment, subscripts.

Dispatch order mirrors Python's: tensors go to the graph (their ``__op__`` wins or is
reflected exactly as torch does it); containers implement their own operators; constants are
folded; user objects get their dunder methods inlined (with the reflected fallback on
``NotImplemented``). Anything else is refused.
"""

from __future__ import annotations

import collections
import operator
import types
from typing import Any

from ..errors import Unsupported
from ..foreign import numpy_errors_raise
from ..values.attributes import class_attribute, lookup_mro
from ..values.base import (
    BoundBuiltinMethod,
    ConstantValue,
    Context,
    Value,
    answers_not_implemented,
    folds_for_real,
    holds_user_enum,
)
from ..values.containers import DictValue, ListValue, TupleValue
from ..values.exceptions import python_error, raised_for_real
from ..values.functions import BoundMethodValue
from ..values.identity import same_object
from ..values.ndarrays import NdarrayValue, numpy_operator
from ..values.objects import NewObjectValue, ObjectValue
from ..values.sets import INPLACE_OPS, SetValue
from ..values.symbolic import (
    SizeValue,
    SymNumberValue,
    size_binary,
    symbolic_binary,
    symbolic_unary,
)
from ..values.tensors import TensorValue
from ..values.tuple_identity import concatenated, repeated
from .operator_names import DUNDER as _DUNDER
from .operator_names import INPLACE_DUNDER as _INPLACE_DUNDER
from .operator_names import INPLACE_TO_BINARY as _INPLACE_TO_BINARY
from .operator_names import UNARY_DUNDER as _UNARY_DUNDER
from .overriding_tensors import OverridingTensorValue
from .torch_function_protocol import overriding_operator

__all__ = ["BINARY", "COMPARE", "INPLACE", "binary", "compare", "unary"]

BINARY: dict[str, Any] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
    "@": operator.matmul,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "<<": operator.lshift,
    ">>": operator.rshift,
}
INPLACE: dict[str, Any] = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "@=": operator.imatmul,
    "&=": operator.iand,
    "|=": operator.ior,
    "^=": operator.ixor,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
}
COMPARE: dict[str, Any] = {
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
}


def _is_tensor(v: Value) -> bool:
    return isinstance(v, TensorValue)


def _fold(fn: Any, *values: Value) -> Value:
    constants = [v.as_constant() for v in values]
    try:
        with numpy_errors_raise(constants):
            return ConstantValue(fn(*constants))
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise raised_for_real(exc, f"{getattr(fn, '__name__', fn)} on constants") from exc


def binary(tx: Context, fn: Any, a: Value, b: Value) -> Value:
    """``fn(a, b)`` for a binary or in-place operator function ``fn`` of :mod:`operator`."""
    if isinstance(a, OverridingTensorValue) or isinstance(b, OverridingTensorValue):
        return overriding_operator(tx, fn, a, b)  # (through their __torch_function__)
    original = fn
    base = _INPLACE_TO_BINARY.get(fn)
    if base is not None and not _is_tensor(a) and _is_tensor(b):
        # `n += t` with a Python number n: numbers have no in-place operator, so Python
        # falls back to `n + t` (the tensor's reflected operator)
        fn = base
    if isinstance(a, NdarrayValue) or isinstance(b, NdarrayValue):
        return numpy_operator(tx, original, [a, b])
    if _is_tensor(a) or _is_tensor(b):
        return tx.graph.call_function(tx, fn, [a, b], {})
    if isinstance(a, SymNumberValue) or isinstance(b, SymNumberValue):
        return symbolic_binary(tx, fn, a, b)
    if isinstance(a, SizeValue) or isinstance(b, SizeValue):
        return size_binary(tx, _INPLACE_TO_BINARY.get(fn, fn), a, b)
    if (
        _subclass_container(a)
        or _subclass_container(b)
        or (base is not None and isinstance(a, (ObjectValue, NewObjectValue)))
    ):
        # a subclass of a builtin container written in Python (``Counter``, ...): its own
        # operator methods come before the builtin container's; ``obj += x``: ``__iadd__``
        result = _python_operator(tx, fn, a, b)
        if result is not None:
            return result
    if base is not None:
        if isinstance(a, ListValue) and fn is operator.iadd:
            a.check_mutable(tx)
            a.items.extend(b.unpack(tx))
            return a
        if isinstance(a, ListValue) and fn is operator.imul:
            a.check_mutable(tx)
            a.items[:] = a.items * b.as_constant()
            return a
        if isinstance(a, DictValue) and isinstance(b, DictValue) and fn is operator.ior:
            a.check_mutable(tx)
            a.update_from(tx, b)
            return a
        if isinstance(a, DictValue) and fn is operator.ior and a.cls.__ior__ in _DICT_IORS:
            # ``d |= pairs``: dict's in-place or takes what update() takes
            a.call_method(tx, "update", [b], {})
            return a
        if (
            isinstance(a, SetValue)
            and isinstance(b, SetValue)
            and base in _SET_OPS
            and not a.frozen
        ):
            return _set_inplace(tx, fn, a, b)
        fn = base
    if isinstance(a, (TupleValue, ListValue)) or isinstance(b, (TupleValue, ListValue)):
        result = _sequence_op(tx, fn, a, b)
        if result is not None:
            return result
    if isinstance(a, DictValue) and isinstance(b, DictValue) and fn is operator.or_:
        if b.cls is not a.cls and issubclass(b.cls, a.cls) and b.cls.__ror__ is not a.cls.__ror__:
            raise Unsupported(f"{b.cls.__qualname__}.__ror__ (a subclass's reflected |)")
        out = DictValue(dict(a.entries), cls=a.copy_class())
        out.update_from(tx, b)
        return out
    if isinstance(a, SetValue) and isinstance(b, SetValue):
        return _fold_set(tx, fn, a, b)
    if fn in (operator.eq, operator.ne) and (isinstance(a, _METHODS) or isinstance(b, _METHODS)):
        same = _same_method(tx, a, b)
        return ConstantValue(same if fn is operator.eq else not same)
    mismatch = _set_operand_mismatch(original, a, b)
    if mismatch is not None:  # (before folding: its message would name `|`, not `|=`)
        raise python_error(TypeError, mismatch)
    if a.is_constant() and b.is_constant() and _foldable(a) and _foldable(b):
        if not (_runs_user_enum_code(fn, a) or _runs_user_enum_code(fn, b)):
            return _fold(fn, a, b)
        raise Unsupported(f"the operator {_op_name(fn)} on {a.describe()} and {b.describe()}")
    user = _user_dunder(tx, fn, a, b)
    if user is not None:
        return user
    declined = _declined_by_both(original, a, b)
    if declined is not None:
        raise python_error(TypeError, declined)
    raise Unsupported(f"the operator {_op_name(fn)} on {a.describe()} and {b.describe()}")


#: numbers whose operator methods return NotImplemented for an instance of a plain class
_PLAIN_NUMBERS = (int, float, complex, bool, type(None))
_SYMBOLS = {fn: symbol for symbol, fn in [*BINARY.items(), *INPLACE.items(), *COMPARE.items()]}


def _declined_by_both(fn: Any, a: Value, b: Value) -> str | None:
    """Python's TypeError for ``fn(a, b)`` where one operand is an instance of a plain class
    (every class of its MRO written in Python but object) whose methods declined it (see
    :func:`_user_dunder`) and the other a number or None constant, whose methods return
    NotImplemented for such an object; None elsewhere."""
    symbol = _SYMBOLS.get(fn)
    if symbol is None or fn in (operator.eq, operator.ne) or symbol.startswith("**"):
        return None
    plain = [v for v in (a, b) if isinstance(v, (ObjectValue, NewObjectValue))]
    numbers = [v for v in (a, b) if v.is_constant() and type(v.as_constant()) in _PLAIN_NUMBERS]
    if len(plain) != 1 or len(numbers) != 1:
        return None
    if not all(k is object or k.__module__ != "builtins" for k in plain[0].python_type().__mro__):
        return None
    names = (f"'{a.python_type().__name__}'", f"'{b.python_type().__name__}'")
    if fn in _COMPARISONS:
        return f"'{symbol}' not supported between instances of {names[0]} and {names[1]}"
    return f"unsupported operand type(s) for {symbol}: {names[0]} and {names[1]}"


_SET_SYMBOLS = {operator.or_: "|", operator.and_: "&", operator.sub: "-", operator.xor: "^"}


def _set_operand_mismatch(fn: Any, a: Value, b: Value) -> str | None:
    """Python's message where a set operator (``|``, ``&``, ``-``, ``^``, in place or not)
    has a set on one side and, on the other, an object of a builtin type that defines
    neither the operator nor its reflection (a generator, a list): the set's own method
    returns NotImplemented for anything but a set, so Python raises TypeError."""
    base = _INPLACE_TO_BINARY.get(fn, fn)
    symbol = _SET_SYMBOLS.get(base)
    if symbol is None or isinstance(a, SetValue) == isinstance(b, SetValue):
        return None
    other = (b if isinstance(a, SetValue) else a).python_type()
    if other.__module__ != "builtins" or any(lookup_mro(other, n)[0] for n in _DUNDER[base]):
        return None  # (looked up on the type's MRO: ``type.__or__`` makes ``list | None``)
    symbol += "=" if base is not fn else ""
    kinds = f"'{a.python_type().__name__}' and '{b.python_type().__name__}'"
    return f"unsupported operand type(s) for {symbol}: {kinds}"


_SET_OPS = (operator.or_, operator.and_, operator.sub, operator.xor)
#: in-place ``|`` of dict and OrderedDict: update() with the other operand
_DICT_IORS = (dict.__ior__, collections.OrderedDict.__ior__)


def _set_inplace(tx: Context, fn: Any, a: SetValue, b: SetValue) -> SetValue:
    """``a |= b`` (and ``&=``, ``-=``, ``^=``) on a set: the real in-place operation on the key
    sets; on a set from the inputs it is replayed on the real set after the graph."""

    def change() -> SetValue:
        fn(a.order, b.order)
        merged = {**b.members, **a.members}
        a.members = {k: merged[k] for k in a.order}
        return a

    if a.source is not None:
        return a.mutate_input(tx, INPLACE_OPS[fn], [b], change)
    if not b.order_known:
        a.order_known = False
    return change()


_METHODS = (BoundBuiltinMethod, BoundMethodValue)


def _same_method(tx: Context, a: Value, b: Value) -> bool:
    """``a == b`` where one is a bound method: Python compares the objects they are bound to
    by identity and their functions (each read of ``obj.f`` is a new method object, so
    ``is`` differs but ``==`` holds)."""
    if isinstance(a, BoundBuiltinMethod) and isinstance(b, BoundBuiltinMethod):
        return a.name == b.name and same_object(tx, a.receiver, b.receiver)
    if isinstance(a, BoundMethodValue) and isinstance(b, BoundMethodValue):
        return same_object(tx, a.receiver, b.receiver) and same_object(tx, a.function, b.function)
    if isinstance(a, _METHODS) and isinstance(b, _METHODS):
        return False  # a builtin's method and a Python function's: different functions
    other = b if isinstance(a, _METHODS) else a
    if isinstance(other, ConstantValue):
        return False
    raise Unsupported(f"comparing {a.describe()} with {b.describe()}")


def _runs_user_enum_code(fn: Any, v: Value) -> bool:
    """Whether ``fn`` on the constant ``v`` for real could run Python code of an enum class of
    the user's: ``v`` holds a member of such a class, and the operator's methods on it are
    Python code (``%`` formatting calls its ``__str__``, ``__format__``, ...)."""
    value = v.as_constant()
    if not holds_user_enum(value):
        return False
    names = _DUNDER.get(fn)
    if names is None or fn is operator.mod or isinstance(value, tuple):
        return True
    return not all(folds_for_real(value, name) for name in names)


def _foldable(v: Value) -> bool:
    return isinstance(v, (ConstantValue, TupleValue)) or v.is_constant()


def _op_name(fn: Any) -> str:
    return getattr(fn, "__name__", str(fn))


def _sequence_op(tx: Context, fn: Any, a: Value, b: Value) -> Value | None:
    if fn is operator.add and type(a) is type(b) is ListValue:
        return ListValue(a.items + b.items)  # type: ignore[attr-defined]
    if fn is operator.add and isinstance(a, TupleValue) and isinstance(b, TupleValue):
        return concatenated(a, b)
    if fn is operator.mul:
        seq, n = (a, b) if isinstance(a, (TupleValue, ListValue)) else (b, a)
        if n.is_constant() and isinstance(n.as_constant(), int):
            if isinstance(seq, TupleValue):
                return repeated(seq, n.as_constant())
            return ListValue(seq.items * n.as_constant())  # type: ignore[attr-defined]
    if fn in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge):
        if a.is_constant() and b.is_constant():
            return _fold(fn, a, b)
        # a list or tuple against another builtin type: both sides' __eq__ give
        # NotImplemented, so identity decides (two objects: unequal)
        ta, tb = a.python_type(), b.python_type()
        mixed = ta is not tb and ta in _PLAIN_EQ and tb in _PLAIN_EQ
        if fn in (operator.eq, operator.ne) and mixed and (ta in _SEQS or tb in _SEQS):
            return ConstantValue(fn is operator.ne)
    return None


_SEQS = (list, tuple)
#: builtin types whose ``==`` with a list or tuple is NotImplemented (no subclasses)
_PLAIN_EQ = (list, tuple, int, float, complex, str, bytes, bool, type(None))


def _fold_set(tx: Context, fn: Any, a: SetValue, b: SetValue) -> Value:
    if fn in (operator.or_, operator.and_, operator.sub, operator.xor):
        return a.combine(tx, fn, b)
    if fn in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge):
        # two keys are equal exactly when Python finds the members equal: the key sets
        # compare as the sets do
        return ConstantValue(fn(a.order, b.order))
    raise Unsupported(f"the operator {_op_name(fn)} on sets")


_CONTAINERS = (DictValue, ListValue, TupleValue, SetValue)
_BUILTIN_CONTAINERS = (dict, list, tuple, set, frozenset)


def _subclass_container(v: Value) -> bool:
    return isinstance(v, _CONTAINERS) and v.python_type() not in _BUILTIN_CONTAINERS


def _python_method(tx: Context, receiver: Value, name: str) -> Value | None:
    """``receiver.name`` bound, where a class written in Python defines it (before any
    builtin class of the MRO); None otherwise."""
    cls = receiver.python_type()
    klass, raw = lookup_mro(cls, name)
    if klass is None or not isinstance(raw, types.FunctionType):
        return None
    return class_attribute(tx, cls, name, receiver)


def _python_operator(tx: Context, fn: Any, a: Value, b: Value) -> Value | None:
    """``fn(a, b)`` where an operand's class defines the operator in Python: its methods
    inlined in Python's order (in-place, forward, reflected; a subclass's reflected one
    first). None where neither does; refused where Python would go on to a builtin's."""
    base = _INPLACE_TO_BINARY.get(fn)
    if base is not None:
        inplace = _python_method(tx, a, _INPLACE_DUNDER[fn])
        if inplace is not None:
            result = tx.call(inplace, [b], {})
            if not answers_not_implemented(result):
                return result
        elif lookup_mro(a.python_type(), _INPLACE_DUNDER[fn])[0] not in (None, object):
            return None  # a builtin in-place method (``list.__iadd__``): the model's
        fn = base
    names = _DUNDER.get(fn)
    if names is None:
        return None
    ta, tb = a.python_type(), b.python_type()
    forward = _python_method(tx, a, names[0])
    reflected = _python_method(tx, b, names[1]) if ta is not tb or fn in _SWAPPED else None
    if forward is None and reflected is None:
        return None
    order = [(forward, b), (reflected, a)]
    if reflected is not None and tb is not ta and issubclass(tb, ta):
        order.reverse()  # a subclass's reflected operator goes first
    for method, other in order:
        if method is None:
            continue
        result = tx.call(method, [other], {})
        if not answers_not_implemented(result):
            return result
    raise Unsupported(
        f"the operator {_op_name(fn)} on {a.describe()} and {b.describe()}, whose methods "
        "written in Python return NotImplemented"
    )


#: comparisons whose reflection is another method of the same class (``a < b`` is ``b > a``)
_SWAPPED = frozenset({operator.lt, operator.le, operator.gt, operator.ge})


#: object's comparison methods that return NotImplemented for any other object (object's
#: ``__ne__`` is not one: it inverts ``__eq__``)
_OBJECTS_NOT_IMPLEMENTED = frozenset({"__eq__", "__lt__", "__le__", "__gt__", "__ge__"})


_COMPARISONS = frozenset(
    {operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge}
)


def _same_class(a: Value, b: Value) -> bool:
    users = (ObjectValue, NewObjectValue)
    return isinstance(a, users) and isinstance(b, users) and a.python_type() is b.python_type()


def _user_dunder(tx: Context, fn: Any, a: Value, b: Value) -> Value | None:
    names = _DUNDER.get(fn)
    if names is None:
        return None
    order = ((a, b, names[0]), (b, a, names[1]))
    if _reflected_first(a, b, names[1]):
        order = (order[1], order[0])
    for receiver, other, name in order:
        if name == names[1] and fn not in _COMPARISONS and _same_class(a, b):
            continue  # (Python reflects an arithmetic operator only between two classes)
        if isinstance(receiver, (ObjectValue, NewObjectValue)):
            cls = receiver.python_type()
            if name in _OBJECTS_NOT_IMPLEMENTED and lookup_mro(cls, name)[0] is object:
                continue  # object's own: NotImplemented (identity decides ==, below)
            method = class_attribute(tx, cls, name, receiver)
            if method is None:
                continue
            result = tx.call(method, [other], {})
            if answers_not_implemented(result):
                continue
            return result
    if fn in (operator.eq, operator.ne):
        equal = _containers_equal(tx, a, b)
        if equal is None:
            equal = same_object(tx, a, b)
        return ConstantValue(equal if fn is operator.eq else not equal)
    return None


def _items_equal(tx: Context, x: Value, y: Value) -> bool:
    """Whether two items of containers are equal, as Python compares them (identity first).
    Two tuples whose identity is not known compare item by item: were they one tuple, each
    item would meet itself, so the answer is the same."""
    if isinstance(x, TupleValue) and isinstance(y, TupleValue):
        return tx.truth(binary(tx, operator.eq, x, y))
    return same_object(tx, x, y) or tx.truth(binary(tx, operator.eq, x, y))


def _containers_equal(tx: Context, a: Value, b: Value) -> bool | None:
    """``a == b`` for two builtin lists or tuples of the same type, or two dicts whose classes
    keep dict's ``==``, whose items are not all constants: item by item, as Python compares
    them; None for any other pair."""
    if isinstance(a, DictValue) and isinstance(b, DictValue):
        # dict's own == (a subclass that keeps it, as defaultdict does, compares with a dict)
        if a.python_type().__eq__ is not dict.__eq__ or b.python_type().__eq__ is not dict.__eq__:
            return None
        if len(a.entries) != len(b.entries):
            return False
        for key, (_, value) in a.entries.items():
            other = b.entries.get(key)
            if other is None or not _items_equal(tx, value, other[1]):
                return False
        return True
    kind = a.python_type()
    if kind is not b.python_type():
        return None
    if kind in (list, tuple):
        items_a, items_b = _sequence_items(a), _sequence_items(b)
        if items_a is None or items_b is None:
            return None
        if len(items_a) != len(items_b):
            return False
        return all(_items_equal(tx, x, y) for x, y in zip(items_a, items_b))
    return None


def _sequence_items(v: Value) -> list[Value] | None:
    """The items of a list or tuple value, or of a constant one (None for anything else)."""
    if isinstance(v, (ListValue, TupleValue)):
        return list(v.items)
    if isinstance(v, ConstantValue) and type(v.as_constant()) in _SEQS:
        return [ConstantValue(item) for item in v.as_constant()]
    return None


def _reflected_first(a: Value, b: Value, reflected: str) -> bool:
    """Python tries ``b``'s reflected method first when ``b``'s class is a proper subclass
    of ``a``'s that overrides it."""
    if not isinstance(a, (ObjectValue, NewObjectValue)):
        return False
    if not isinstance(b, (ObjectValue, NewObjectValue)):
        return False
    ta, tb = a.python_type(), b.python_type()
    return (
        tb is not ta
        and issubclass(tb, ta)
        and getattr(tb, reflected, None) is not getattr(ta, reflected, None)
    )


def unary(tx: Context, fn: Any, a: Value) -> Value:
    if isinstance(a, OverridingTensorValue) and fn is not operator.not_:
        return overriding_operator(tx, fn, a)
    if isinstance(a, NdarrayValue) and fn is not operator.not_:
        return numpy_operator(tx, fn, [a])
    if _is_tensor(a):
        return tx.graph.call_function(tx, fn, [a], {})
    if isinstance(a, SymNumberValue):
        return symbolic_unary(tx, fn, a)
    if fn is operator.not_:
        return ConstantValue(not tx.truth(a))
    name = _UNARY_DUNDER.get(fn)
    method = _python_method(tx, a, name) if name is not None else None
    if method is not None:  # ``-counter``, ``~obj``: the class's own method, inlined
        return tx.call(method, [], {})
    if a.is_constant():
        return _fold(fn, a)
    raise Unsupported(f"the operator {_op_name(fn)} on {a.describe()}")


def compare(tx: Context, op: str, a: Value, b: Value) -> Value:
    return binary(tx, COMPARE[op], a, b)


def contains(tx: Context, container: Value, item: Value) -> bool:
    if _is_tensor(container):
        raise Unsupported("'in' on a tensor (data-dependent)")
    return container.contains(tx, item)
