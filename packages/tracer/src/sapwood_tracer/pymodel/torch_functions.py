"""Calls of torch callables.

Most torch functions become one graph node. A few answer questions about state or metadata
and are folded at trace time (their answer is fixed by the guards); a few are refused because
they change global state the graph cannot restore (``torch.manual_seed``).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

import torch

from sapwood_graph import GuardKind

from ..errors import Unsupported
from ..guards.sources import GlobalStateSource, function_modes
from ..marks import is_disallowed
from ..values.base import ConstantValue, Context, Value
from ..values.containers import TupleValue
from ..values.ndarrays import NdarrayValue, tensor_of_array
from ..values.symbolic import SizeValue, SymNumberValue
from ..values.tensor_subclasses import SUBCLASS_ATTRIBUTES
from ..values.tensors import METHODS_MODELLED_ELSEWHERE, TensorValue, metadata_call
from .dtensor_calls import dtensor_attribute, dtensor_names
from .overriding_tensors import as_subclass_call, make_subclass
from .torch_function_protocol import SPECIAL_FUNCTIONS, call_overridden

__all__ = [
    "AUTOGRAD_FUNCTION_APPLY",
    "call_autograd_function",
    "call_torch_function",
    "legacy_constructor",
]


def _const(value: Any) -> Any:
    def handler(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        return ConstantValue(value)

    return handler


def _resolve(*paths: str) -> list[Any]:
    """The torch objects at ``paths`` that this torch version has (others are skipped).

    A path into a lazily loaded torch package (``torch._dynamo``) is resolved only once the
    program has loaded it (:func:`_dynamo_names`): reading the attribute would import all of
    Dynamo with ``import sapwood``."""
    found = []
    for path in paths:
        obj: Any = torch
        try:
            for part in path.split(".")[1:]:
                obj = getattr(obj, part)
        except AttributeError:
            continue
        found.append(obj)
    return found


#: Dynamo's own query (``torch._dynamo.is_compiling``), answered once Dynamo is loaded
_DYNAMO_COMPILING = "torch._dynamo.is_compiling"
_dynamo_resolved = [False]


def _dynamo_names() -> None:
    """Add Dynamo's own queries to the table once the program loaded torch._dynamo."""
    if _dynamo_resolved[0] or "torch._dynamo" not in sys.modules:
        return
    _dynamo_resolved[0] = True
    for fn in _resolve(_DYNAMO_COMPILING):
        _SPECIAL[fn] = _const(True)


#: Functions folded on fake values / constants: their result is metadata, not data.
_METADATA_FUNCTIONS: set[Any] = set(
    _resolve(
        "torch.is_tensor",
        "torch.is_floating_point",
        "torch.is_complex",
        "torch.numel",
        "torch.result_type",
        "torch.promote_types",
        "torch.can_cast",
        "torch.broadcast_shapes",
        "torch.get_default_dtype",
        "torch.is_grad_enabled",
        "torch.is_inference_mode_enabled",
        # (every entry checks it: torch's global state, ``torch_global_state``)
        "torch.are_deterministic_algorithms_enabled",
        "torch.is_storage",
        "torch.jit.is_scripting",
        "torch.cuda.device_count",
        "torch.backends.mps.is_available",
        "torch.cuda.is_available",
        "torch._C._len_torch_dispatch_stack",
    )
)

_SPECIAL: dict[Any, Any] = {
    fn: _const(True)
    for fn in _resolve(
        "torch.compiler.is_compiling",
        "torch.compiler.is_dynamo_compiling",
        "torch._utils.is_compiling",
    )
}
# (has_torch_function, handle_torch_function, Tensor.__torch_function__: the protocol's)
_SPECIAL.update(SPECIAL_FUNCTIONS)


def _autocast_dtype(device: str | None) -> Any:
    """``torch.get_autocast_dtype(device)`` (or the deprecated per-device forms): the dtype
    now, with a guard on it, since ``torch.set_autocast_dtype`` can change it between calls."""

    def query(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        given = [*args, *kwargs.values()]
        if device is None:
            if len(given) != 1 or not given[0].is_constant():
                raise Unsupported("torch.get_autocast_dtype with these arguments")
            name = given[0].as_constant()
        else:
            if given:
                raise Unsupported(f"get_autocast_{device}_dtype with arguments (TypeError)")
            name = device
        if name not in ("cpu", "cuda"):
            raise Unsupported(f"torch.get_autocast_dtype({name!r})")
        source = GlobalStateSource(f"autocast_dtype_{name}")
        dtype = source.reader()()
        tx.guard(GuardKind.CONSTANT_MATCH, source, dtype)
        return ConstantValue(dtype)

    return query


def _autocast_enabled(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``torch.is_autocast_enabled()`` / ``(device)``: every entry checks autocast (torch's
    global state, ``torch_global_state``); answered for the CPU and CUDA, others refused."""
    given = [*args, *kwargs.values()]
    if len(given) > 1 or not all(v.is_constant() for v in given):
        raise Unsupported("torch.is_autocast_enabled with these arguments")
    device = given[0].as_constant() if given else "cuda"
    if device not in ("cpu", "cuda"):
        raise Unsupported(f"torch.is_autocast_enabled({device!r})")
    return ConstantValue(torch.is_autocast_enabled(device))


_SPECIAL[torch.is_autocast_enabled] = _autocast_enabled


def _guarded_setting(state: str) -> Any:
    """A query of a torch setting the user can change between calls (cuDNN on or off, a JIT
    trace or a functorch transform running): its answer now, guarded
    (``torch_state.<state>``)."""

    def query(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if args or kwargs:
            raise Unsupported(f"the query of torch's {state} setting with arguments (TypeError)")
        source = GlobalStateSource(state)
        value = source.reader()()
        if value is not None and type(value) not in (bool, str):
            raise Unsupported(f"torch's {state} setting while it is {type(value).__name__}")
        tx.guard(GuardKind.CONSTANT_MATCH, source, value)
        return ConstantValue(value)

    return query


for _fn, _state in {
    torch._C._get_cudnn_enabled: "cudnn_enabled",
    torch._C._are_functorch_transforms_active: "functorch_transforms",
    torch._C._is_tracing: "jit_tracing",
    torch.jit.is_tracing: "jit_tracing",
    torch._C._get_tracing_state: "jit_tracing_state",
    torch._C._get_privateuse1_backend_name: "privateuse1_name",
}.items():
    _SPECIAL[_fn] = _guarded_setting(_state)
_SPECIAL[torch.get_autocast_dtype] = _autocast_dtype(None)
_SPECIAL[torch.get_autocast_gpu_dtype] = _autocast_dtype("cuda")
_SPECIAL[torch.get_autocast_cpu_dtype] = _autocast_dtype("cpu")

_REFUSED = {
    torch.manual_seed: "torch.manual_seed changes global RNG state",
    torch.seed: "torch.seed changes global RNG state",
    torch.set_default_dtype: "it changes global state",
    torch.set_rng_state: "it changes global RNG state",
    torch.get_rng_state: "RNG state is data",
    torch.use_deterministic_algorithms: "it changes global state",
}


def _is_legacy_class(fn: Any) -> bool:
    try:
        return fn in _LEGACY_CLASSES
    except TypeError:  # unhashable
        return False


def is_modelled_torch_function(fn: Any) -> bool:
    """Python-level torch functions answered here rather than inlined."""
    _dynamo_names()
    dtensor_names(_SPECIAL)
    try:
        return fn in _SPECIAL or fn in _METADATA_FUNCTIONS or fn in _REFUSED
    except TypeError:
        return False


#: Legacy constructors: ``torch.Tensor`` (the default dtype) and the typed classes
#: (``torch.FloatTensor``, ``torch.cuda.LongTensor``, ...), by the dtype and device they make.
_LEGACY_CLASSES: dict[Any, tuple[torch.dtype | None, str]] = {
    cls: (cls.dtype, "cuda" if cls.is_cuda else "cpu")
    for cls in torch._tensor_classes  # type: ignore[attr-defined]
}
_LEGACY_CLASSES[torch.Tensor] = (None, "cpu")  # None: torch.get_default_dtype() (guarded)


def _is_size_argument(value: Value) -> bool:
    if isinstance(value, SymNumberValue):
        return True
    return value.is_constant() and type(value.as_constant()) is int


def _legacy_shape(args: list[Value]) -> Value | None:
    """The shape a legacy constructor's arguments ask for, or None when they are data.

    As torch decides it: no argument is an empty 1-d tensor, ints are sizes, one
    ``torch.Size`` is a size, any other sequence is data."""
    if not args:
        return TupleValue([ConstantValue(0)])
    if all(_is_size_argument(a) for a in args):
        return TupleValue(list(args))
    if len(args) == 1 and (
        isinstance(args[0], SizeValue)
        or (args[0].is_constant() and type(args[0].as_constant()) is torch.Size)
    ):
        return args[0]
    return None


def legacy_constructor(
    tx: Context,
    receiver: TensorValue | None,
    cls: Any,
    args: list[Value],
    kwargs: dict[str, Value],
) -> Value:
    """``Tensor.new(...)`` of ``receiver`` or ``cls(...)`` of a legacy constructor class, as
    explicit operations: sizes give an uninitialised tensor, data a copy. (A graph would hand a
    ``torch.Size`` over as a plain tuple, which these constructors read as data.)"""
    what = "Tensor.new" if receiver is not None else f"{cls.__module__}.{cls.__qualname__}"
    if set(kwargs) - {"device"}:
        raise Unsupported(f"{what}() with {sorted(set(kwargs) - {'device'})} (TypeError)")
    if len(args) == 1 and isinstance(args[0], TensorValue):
        raise Unsupported(f"{what}() of a tensor (it would share that tensor's storage)")
    shape = _legacy_shape(args)
    if shape is None and len(args) != 1:
        raise Unsupported(f"{what}() with {len(args)} arguments that are not sizes")
    graph = tx.graph
    if receiver is not None:
        method = "new_empty" if shape is not None else "new_tensor"
        operand = shape if shape is not None else args[0]
        return graph.call_method(tx, method, [receiver, operand], dict(kwargs))
    dtype, device = _LEGACY_CLASSES[cls]
    options = {
        "dtype": ConstantValue(dtype if dtype is not None else torch.get_default_dtype()),
        "device": kwargs.get("device", ConstantValue(torch.device(device))),
    }
    if shape is not None:
        return graph.call_function(tx, torch.empty, [shape], options)
    return graph.call_function(tx, torch.tensor, [args[0]], options)


def call_torch_function(tx: Context, fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if is_disallowed(fn):
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
        raise Unsupported(
            f"a call to {name}, which disallow_in_graph (sapwood's or torch's) keeps out of graphs"
        )
    if fn is torch.Tensor.new and args and isinstance(args[0], TensorValue):
        return legacy_constructor(tx, args[0], None, args[1:], kwargs)
    if _is_legacy_class(fn):
        return legacy_constructor(tx, None, fn, args, kwargs)
    _dynamo_names()
    dtensor_names(_SPECIAL)
    special = _SPECIAL.get(fn)
    if special is not None:
        return special(tx, args, kwargs)  # type: ignore[no-any-return]
    overridden = call_overridden(tx, fn, args, kwargs)
    if overridden is not None:  # (a tensor of a class with a __torch_function__)
        return overridden
    if any(isinstance(a, NdarrayValue) for a in [*args, *kwargs.values()]):
        return tensor_of_array(tx, fn, args, kwargs)
    if fn in _REFUSED:
        raise Unsupported(f"calling {getattr(fn, '__name__', fn)}", hint=f"({_REFUSED[fn]}).")
    if fn in _METADATA_FUNCTIONS:
        return metadata_call(tx, fn, args, kwargs)
    if "out" in kwargs:
        raise Unsupported(f"{getattr(fn, '__name__', fn)}(out=...)")
    if _given_no_device(kwargs) and fn in _device_constructors():
        kwargs = _on_default_device(tx, kwargs)
    return tx.graph.call_function(tx, fn, args, kwargs)


def _given_no_device(kwargs: dict[str, Value]) -> bool:
    given = kwargs.get("device")
    return given is None or (given.is_constant() and given.as_constant() is None)


def _device_constructors() -> Any:
    from torch.utils._device import _device_constructors as constructors

    return constructors()


def _guarded_default_device(tx: Context) -> Any:
    """The device of torch's default-device mode (``torch.set_default_device``), guarded; None
    where there is none (not guarded: every trace guards which modes are active,
    ``torch_state.torch_function_modes``)."""
    source = GlobalStateSource("default_device")
    device = source.reader()()
    if device is not None:
        tx.guard(GuardKind.CONSTANT_MATCH, source, device)
    return device


def _on_default_device(tx: Context, kwargs: dict[str, Value]) -> dict[str, Value]:
    """A factory function called without a device under torch's default-device mode: the
    mode's device, as the mode gives it."""
    device = _guarded_default_device(tx)
    return kwargs if device is None else {**kwargs, "device": ConstantValue(device)}


def _default_device(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``torch.get_default_device()``: the default-device mode's device (guarded), else the
    CPU (traces under such a mode are guarded so: ``torch_state.torch_function_modes``)."""
    if args or kwargs:
        raise Unsupported("torch.get_default_device with arguments (TypeError)")
    device = _guarded_default_device(tx)
    if device is None:
        return ConstantValue(torch.device("cpu"))
    if device.index is None and device.type != "cpu":
        raise Unsupported("torch.get_default_device() of a device without an index")
    return ConstantValue(device)


_SPECIAL[torch.get_default_device] = _default_device
# (every trace guards which modes are active: ``torch_state.torch_function_modes``)
_SPECIAL[torch._C._is_torch_function_mode_enabled] = lambda tx, args, kwargs: ConstantValue(
    function_modes() != "none"
)


# ``Tensor.as_subclass(t, cls)`` and ``t.as_subclass(cls)`` (see pymodel.overriding_tensors)
_SPECIAL[torch._C.TensorBase.as_subclass] = as_subclass_call
METHODS_MODELLED_ELSEWHERE["as_subclass"] = lambda tx, tensor, args, kwargs: as_subclass_call(
    tx, [tensor, *args], kwargs
)
SUBCLASS_ATTRIBUTES.append(dtensor_attribute)
_SPECIAL[torch.Tensor._make_subclass] = make_subclass


#: ``torch.autograd.Function.apply`` as a plain function (it is a classmethod).
AUTOGRAD_FUNCTION_APPLY: Any = torch.autograd.Function.apply.__func__  # type: ignore[attr-defined]


def call_autograd_function(
    tx: Context, cls: type, args: list[Value], kwargs: dict[str, Value]
) -> Value:
    """``cls.apply(*args)`` of a custom ``torch.autograd.Function``: one node of the graph
    whose target is ``cls.apply`` itself.

    The node runs the user's ``forward`` (on fake tensors while tracing, for real when the
    graph runs) and, because it is the real ``apply``, leaves the user's ``backward`` on the
    autograd graph: AOT autograd's joint trace calls that backward where the gradient flows,
    exactly as eager autograd does. Arguments must be tensors and constants; anything else
    (a module, an object the forward could mutate) refuses the call, and the graph breaks there.
    The forward is taken, like ``allow_in_graph``'s functions, to compute from its arguments:
    Python side effects inside it (other than on ``ctx``) are not replayed by a backend that
    compiles the graph.
    """
    if "apply" in vars(cls) or not issubclass(cls, torch.autograd.Function):
        raise Unsupported(f"{cls.__qualname__}.apply, which is not torch's Function.apply")
    if getattr(cls, "_compiled_autograd_should_lift", True) is False:
        raise Unsupported(f"{cls.__qualname__}.apply (its class opts out of compiled autograd)")
    for value in [*args, *kwargs.values()]:
        if isinstance(value, TensorValue):
            continue
        if value.is_constant() and _graph_constant(value.as_constant()):
            continue
        raise Unsupported(
            f"{cls.__qualname__}.apply with the argument {value.describe()}",
            hint="(only tensors and constants can be passed to a custom autograd Function "
            "recorded in the graph).",
        )
    return tx.graph.call_function(tx, _apply_of(cls), args, kwargs)


_APPLIES: weakref.WeakKeyDictionary[type, Any] = weakref.WeakKeyDictionary()


def _apply_of(cls: type) -> Any:
    """One graph target per Function class that calls ``cls.apply``. The bound classmethod
    itself cannot be a target: its ``__module__`` is torch's, so the graph's code would look it
    up as ``torch.autograd.function.apply``."""
    found = _APPLIES.get(cls)
    if found is None:

        def apply(*args: Any, **kwargs: Any) -> Any:
            return cls.apply(*args, **kwargs)  # type: ignore[attr-defined]

        apply.__name__ = f"{cls.__name__}_apply"
        apply.__qualname__ = f"{cls.__qualname__}.apply"
        found = _APPLIES[cls] = apply
    return found


def _graph_constant(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_graph_constant(v) for v in value)
    return value is None or isinstance(
        value, (bool, int, float, complex, str, torch.dtype, torch.device, torch.memory_format)
    )
