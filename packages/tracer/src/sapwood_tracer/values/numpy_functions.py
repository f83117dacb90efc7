"""numpy's scalar functions on constants: ``np.sqrt(d)``, ``np.float32(0.5)``, ``np.log2(n)``.

A model attribute such as ``self.scale = np.sqrt(head_dim)`` or a closure constant
``np.int64(3)`` is a numpy scalar (a constant, see :func:`~sapwood_tracer.foreign.is_numpy_scalar`):
immutable, and every operation on it is numpy's C code. Calling a numpy ufunc or a numpy scalar
type on numbers known at trace time (Python numbers and numpy scalars, no keywords) gives the
same scalar on every call, so it is computed once, while tracing, under
:func:`~sapwood_tracer.foreign.numpy_errors_raise`: where numpy would warn (overflow, division by
zero), the call runs eagerly instead. A call given an array or a tensor is compiled through
torch._numpy, checked against numpy (see :mod:`sapwood_tracer.values.ndarrays`). Anything
else (keyword arguments on numbers, a result that is not a numpy scalar, numpy's other
functions on numbers) is a graph break with its reason.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from ..errors import Unsupported
from ..foreign import is_numpy_scalar, numpy_errors_raise
from .base import BuiltinValue, ConstantValue, Context, Value
from .containers import ListValue, TupleValue
from .exceptions import raised_for_real
from .ndarrays import NdarrayValue, call_numpy
from .tensors import TensorValue

__all__ = [
    "NumpyFunctionValue",
    "calls_numpy_on_numbers",
    "is_numpy_api",
    "is_numpy_function",
    "on_arrays",
]

_NUMBERS = (int, float, bool, complex)


def is_numpy_function(obj: Any) -> bool:
    """A numpy ufunc (``np.sqrt``) or scalar type (``np.float32``)."""
    np = sys.modules.get("numpy")
    if np is None:
        return False
    if type(obj) is np.ufunc:
        return True
    return isinstance(obj, type) and issubclass(obj, (np.number, np.bool_))


def is_numpy_api(obj: Any) -> bool:
    """A function of numpy's API that is not a class: a ufunc, an array function
    (``np.mean``, ``np.linalg.norm``) or one of numpy's C functions (``np.asarray``)."""
    np = sys.modules.get("numpy")
    if np is None or isinstance(obj, type):
        return False
    if type(obj) is np.ufunc or type(obj).__name__ == "_ArrayFunctionDispatcher":
        return True
    module = getattr(obj, "__module__", None)
    return (
        isinstance(obj, types.BuiltinFunctionType)
        and isinstance(module, str)
        and module.split(".")[0] == "numpy"
    )


def on_arrays(values: list[Value]) -> bool:
    """Whether a numpy call is given an array or a tensor (also in a tuple or list)."""
    for v in values:
        if isinstance(v, (NdarrayValue, TensorValue)):
            return True
        if isinstance(v, (TupleValue, ListValue)) and on_arrays(v.items):
            return True
    return False


def _number(value: Value) -> bool:
    if not value.is_constant():
        return False
    const = value.as_constant()
    return type(const) in _NUMBERS or is_numpy_scalar(const)


def calls_numpy_on_numbers(fn: Any, args: list[Value], kwargs: dict[str, Value]) -> bool:
    """Whether ``fn(*args, **kwargs)`` is a numpy ufunc or scalar type on constant numbers."""
    return is_numpy_function(fn) and not kwargs and bool(args) and all(_number(a) for a in args)


def fold_numpy_call(fn: Any, args: list[Value]) -> Value:
    """``fn(*args)`` computed now, for a call :func:`calls_numpy_on_numbers` accepted."""
    constants = [a.as_constant() for a in args]
    name = f"numpy.{getattr(fn, '__name__', fn)}"
    try:
        with numpy_errors_raise(constants):
            result = fn(*constants)
    except Exception as exc:
        raise raised_for_real(exc, name) from exc
    if not is_numpy_scalar(result):
        raise Unsupported(f"{name} giving a {type(result).__qualname__}, not a numpy scalar")
    return ConstantValue(result)


class NumpyFunctionValue(BuiltinValue):
    """A numpy ufunc read by the program (the scalar types are classes, built through
    ``construct``): called on numbers, folded; otherwise a graph break. Elsewhere (handed
    over at a break, compared, hashed) it is the C callable it is, as any builtin."""

    __slots__ = ()

    def describe(self) -> str:
        return f"numpy.{getattr(self.fn, '__name__', '?')}"

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if on_arrays([*args, *kwargs.values()]):
            return call_numpy(tx, self.fn, args, kwargs)
        if not calls_numpy_on_numbers(self.fn, args, kwargs):
            what = ", ".join(a.describe() for a in [*args, *kwargs.values()])
            raise Unsupported(f"calling {self.describe()} on {what or 'nothing'}")
        return fold_numpy_call(self.fn, args)

    def getattr(self, tx: Context, name: str) -> Value:
        if name in ("__name__", "__qualname__", "nin", "nout", "nargs", "identity"):
            return ConstantValue(getattr(self.fn, name))
        raise Unsupported(f"attribute {name!r} of {self.describe()}")
