"""Functions that take integers through ``__index__``: ``math.gcd``, ``lcm``, ``isqrt``,
``factorial``, ``comb``, ``perm`` and ``operator.index``, on objects of the user's classes.

CPython converts each argument of these functions with ``PyNumber_Index``, one after the
other, left to right: an ``int`` (or a subclass) as it is, any other object through its
type's ``__index__``. Here an argument of a plain Python class whose ``__index__`` is a
Python function is converted by inlining that method; the call itself is then folded on the
integers, as on constant arguments (:mod:`.builtins`).

Invariants:

* Arguments are converted in CPython's order, and the conversion stops at the first argument
  CPython refuses (a ``float``, a ``str``): the ``__index__`` of a later argument never runs,
  and the folded call raises CPython's own ``TypeError`` for the refused one.
* ``__index__`` must return an exact ``int``: another type is CPython's ``TypeError``
  (``__index__ returned non-int``); a strict subclass of ``int`` (CPython accepts it with a
  ``DeprecationWarning``) and a result the trace does not know are refused (a graph break).
* A symbolic ``int`` argument, or an ``__index__`` returning one, is specialised (guarded on
  its value) as for every folded builtin.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from ..errors import Unsupported
from ..values.attributes import has_python_special
from ..values.base import ConstantValue, Context, Value
from ..values.objects import NewObjectValue, ObjectValue
from ..values.slot_results import checked, inline_special
from ..values.symbolic import specialised_int
from .builtins import _OPERATORS, Handler, _fold_call, handles

__all__ = ["index_value"]

#: the functions whose arguments all go through ``PyNumber_Index`` (``perm``'s optional
#: ``k`` may be None, which the folded call accepts as CPython does)
_INDEX_FUNCTIONS = (math.gcd, math.lcm, math.isqrt, math.factorial, math.comb, math.perm)


def index_value(tx: Context, value: Value) -> Value | None:
    """``value`` as ``PyNumber_Index`` makes it an int, as a constant; None where the trace
    cannot tell (a constant CPython refuses is returned as it is, for the folded call to
    refuse)."""
    value = specialised_int(value)
    if value.is_constant():
        return value
    if not isinstance(value, (ObjectValue, NewObjectValue)):
        return None
    cls = value.python_type()
    if not has_python_special(cls, "__index__"):
        return None
    return ConstantValue(checked(tx, "__index__", inline_special(tx, value, "__index__"), cls))


def _accepted(constant: Any) -> bool:
    """Whether ``PyNumber_Index`` takes this constant (an int, or a type with ``__index__``)."""
    return hasattr(type(constant), "__index__")


def _through_index(fn: Any) -> Handler:
    def handler(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        converted: list[Value] = []
        for position, arg in enumerate(args):
            as_int = index_value(tx, arg)
            if as_int is None:
                raise Unsupported(f"math.{fn.__name__} of {arg.describe()}")
            converted.append(as_int)
            if not _accepted(as_int.as_constant()):
                # CPython refuses this argument before converting the next ones: they stand
                # as zeros, which only keep the count of arguments the same
                converted += [ConstantValue(0)] * (len(args) - position - 1)
                break
        kwargs = {name: specialised_int(v) for name, v in kwargs.items()}
        if not all(v.is_constant() for v in kwargs.values()):
            raise Unsupported(f"math.{fn.__name__} with non-constant keyword arguments")
        return _fold_call(tx, fn, converted, kwargs)

    return handler


for _fn in _INDEX_FUNCTIONS:
    handles(_fn)(_through_index(_fn))


def _operator_index(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    # (the operator table checks the number of arguments first)
    as_int = index_value(tx, args[0])
    if as_int is None:
        raise Unsupported(f"operator.index of {args[0].describe()}")
    return _fold_call(tx, operator.index, [as_int], {})


_OPERATORS[operator.index] = _operator_index
