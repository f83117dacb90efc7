"""Tensors as proxies, and the torch callables that act on them.

A :class:`TensorValue` holds the FX proxy of a graph node (or graph input) and its fake value;
everything the interpreter learns about a tensor at trace time (shape, dtype, device, ...)
is read from the fake value, and holds at run time because the inputs' properties are
guarded (static shapes).

Invariants:

* Metadata reads (``shape``, ``dtype``, ``size()``, ``dim()``, ...) are answered from the fake
  value and never create nodes, except sizes that are symbolic (dynamic shapes): those are
  :class:`~sapwood_tracer.values.symbolic.SymNumberValue` s backed by graph values.
* Any operation whose result depends on tensor data (``item()``, ``bool(t)``, ``tolist()``)
  is refused: there is no value to branch on while tracing.
* Every other tensor method and torch function becomes one graph node, created through
  sapwood_graph, which runs the fake kernel; its fake result decides the result's value kind.
"""

from __future__ import annotations

import contextlib
import math
import operator
import sys
from typing import Any

import torch

from sapwood_graph import FakePropagationError, Source

from ..errors import TracedException, Unsupported
from ..foreign import is_numpy_scalar
from ..guards.sources import LeafViewSource
from .base import ConstantValue, Context, Value, attribute_missing, truth_of_plain_object
from .containers import DictValue, ListValue, NamedTupleValue, SliceValue, TupleValue
from .symbolic import (
    SizeValue,
    SymNumberValue,
    has_symbolic_shape,
    is_number_expr,
    number_from_fake,
)
from .tensor_attributes import (
    assign_attribute,
    assigned_attributes,
    data_descriptor,
    instance_attribute,
)
from .tensor_subclasses import (
    SUBCLASS_ATTRIBUTES,
    is_wrapper_subclass,
    subclass_attribute_refused,
    subclass_method,
)

__all__ = [
    "TensorMethodValue",
    "TensorValue",
    "TorchFunctionValue",
    "same_tensor",
    "size_of",
    "to_graph_arg",
    "wrap_graph_result",
]


class TensorValue(Value):
    """A tensor in the graph: an FX proxy and its fake value."""

    __slots__ = ("fake", "input_source", "input_type", "proxy")

    def __init__(self, proxy: Any, fake: torch.Tensor, input_source: Source | None = None) -> None:
        super().__init__(input_source)
        self.proxy = proxy
        self.fake = fake
        self.input_source = input_source
        self.input_type: type = torch.Tensor

    def describe(self) -> str:
        return f"a tensor ({str(self.fake.dtype).removeprefix('torch.')}, {list(self.fake.shape)})"

    def python_type(self) -> type:
        kind = type(self.fake)
        if kind is not torch.Tensor and not _is_fake(self.fake) and is_wrapper_subclass(self.fake):
            return kind  # (an operation's result of a subclass input is of its class too)
        return self.input_type

    def is_input(self) -> bool:
        return self.input_source is not None

    # -- metadata ----------------------------------------------------------------------------
    def getattr(self, tx: Context, name: str) -> Value:
        fake = self.fake
        assigned = assigned_attributes(self)
        if name in assigned and not data_descriptor(name):
            return assigned[name]
        cls = self.python_type()
        if cls is not torch.Tensor and cls is not torch.nn.Parameter:
            if is_wrapper_subclass(fake):
                for reader in SUBCLASS_ATTRIBUTES:  # (DTensor's, see pymodel.dtensor_calls)
                    found = reader(tx, self, name)
                    if found is not None:
                        return found  # type: ignore[no-any-return]
                refused = subclass_attribute_refused(cls, name)
                if refused is not None:
                    raise refused
            else:  # a plain subclass: its own methods and properties first
                own = subclass_method(tx, self, cls, name)
                if own is not None:
                    return own
        if name == "shape" and has_symbolic_shape(fake):
            return symbolic_size(tx, self, [], {})
        if name in _STATIC_ATTRS:
            return ConstantValue(_static_value(getattr(fake, name)))
        if self.input_source is not None and not data_descriptor(name) and cls is self.input_type:
            own = instance_attribute(tx, self, name)
            if own is not None:
                return own
        if name in _DATA_DEPENDENT and not callable(getattr(torch.Tensor, name, None)):
            # (a data-dependent *method* is refused when called, so a graph break lands on
            # the call, where it can run eagerly)
            raise Unsupported(f"Tensor.{name} (its result depends on tensor data)")
        if name == "T":
            if fake.dim() < 2:
                return self
            dims = tuple(range(fake.dim() - 1, -1, -1))
            return tx.graph.call_method(tx, "permute", [self, ConstantValue(dims)], {})
        if name == "mT":
            return tx.graph.call_method(
                tx, "transpose", [self, ConstantValue(-2), ConstantValue(-1)], {}
            )
        if name in ("real", "imag"):
            return tx.graph.call_function(tx, getattr(torch, name), [self], {})
        if name in _REFUSED_ATTRS and not callable(getattr(torch.Tensor, name, None)):
            raise Unsupported(f"Tensor.{name}", hint=_REFUSED_ATTRS[name])
        if name in _METADATA_METHODS or callable(getattr(torch.Tensor, name, None)):
            return TensorMethodValue(self, name)
        raise attribute_missing(self.describe(), name)

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        if name == "requires_grad":
            set_requires_grad(tx, self, value, method=False)
            return
        if data_descriptor(name) or (name.startswith("__") and name.endswith("__")):
            raise Unsupported(f"assigning Tensor.{name}")
        if not _is_fake(self.fake):
            raise Unsupported(f"assigning Tensor.{name} of {self.describe()}")
        if self.input_source is not None:  # the real tensor's attribute, set after the graph
            if tx.graph.input_object(self) is None:
                raise Unsupported(f"assigning Tensor.{name} of {self.describe()}")
            tx.record_attr_write(self, name, value)
        # one table per tensor object (values with one fake tensor are one object)
        assign_attribute(self, name, value)

    def truth(self, tx: Context) -> bool:
        raise Unsupported(
            "branching on a tensor's value (data-dependent control flow)",
            hint="Branch on a Python value instead, or use torch.where.",
        )

    def length(self, tx: Context) -> int:
        if self.fake.dim() == 0:
            raise TracedException(cls=TypeError, args=(ConstantValue("len() of a 0-d tensor"),))
        return int(self.fake.shape[0])

    def unpack(self, tx: Context) -> list[Value]:
        n = self.length(tx)
        return [
            tx.graph.call_function(tx, operator.getitem, [self, ConstantValue(i)], {})
            for i in range(n)
        ]

    def getitem(self, tx: Context, key: Value) -> Value:
        return tx.graph.call_function(tx, operator.getitem, [self, key], {})

    def setitem(self, tx: Context, key: Value, value: Value) -> None:
        tx.graph.call_function(tx, operator.setitem, [self, key, value], {})

    def contains(self, tx: Context, item: Value) -> bool:
        raise Unsupported("'in' on a tensor (data-dependent)")

    def hash_key(self, tx: Context) -> Any:
        # a tensor hashes by identity, and one tensor is one value in the trace
        return ("__tensor__", id(self))


def _is_fake(t: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def _static_value(v: Any) -> Any:
    if isinstance(v, torch.Size):
        return torch.Size(int(s) for s in v)
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return v.node.pytype(v)  # a symbolic answer used as a constant: specialised, guarded
    return v


_STATIC_ATTRS = frozenset(
    [
        "shape",
        "dtype",
        "device",
        "ndim",
        "is_cuda",
        "requires_grad",
        "layout",
        "is_sparse",
        "is_quantized",
        "is_meta",
        "is_mkldnn",
        "is_complex_dtype",
        "is_nested",
        "itemsize",
        "nbytes",
    ]
)
_DATA_DEPENDENT = frozenset(
    ["item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__", "nonzero_static"]
)
_REFUSED_ATTRS = {
    "data": "Use .detach() instead of .data inside compiled code.",
    "grad": "Gradients are not visible inside a compiled function.",
    "grad_fn": "Autograd history is not visible inside a compiled function.",
    "_version": "Version counters are not visible inside a compiled function.",
    "is_leaf": "Autograd leaf status is not visible inside a compiled function.",
    "untyped_storage": "Storage access is not supported.",
    "data_ptr": "Storage addresses are not known while tracing.",
    "register_hook": "Tensor hooks are not supported.",
    "retain_grad": "retain_grad is not supported.",
    "backward": "Call backward() outside the compiled function.",
}
#: Tensor methods answered from the fake value (static metadata; never a node).
_METADATA_METHODS = frozenset(
    [
        "size",
        "stride",
        "dim",
        "ndimension",
        "numel",
        "nelement",
        "element_size",
        "is_contiguous",
        "is_floating_point",
        "is_complex",
        "is_signed",
        "get_device",
        "storage_offset",
        "__len__",
        "is_inference",
        "has_names",
        "is_pinned",
        "is_shared",
    ]
)


#: Tensor methods whose values a module above this one models: name -> handler(tx, tensor,
#: args, kwargs), registered by that module when it is imported
METHODS_MODELLED_ELSEWHERE: dict[str, Any] = {}


class TensorMethodValue(Value):
    """``tensor.method`` before it is called."""

    __slots__ = ("name", "tensor")

    def __init__(self, tensor: TensorValue, name: str) -> None:
        super().__init__(None)
        self.tensor = tensor
        self.name = name

    def describe(self) -> str:
        return f"Tensor.{self.name}"

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        name = self.name
        if any(getattr(a, "overrides_torch_functions", False) for a in [*args, *kwargs.values()]):
            # (``t.add(x)`` with x of a class with a __torch_function__: its method runs)
            return tx.call_torch_function(getattr(torch.Tensor, name), [self.tensor, *args], kwargs)
        if name in SYMBOLIC_METADATA and has_symbolic_shape(self.tensor.fake):
            return SYMBOLIC_METADATA[name](tx, self.tensor, args, kwargs)
        if name in _METADATA_METHODS:
            return metadata_call(tx, getattr(torch.Tensor, name), [self.tensor, *args], kwargs)
        special = METHODS_MODELLED_ELSEWHERE.get(name)
        if special is not None:  # (``numpy``: a numpy array, see values/ndarrays.py)
            return special(tx, self.tensor, args, kwargs)  # type: ignore[no-any-return]
        if name in _DATA_DEPENDENT or name in _REFUSED_ATTRS:
            raise Unsupported(
                f"Tensor.{name}(){_scalar_outputs_note(name)}",
                hint=_REFUSED_ATTRS.get(name, "Its result depends on tensor data."),
            )
        if name == "requires_grad_":
            if len(args) > 1 or set(kwargs) - {"requires_grad"} or (args and kwargs):
                raise Unsupported("Tensor.requires_grad_() with these arguments")
            flag = args[0] if args else kwargs.get("requires_grad", ConstantValue(True))
            set_requires_grad(tx, self.tensor, flag, method=True)
            return self.tensor
        if name == "type" and not args and not kwargs:
            return ConstantValue(self.tensor.fake.type())
        if name == "type" and len(args) == 1 and _legacy_tensor_class(args[0]):
            # ``t.type(torch.HalfTensor)`` is ``t.type("torch.HalfTensor")``
            cls = args[0].as_constant()
            args = [ConstantValue(f"{cls.__module__}.{cls.__name__}")]
        if name == "new":  # the legacy constructor: sizes or data, decided as torch does
            return tx.call_torch_function(torch.Tensor.new, [self.tensor, *args], kwargs)
        return tx.graph.call_method(tx, name, [self.tensor, *args], kwargs)


def _legacy_tensor_class(value: Value) -> bool:
    """``torch.HalfTensor``, ``torch.cuda.LongTensor``, ...: a tensor type named by class."""
    if not value.is_constant():
        return False
    cls = value.as_constant()
    return isinstance(cls, type) and cls in torch._tensor_classes  # type: ignore[attr-defined]


def _scalar_outputs_note(name: str) -> str:
    """Where the user asked torch for captured scalar outputs, that sapwood does not do it."""
    config = sys.modules.get("torch._dynamo.config")
    if name in ("item", "tolist") and getattr(config, "capture_scalar_outputs", False):
        return (
            " (torch._dynamo.config.capture_scalar_outputs is set, but sapwood does not "
            "capture scalar outputs)"
        )
    return ""


_NOT_A_LEAF = "you can only change requires_grad flags of leaf variables."
_DETACH_HINT = (
    " If you want to use a computed variable in a subgraph that doesn't require"
    " differentiation use var_no_grad = var.detach()."
)


def set_requires_grad(tx: Context, tensor: TensorValue, flag: Value, *, method: bool) -> None:
    """``tensor.requires_grad = flag`` (or ``tensor.requires_grad_(flag)``, ``method``), as
    torch does it, where the trace can tell what torch would do; else :class:`Unsupported`.

    A tensor that does not require grad is a leaf: ``False`` leaves it as it is, and ``True``
    on a view of a graph input makes it a leaf the entry makes (``tx.graph.view_leaf``). On
    a tensor the graph computed with grad (not a leaf) torch raises, except that
    ``requires_grad_(True)`` does nothing.
    """
    value = flag.as_constant() if flag.is_constant() else None
    if type(value) is not bool:
        raise Unsupported("setting requires_grad to a value that is not a constant bool")
    fake = tensor.fake
    if torch.is_inference_mode_enabled() or fake.is_inference():
        raise Unsupported("setting requires_grad in inference mode")
    made_leaf = isinstance(tensor.input_source, LeafViewSource)
    if tensor.is_input() and not made_leaf and (value or fake.requires_grad):
        raise Unsupported(
            "setting requires_grad on an input tensor",
            hint="Set requires_grad before calling the compiled function.",
        )
    if not fake.requires_grad:
        if not value:
            return
        if not (fake.is_floating_point() or fake.is_complex()):
            what = "floating point dtype" if method else "floating point and complex dtype"
            message = f"only Tensors of {what} can require gradients"
            raise TracedException(cls=RuntimeError, args=(ConstantValue(message),))
        tx.graph.view_leaf(tx, tensor)
        return
    if fake.is_leaf:
        if value:
            return
        raise Unsupported("requires_grad = False on a leaf that requires grad")
    if method and value:
        return
    message = _NOT_A_LEAF + ("" if value else _DETACH_HINT)
    raise TracedException(cls=RuntimeError, args=(ConstantValue(message),))


def metadata_call(tx: Context, fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """Call ``fn`` on fake values for a static metadata result (no node)."""
    fargs = [fake_arg(a) for a in args]
    fkwargs = {k: fake_arg(v) for k, v in kwargs.items()}
    on_tensors = any(isinstance(a, TensorValue) for a in [*args, *kwargs.values()])
    try:
        if on_tensors:
            with tx.graph.fake_mode():
                result = fn(*fargs, **fkwargs)
        else:  # a question about global state: ask it outside the fake mode
            result = fn(*fargs, **fkwargs)
    except Exception as exc:
        raise Unsupported(
            f"{getattr(fn, '__name__', fn)} on fake tensors raising {type(exc).__name__}: {exc}"
        ) from exc
    if isinstance(result, torch.Tensor):
        raise Unsupported(f"{getattr(fn, '__name__', fn)} returning a tensor from a metadata query")
    if type(result) is tuple:
        result = tuple(_static_value(r) for r in result)
    return tx.wrap_trusted(_static_value(result))


def fake_arg(value: Value) -> Any:
    if isinstance(value, (TensorValue, SymNumberValue)):
        return value.fake
    if value.is_constant():
        return value.as_constant()
    raise Unsupported(f"passing {value.describe()} to a tensor metadata query")


def to_graph_arg(tx: Context, value: Value) -> Any:
    """The argument to hand sapwood_graph for ``value`` (proxies for tensors, else constants)."""
    if isinstance(value, (TensorValue, SymNumberValue)):
        return value.proxy
    if isinstance(value, ConstantValue):
        if is_numpy_scalar(value.value):
            return numpy_graph_constant(value.value)
        return value.value
    if isinstance(value, SliceValue):
        return slice(*(to_graph_arg(tx, p) for p in value.parts))
    if isinstance(value, NamedTupleValue):
        return tuple(to_graph_arg(tx, v) for v in value.items)
    if isinstance(value, TupleValue):
        return tuple(to_graph_arg(tx, v) for v in value.items)
    if isinstance(value, ListValue):
        return [to_graph_arg(tx, v) for v in value.items]
    if isinstance(value, DictValue):
        return {k.as_constant(): to_graph_arg(tx, v) for k, v in value.entries.values()}
    if value.is_constant():
        const = value.as_constant()
        if isinstance(
            const, (torch.dtype, torch.device, torch.layout, torch.memory_format, type(None))
        ):
            return const
        if isinstance(const, (int, float, bool, complex, str)):
            return const
    raise Unsupported(f"passing {value.describe()} to a torch operation")


def numpy_graph_constant(value: Any) -> Any:
    """A numpy scalar as an argument of a graph node: the scalar itself, which torch converts
    as it does eagerly (numpy scalars promote unlike the equal Python numbers, so ``.item()``
    would change dtypes). The graph's code writes it as its repr; that repr must rebuild it
    exactly, or the operation runs eagerly."""
    import numpy

    names = {"__builtins__": {}, "np": numpy, "nan": math.nan, "inf": math.inf}
    rebuilt = None
    # (a repr that is not code raises: an older numpy writes the bare number)
    with contextlib.suppress(Exception):
        rebuilt = eval(repr(value), names)
    if type(rebuilt) is not type(value) or rebuilt.tobytes() != value.tobytes():
        raise Unsupported(f"passing the numpy scalar {value!r} to a torch operation")
    if "np" not in torch.fx.graph._custom_builtins:
        # (the graph's generated code names numpy ``np``, as numpy's repr does)
        torch.fx.graph._register_custom_builtin("np", "import numpy as np", numpy)
    return value


def wrap_graph_result(tx: Context, proxy: Any, fake: Any, what: str) -> Value:
    if isinstance(fake, torch.Tensor):
        return TensorValue(proxy, fake)
    if isinstance(fake, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return number_from_fake(proxy, fake)
    if fake is None:
        return ConstantValue(None)
    if isinstance(fake, (tuple, list)) and all(
        isinstance(f, torch.Tensor) or f is None for f in fake
    ):
        items: list[Value] = []
        for i, f in enumerate(fake):
            if f is None:
                items.append(ConstantValue(None))
            else:
                items.append(TensorValue(tx.graph.getitem_proxy(proxy, i), f))
        if isinstance(fake, list):
            return ListValue(items)
        if hasattr(type(fake), "n_fields") or hasattr(fake, "_fields"):
            return NamedTupleValue(type(fake), items)
        return TupleValue(items)
    raise Unsupported(f"{what} returning {type(fake).__name__} (not a tensor)")


class TorchFunctionValue(Value):
    """A torch function (``torch.*``, ``torch.nn.functional.*``, ``Tensor.method`` unbound,
    an op overload): calling it with values records a node."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any, source: Source | None = None) -> None:
        super().__init__(source)
        self.fn = fn

    def describe(self) -> str:
        name = getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", repr(self.fn))
        return f"torch function {name}"

    def python_type(self) -> type:
        return type(self.fn)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.fn

    def truth(self, tx: Context) -> bool:
        # ``if self.act:`` with ``act = F.relu``: a function object (its class defines neither
        # __bool__ nor __len__) is true
        return truth_of_plain_object(self.fn, self.describe())

    def getattr(self, tx: Context, name: str) -> Value:
        try:
            attr = getattr(self.fn, name)
        except AttributeError:
            raise attribute_missing(self.describe(), name) from None
        return tx.wrap_trusted(attr)

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        return tx.call_torch_function(self.fn, args, kwargs)


def same_tensor(a: TensorValue, b: TensorValue) -> bool:
    """Whether ``a`` and ``b`` are one Python object when the traced code runs eagerly.

    The trace knows it from two facts. A value computed by an operation is a new object
    unless torch's own kernel returned one of its inputs (``x.contiguous()`` of a contiguous
    tensor, ``x.to()`` to what it already is, in-place operations): the fake kernel does the
    same on the fake tensors, whose properties are those the guards fix, so the result's fake
    tensor *is* the input's exactly when the real result will be the input. Inputs reached
    through different sources are guarded to be distinct objects (or they are one value).
    Where a value has no fake tensor of its own to compare, the answer is refused.
    """
    if a is b:
        return True
    if not (_is_fake(a.fake) and _is_fake(b.fake)):
        raise Unsupported(
            f"an identity test between {a.describe()} and {b.describe()} "
            "(one of them has no fake tensor to compare)"
        )
    return a.fake is b.fake


def graph_error(exc: FakePropagationError) -> Unsupported:
    hint = "The result depends on tensor data." if exc.data_dependent else ""
    return Unsupported(f"the operation {exc.op} ({exc.reason})", hint=hint)


# ----------------------------------------------------------------- symbolic sizes
def size_of(tx: Context, tensor: TensorValue, dim: int) -> Value:
    """``tensor.size(dim)``: a constant for a static dim, else a symbolic value whose proxy is
    the symbol's own graph input where there is one (no node), else a ``sym_size`` node."""
    size = tensor.fake.shape[dim]
    if not isinstance(size, torch.SymInt) or is_number_expr(size):
        return ConstantValue(int(size))
    proxy = tx.graph.symbol_proxy(size.node.expr)
    if proxy is not None:
        return SymNumberValue(proxy, size)
    return tx.graph.call_function(tx, torch.ops.aten.sym_size.int, [tensor, ConstantValue(dim)], {})


def _dim_argument(tensor: TensorValue, args: list[Value], kwargs: dict[str, Value]) -> int | None:
    if len(args) > 1 or set(kwargs) - {"dim"}:
        raise Unsupported("Tensor.size() with more than one argument")
    given = args[0] if args else kwargs.get("dim")
    if given is None:
        return None
    dim = given.as_constant()
    if not isinstance(dim, int):
        raise Unsupported(f"Tensor.size({dim!r})")
    ndim = tensor.fake.dim()
    if not -ndim <= dim < ndim:
        raise Unsupported(f"Tensor.size({dim}) of a {ndim}-d tensor (IndexError)")
    return dim % ndim


def symbolic_size(
    tx: Context, tensor: TensorValue, args: list[Value], kwargs: dict[str, Value]
) -> Value:
    """``tensor.shape`` / ``tensor.size()`` / ``tensor.size(d)`` of a tensor with symbolic dims."""
    dim = _dim_argument(tensor, args, kwargs)
    if dim is not None:
        return size_of(tx, tensor, dim)
    return SizeValue([size_of(tx, tensor, d) for d in range(tensor.fake.dim())])


def symbolic_numel(
    tx: Context, tensor: TensorValue, args: list[Value], kwargs: dict[str, Value]
) -> Value:
    if args or kwargs:
        raise Unsupported("Tensor.numel() takes no arguments")
    return tx.graph.call_method(tx, "numel", [tensor], {})


#: Tensor metadata methods whose answer stays symbolic for a tensor with symbolic dims.
SYMBOLIC_METADATA: dict[str, Any] = {
    "size": symbolic_size,
    "numel": symbolic_numel,
    "nelement": symbolic_numel,
}
