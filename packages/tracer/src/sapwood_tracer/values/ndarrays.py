"""numpy arrays of tensors: ``t.numpy()``, numpy's functions, methods and operators on the
arrays, and ``torch.from_numpy`` back.

An array made in the trace stands for a tensor of the graph (``t.numpy()`` shares ``t``'s
memory, as numpy's array does). Its operations are torch._numpy's, torch's implementation of
numpy's API on tensors: each numpy call is one node of the graph, whose target turns its
tensor arguments into torch._numpy arrays, calls torch._numpy's counterpart and turns the
arrays it gives back into tensors. Backends see torch operations (AOT autograd traces through
the node); the eager backend calls it as it is.

torch._numpy is not numpy, and differs in places (an int64 array divided by 2 is float32
there, float64 in numpy; a 0-d result is an array where numpy gives a scalar). So each call
is also made by numpy itself, while tracing, on stand-ins of its arguments with the same
shapes and dtypes (read-only zeros that take no memory; tensors as zero tensors, so numpy's
handling of them is its own). The call is a graph break, with its reason, where:

* numpy's result differs from torch._numpy's in kind, container, shape or dtype;
* numpy raises on the stand-ins: a call that writes into an array argument does, the
  stand-ins being read-only, so in-place numpy is never compiled;
* an argument has more than :data:`MAX_STAND_IN` elements, or a symbolic size, or a dtype
  numpy lacks; or the installed numpy is older than 2 (whose result dtypes depend on values).

A 0-d result numpy gives as a scalar (``np.sum(a)``, ``a[0, 0]``) is a numpy scalar here,
rebuilt as ``array[()]`` when it leaves the graph; arrays leave it as ``tensor.numpy()``.
Writing into an array, branching on its values and iterating over it are graph breaks.
"""

from __future__ import annotations

import functools
import importlib
import operator
import warnings
from typing import Any

import torch

from ..errors import Unsupported
from .base import ConstantValue, Context, Value
from .containers import ListValue, SliceValue, TupleValue
from .symbolic import has_symbolic_shape
from .tensors import METHODS_MODELLED_ELSEWHERE, TensorValue

__all__ = [
    "MAX_STAND_IN",
    "NdarrayValue",
    "array_of_tensor",
    "call_numpy",
    "numpy_operator",
    "tensor_of_array",
]

#: the most elements an argument may have for numpy's check to stand in for it
MAX_STAND_IN = 1 << 20


@functools.cache
def _numpy() -> Any:
    try:
        np = importlib.import_module("numpy")
    except ImportError:
        raise Unsupported("a numpy array (numpy is not installed)") from None
    if int(np.__version__.split(".")[0]) < 2:
        raise Unsupported(f"numpy arrays with numpy {np.__version__} (sapwood needs numpy 2)")
    return np


def _tnp() -> Any:
    return importlib.import_module("torch._numpy")


def numpy_dtype(dtype: torch.dtype) -> Any:
    """numpy's dtype for a torch dtype, or None where numpy has none (bfloat16, float8)."""
    np = _numpy()
    try:
        return np.dtype(str(dtype).removeprefix("torch."))
    except TypeError:
        return None


def _checked_layout(fake: torch.Tensor, what: str) -> Any:
    if has_symbolic_shape(fake):
        raise Unsupported(f"{what} of a tensor with symbolic sizes")
    dtype = numpy_dtype(fake.dtype)
    if dtype is None:
        raise Unsupported(f"{what} of a {str(fake.dtype).removeprefix('torch.')} tensor")
    if fake.numel() > MAX_STAND_IN:
        raise Unsupported(
            f"{what} of {fake.numel()} elements",
            hint=f"sapwood checks numpy calls on arrays of at most {MAX_STAND_IN} elements.",
        )
    return dtype


class NdarrayValue(Value):
    """A numpy array (or numpy scalar, ``scalar``) made in the trace: a tensor of the graph
    that numpy sees. ``exact_strides``: the array is ``t.numpy()`` itself, whose strides are
    the tensor's in bytes."""

    __slots__ = ("exact_strides", "scalar", "tensor")

    def __init__(self, tensor: TensorValue, *, scalar: bool = False, exact_strides: bool = False):
        super().__init__(None)
        self.tensor = tensor
        self.scalar = scalar
        self.exact_strides = exact_strides

    @property
    def dtype(self) -> Any:
        return numpy_dtype(self.tensor.fake.dtype)

    def describe(self) -> str:
        if self.scalar:
            return f"a numpy scalar ({self.dtype})"
        return f"a numpy array ({self.dtype}, {list(self.tensor.fake.shape)})"

    def python_type(self) -> type:
        return self.dtype.type if self.scalar else _numpy().ndarray  # type: ignore[no-any-return]

    def stand_in(self) -> Any:
        """A read-only array of zeros of this one's shape and dtype (no memory of its own)."""
        np = _numpy()
        if self.scalar:
            return self.dtype.type(0)
        return np.broadcast_to(np.zeros((), self.dtype), tuple(self.tensor.fake.shape))

    def getattr(self, tx: Context, name: str) -> Value:
        fake = self.tensor.fake
        shape = tuple(int(s) for s in fake.shape)
        if name in _METADATA:
            return ConstantValue(_METADATA[name](shape, self.dtype))
        if name == "strides":
            if self.scalar:
                return ConstantValue(())
            if not self.exact_strides:
                raise Unsupported("the strides of a numpy array computed in the compiled code")
            return ConstantValue(tuple(int(s) * fake.element_size() for s in fake.stride()))
        if name in _COMPUTED_ATTRIBUTES:
            return _record(
                tx,
                _attribute_target(name),
                _attribute_of(name),
                [self],
                {},
                f"numpy.ndarray.{name}",
            )
        np = _numpy()
        if callable(getattr(np.ndarray, name, None)) and hasattr(_tnp().ndarray, name):
            return NdarrayMethodValue(self, name)
        raise Unsupported(f"numpy.ndarray.{name} in compiled code")

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        raise Unsupported(f"assigning numpy.ndarray.{name}")

    def truth(self, tx: Context) -> bool:
        raise Unsupported("branching on a numpy array's value (data-dependent control flow)")

    def length(self, tx: Context) -> int:
        if self.scalar or self.tensor.fake.dim() == 0:
            raise Unsupported("len() of a numpy scalar or 0-d array (TypeError)")
        return int(self.tensor.fake.shape[0])

    def getitem(self, tx: Context, key: Value) -> Value:
        getitem = _operator_target(operator.getitem)
        return _record(tx, getitem, operator.getitem, [self, key], {}, "indexing a numpy array")

    def setitem(self, tx: Context, key: Value, value: Value) -> None:
        raise Unsupported("writing into a numpy array in compiled code")

    def iterate(self, tx: Context) -> Value:
        raise Unsupported("iterating over a numpy array in compiled code")

    def hash_key(self, tx: Context) -> Any:
        raise Unsupported(f"hashing {self.describe()}")


_METADATA: dict[str, Any] = {
    "shape": lambda shape, dtype: shape,
    "ndim": lambda shape, dtype: len(shape),
    "size": lambda shape, dtype: _product(shape),
    "itemsize": lambda shape, dtype: dtype.itemsize,
    "nbytes": lambda shape, dtype: _product(shape) * dtype.itemsize,
    "dtype": lambda shape, dtype: dtype,
}
#: array attributes that are arrays computed from the array (views or copies)
_COMPUTED_ATTRIBUTES = frozenset(["T", "real", "imag", "mT"])


def _product(shape: tuple[int, ...]) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


class NdarrayMethodValue(Value):
    """``array.method`` before it is called."""

    __slots__ = ("name", "receiver")

    def __init__(self, receiver: NdarrayValue, name: str) -> None:
        super().__init__(None)
        self.receiver = receiver
        self.name = name

    def describe(self) -> str:
        return f"numpy.ndarray.{self.name}"

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        name = self.name
        what = f"numpy.ndarray.{name}()"
        return _record(
            tx, _method_target(name), _method_of(name), [self.receiver, *args], kwargs, what
        )


# -- graph node targets --------------------------------------------------------------------
class _OnArrays:
    """The target of a numpy call's node: ``call`` on torch._numpy arrays of the tensor
    arguments, with the arrays it gives back turned into tensors."""

    def __init__(self, name: str, call: Any) -> None:
        self.__name__ = self.__qualname__ = f"numpy_{name}"
        self._call = call

    def __repr__(self) -> str:
        return f"<sapwood numpy call {self.__name__}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tnp = _tnp()
        arrays = _map(args, torch.Tensor, tnp.ndarray)
        out = self._call(*arrays, **_map(kwargs, torch.Tensor, tnp.ndarray))
        return _map(out, tnp.ndarray, lambda a: a.tensor)


def _map(value: Any, kind: type, convert: Any) -> Any:
    if isinstance(value, kind):
        return convert(value)
    if type(value) in (tuple, list):
        return type(value)(_map(v, kind, convert) for v in value)
    if type(value) is dict:
        return {k: _map(v, kind, convert) for k, v in value.items()}
    return value


_TARGETS: dict[Any, _OnArrays] = {}


def _target(key: Any, name: str, call: Any) -> _OnArrays:
    target = _TARGETS.get(key)
    if target is None:
        target = _TARGETS[key] = _OnArrays(name, call)
    return target


def _attribute_of(name: str) -> Any:
    return lambda obj: getattr(obj, name)


def _method_of(name: str) -> Any:
    return lambda obj, *args, **kwargs: getattr(obj, name)(*args, **kwargs)


def _attribute_target(name: str) -> _OnArrays:
    return _target(("attribute", name), name, _attribute_of(name))


def _method_target(name: str) -> _OnArrays:
    return _target(("method", name), name, _method_of(name))


def _operator_target(fn: Any) -> _OnArrays:
    return _target(fn, fn.__name__.strip("_"), fn)


_COUNTERPARTS: dict[int, tuple[Any, Any]] = {}


def _counterpart(fn: Any) -> Any:
    """torch._numpy's function for numpy's ``fn`` (by identity), or None."""
    if not _COUNTERPARTS:
        np, tnp = _numpy(), _tnp()
        for ours, theirs in ((np, tnp), (np.linalg, tnp.linalg), (np.fft, tnp.fft)):
            for name in dir(theirs):
                found = getattr(ours, name, None)
                if name.startswith("_") or found is None or isinstance(found, type):
                    continue
                if callable(found) and not isinstance(found, type(np)):
                    _COUNTERPARTS[id(found)] = (found, getattr(theirs, name))
    pair = _COUNTERPARTS.get(id(fn))
    return pair[1] if pair is not None and pair[0] is fn else None


# -- recording a call ----------------------------------------------------------------------
def _convert(tx: Context, value: Value) -> tuple[Value, Any, Any]:
    """``value`` as a graph argument, its stand-in for numpy's check, and its stand-in for
    a run of the node's target on real tensors (which finds kernels torch lacks)."""
    np = _numpy()
    if isinstance(value, NdarrayValue):
        fake = value.tensor.fake
        _checked_layout(fake, "a numpy call")
        return value.tensor, value.stand_in(), torch.zeros(tuple(fake.shape), dtype=fake.dtype)
    if isinstance(value, TensorValue):
        fake = value.fake
        if fake.device.type != "cpu" or fake.requires_grad or fake.layout != torch.strided:
            raise Unsupported(f"passing {value.describe()} to numpy (it converts it for real)")
        _checked_layout(fake, "a numpy call")
        zeros = torch.zeros(tuple(fake.shape), dtype=fake.dtype)
        return value, zeros, zeros.clone()
    if isinstance(value, SliceValue):
        parts = [_convert(tx, p) for p in value.parts]
        if not all(isinstance(g, ConstantValue) for g, _, _ in parts):
            raise Unsupported("a slice of values that are not constants, given to numpy")
        return value, slice(*(c for _, c, _ in parts)), slice(*(c for _, c, _ in parts))
    if isinstance(value, (TupleValue, ListValue)):
        items = [_convert(tx, v) for v in value.items]
        graph_items = [g for g, _, _ in items]
        if isinstance(value, ListValue):
            return ListValue(graph_items), [c for _, c, _ in items], [r for _, _, r in items]
        return TupleValue(graph_items), tuple(c for _, c, _ in items), tuple(r for _, _, r in items)
    if value.is_constant():
        const = value.as_constant()
        if isinstance(const, np.dtype) or (
            isinstance(const, type) and issubclass(const, np.generic)
        ):
            name = np.dtype(const).name
            return ConstantValue(name), const, name
        if const is None or const is Ellipsis or type(const) in (int, float, bool, complex, str):
            return ConstantValue(const), const, const
        if type(const) is tuple and all(type(c) in (int, bool) or c is None for c in const):
            return ConstantValue(const), const, const
    raise Unsupported(f"passing {value.describe()} to numpy in compiled code")


def _numpy_says(numpy_fn: Any, args: list[Any], kwargs: dict[str, Any], what: str) -> Any:
    np = _numpy()
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return numpy_fn(*args, **kwargs)
    except Exception as exc:
        raise Unsupported(
            f"{what} raising {type(exc).__name__} in numpy on stand-ins of its arguments ({exc})",
            hint="It writes into an array, or its result depends on the values.",
        ) from exc


def _mismatch(expected: Any, fake: Any) -> str | None:
    """How numpy's ``expected`` result differs from torch._numpy's fake one, or None."""
    np = _numpy()
    if isinstance(expected, (np.ndarray, np.generic)):
        if not isinstance(fake, torch.Tensor):
            return f"numpy gives an array where torch._numpy gives {type(fake).__name__}"
        if tuple(fake.shape) != tuple(expected.shape):
            return f"numpy gives shape {expected.shape}, torch._numpy {tuple(fake.shape)}"
        theirs = numpy_dtype(fake.dtype)
        if theirs != expected.dtype:
            return f"numpy gives {expected.dtype}, torch._numpy {theirs}"
        return None
    if type(expected) in (tuple, list) and type(fake) in (tuple, list):
        if len(expected) != len(fake):
            return f"numpy gives {len(expected)} results, torch._numpy {len(fake)}"
        for e, f in zip(expected, fake):
            found = _mismatch(e, f)
            if found is not None:
                return found
        return None
    return f"numpy gives a {type(expected).__name__}"


def _wrapped(np: Any, expected: Any, result: Value) -> Value:
    if isinstance(expected, (np.ndarray, np.generic)):
        assert isinstance(result, TensorValue)
        return NdarrayValue(result, scalar=isinstance(expected, np.generic))
    assert isinstance(result, (TupleValue, ListValue))
    items = [_wrapped(np, e, r) for e, r in zip(expected, result.items)]
    return TupleValue(items) if type(expected) is tuple else ListValue(items)


def _record(
    tx: Context,
    target: _OnArrays,
    numpy_fn: Any,
    args: list[Value],
    kwargs: dict[str, Value],
    what: str,
) -> Value:
    """One node calling ``target`` on ``args``, checked against numpy's ``numpy_fn``."""
    np = _numpy()
    if "out" in kwargs:
        raise Unsupported(f"{what} with out= (it writes into an array)")
    converted = [_convert(tx, a) for a in args]
    converted_kw = {k: _convert(tx, v) for k, v in kwargs.items()}
    expected = _numpy_says(
        numpy_fn,
        [c for _, c, _ in converted],
        {k: c for k, (_, c, _) in converted_kw.items()},
        what,
    )
    try:  # torch's kernels for these dtypes exist (a fake kernel does not tell)
        target(*[r for _, _, r in converted], **{k: r for k, (_, _, r) in converted_kw.items()})
    except Exception as exc:
        raise Unsupported(
            f"{what} compiled through torch._numpy: it raises {type(exc).__name__} ({exc})"
        ) from exc
    result = tx.graph.call_function(
        tx, target, [g for g, _, _ in converted], {k: g for k, (g, _, _) in converted_kw.items()}
    )
    fake = _fake_of(result)
    reason = _mismatch(expected, fake)
    if reason is not None:
        raise Unsupported(f"{what} compiled through torch._numpy: {reason}")
    return _wrapped(np, expected, result)


def _fake_of(result: Value) -> Any:
    if isinstance(result, TensorValue):
        return result.fake
    if isinstance(result, (TupleValue, ListValue)):
        return [_fake_of(v) for v in result.items]
    return result


# -- entry points --------------------------------------------------------------------------
def array_of_tensor(
    tx: Context, tensor: TensorValue, args: list[Value], kwargs: dict[str, Value]
) -> Value:
    """``tensor.numpy()`` / ``tensor.numpy(force=...)``."""
    if args or set(kwargs) - {"force"}:
        raise Unsupported("Tensor.numpy() with these arguments")
    force = kwargs.get("force", ConstantValue(False))
    if not force.is_constant() or type(force.as_constant()) is not bool:
        raise Unsupported("Tensor.numpy(force=...) with a value that is not a constant bool")
    fake = tensor.fake
    if fake.device.type != "cpu" or fake.layout != torch.strided or fake.is_quantized:
        raise Unsupported(f"Tensor.numpy() of {tensor.describe()} on {fake.device} (it raises)")
    if fake.is_conj() or fake.is_neg():
        raise Unsupported("Tensor.numpy() of a tensor with its conjugate or negative bit set")
    _checked_layout(fake, "Tensor.numpy()")
    if fake.requires_grad:
        if not force.as_constant():
            raise Unsupported("Tensor.numpy() of a tensor that requires grad (it raises)")
        detached = tx.graph.call_method(tx, "detach", [tensor], {})
        assert isinstance(detached, TensorValue)
        return NdarrayValue(detached, exact_strides=True)
    return NdarrayValue(tensor, exact_strides=True)


def call_numpy(tx: Context, fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """numpy's function ``fn`` called with arrays or tensors among its arguments."""
    name = getattr(fn, "__name__", repr(fn))
    theirs = _counterpart(fn)
    if theirs is None:
        raise Unsupported(f"numpy.{name} on arrays (torch._numpy has no counterpart)")
    return _record(tx, _target(fn, name, theirs), fn, args, kwargs, f"numpy.{name}()")


def numpy_operator(tx: Context, fn: Any, args: list[Value]) -> Value:
    """An operator (``a + b``, ``-a``, ``a < 0``) with a numpy array operand. A tensor
    operand is refused: numpy defers to the tensor's operator there."""
    if any(isinstance(a, TensorValue) for a in args):
        raise Unsupported("an operator between a numpy array and a tensor")
    what = f"the operator {fn.__name__} on a numpy array"
    return _record(tx, _operator_target(fn), fn, args, {}, what)


def tensor_of_array(tx: Context, fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``torch.from_numpy(a)``, ``torch.as_tensor(a)`` (memory shared) or ``torch.tensor(a)``
    (a copy) for an array made in the trace."""
    array = args[0] if len(args) == 1 and not kwargs else None
    if not isinstance(array, NdarrayValue) or array.scalar:
        raise Unsupported(f"{getattr(fn, '__name__', fn)} of a numpy value with these arguments")
    if fn is torch.tensor:
        return tx.graph.call_method(tx, "clone", [array.tensor], {})
    if fn in (torch.from_numpy, torch.as_tensor, torch.asarray):
        # a new tensor object over the array's memory
        return tx.graph.call_function(tx, torch.ops.aten.alias.default, [array.tensor], {})
    raise Unsupported(f"passing {array.describe()} to {getattr(fn, '__name__', fn)}")


METHODS_MODELLED_ELSEWHERE["numpy"] = array_of_tensor
