"""Tensors of a class with a ``__torch_function__`` of its own (``class Scaled(torch.Tensor)``
that logs, rescales or keeps its class through operations), as values of the trace.

Such a tensor is an :class:`OverridingTensorValue`: a plain tensor of the graph (its
``tensor``, which the program never sees) and the class the program sees. Every operation
on it is one Python call of ``__torch_function__``, inlined, as eager torch makes it (see
:mod:`.torch_function_protocol`): the graph only ever holds plain tensors.

* An input is a graph input through a plain alias of the real tensor
  (:func:`plain_alias`, the view ``as_subclass(torch.Tensor)`` makes), so the compiled graph
  runs no ``__torch_function__`` of its own; its class is guarded, and its own attributes
  (``x.scale``) are read from its ``__dict__``, guarded.
* ``t.as_subclass(cls)`` is an alias node of the graph, so the new object and the old one
  are two tensors, as eagerly; a result of the class leaves the graph through
  ``as_subclass`` again (:func:`made_as`), with the attributes the trace set on it.
* Attributes: the class's own (methods, properties, class methods) are inlined; the
  instance's ``__dict__`` next; then ``torch.Tensor``'s, each read or call going through
  ``__torch_function__`` as it does eagerly (``x.shape`` is ``Tensor.shape.__get__``).
"""

from __future__ import annotations

import functools
import itertools
import types
from typing import Any

import torch

from sapwood_graph import GuardKind, Source

from ..errors import Unsupported
from ..guards.sources import ReaderSource
from ..values.attributes import (
    class_attribute,
    guard_not_defined,
    is_data_descriptor,
    lookup_mro,
)
from ..values.base import Context, Value, attribute_missing, bind_named
from ..values.functions import BoundMethodValue
from ..values.tensor_attributes import (
    assign_attribute,
    assigned_attributes,
    emit_with_attributes,
    input_attribute,
    shadows_tensor_names,
)
from ..values.tensors import TensorValue, TorchFunctionValue

__all__ = [
    "OverridingTensorValue",
    "as_subclass",
    "as_subclass_call",
    "drop_aliases",
    "emit_made",
    "made_as",
    "make_subclass",
    "overriding_class",
    "overriding_input",
    "plain_alias",
    "without_subclass_functions",
]

#: torch's own classes: what a subclass's attribute lookup reaches after the user's classes
_TORCH_CLASSES = (torch.Tensor, torch._C.TensorBase, object)


def overriding_class(cls: type) -> bool:
    """Whether ``cls`` is a tensor subclass with a ``__torch_function__`` that runs (its own,
    or ``torch.Tensor``'s default, which keeps the class through operations) and no
    ``__torch_dispatch__`` or flattening of its own."""
    return (
        isinstance(cls, type)
        and issubclass(cls, torch.Tensor)
        and cls is not torch.Tensor
        and getattr(cls, "__torch_function__", None) is not torch._C._disabled_torch_function_impl
        and getattr(cls, "__torch_dispatch__", None) is torch.Tensor.__torch_dispatch__
        and not hasattr(cls, "__tensor_flatten__")
        and not issubclass(cls, torch.nn.Parameter)
    )


def plain_alias(t: torch.Tensor) -> torch.Tensor:
    """A plain ``torch.Tensor`` viewing ``t`` (what an overriding input is in the graph)."""
    with torch._C.DisableTorchFunctionSubclass():
        return t.as_subclass(torch.Tensor)


def without_subclass_functions(backend: Any) -> Any:
    """``backend``, compiling and running its graph with subclass dispatch off. A plain alias
    is a view whose ``_base`` is the user's tensor: what a backend reads of it there (AOT
    autograd describes an input's base) must not run the user's ``__torch_function__``."""

    @functools.wraps(backend)
    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        with torch._C.DisableTorchFunctionSubclass():
            compiled = backend(gm, example_inputs)

        def run(*args: Any) -> Any:
            with torch._C.DisableTorchFunctionSubclass():
                return compiled(*args)

        return run

    return compile_graph


def drop_aliases(graph: torch.fx.Graph, outputs: list[Any]) -> None:
    """Take out the alias nodes ``as_subclass`` made (see :func:`as_subclass`) that only
    stand for their input inside the graph: not an output, and nothing written through them
    (an in-place metadata change, ``y.t_()``, would change the input's view). The graph then
    has the nodes torch.compile's has."""
    kept = {getattr(o, "node", None) for o in outputs}
    for node in list(graph.nodes):
        if node.target is not torch.ops.aten.alias.default or node in kept:
            continue
        if any(_writes(user) for user in node.users):
            continue
        node.replace_all_uses_with(node.args[0])  # type: ignore[arg-type]
        graph.erase_node(node)


def _writes(node: torch.fx.Node) -> bool:
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return (
        (name.endswith("_") and not name.endswith("__"))
        or name.startswith("__i")
        or name in ("setitem", "__setitem__")
        or "out" in node.kwargs
    )


def made_as(t: torch.Tensor, cls: type) -> torch.Tensor:
    """``t`` (a plain graph output) as the class the program made it of."""
    with torch._C.DisableTorchFunctionSubclass():
        return t.as_subclass(cls)


def emit_made(
    em: Any, value: Any, index: int, emit: Any, built: dict[int, str], indent: str
) -> str:
    """The entry's expression for ``value``, made in the trace: graph output ``index`` made
    of its class, with the attributes the trace set on it."""
    name = em.temp()  # (one object, however many places hold it)
    em.lines.append(f"{indent}{name} = {em.const(made_as)}(o[{index}], {em.const(value.cls)})")
    built[id(value)] = name
    return emit_with_attributes(em, value, name, emit, built, indent)


class OverridingTensorValue(Value):
    """A tensor of an :func:`overriding_class`: the graph's plain ``tensor`` and ``cls``."""

    __slots__ = ("cls", "tensor")

    #: (what lower layers ask to tell it from other values without importing this module)
    overrides_torch_functions = True

    def __init__(self, tensor: TensorValue, cls: type, source: Source | None = None) -> None:
        super().__init__(source)
        self.tensor = tensor
        self.cls = cls

    @property
    def fake(self) -> torch.Tensor:
        # (one object in the trace: its attribute table is its fake tensor's)
        return self.tensor.fake

    def describe(self) -> str:
        fake = self.tensor.fake
        dtype = str(fake.dtype).removeprefix("torch.")
        return f"a {self.cls.__qualname__} tensor ({dtype}, {list(fake.shape)})"

    def python_type(self) -> type:
        return self.cls

    def getattr(self, tx: Context, name: str) -> Value:
        return overriding_getattr(tx, self, name)

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        _, raw = lookup_mro(self.cls, name)
        if is_data_descriptor(raw) or (name.startswith("__") and name.endswith("__")):
            raise Unsupported(f"assigning {self.cls.__qualname__}.{name}")
        if self.source is not None:  # the real tensor's attribute, set after the graph
            tx.record_attr_write(self, name, value)
        assign_attribute(self, name, value)

    def _call(self, tx: Context, name: str, args: list[Value]) -> Value:
        return tx.call(self.getattr(tx, name), args, {})

    def truth(self, tx: Context) -> bool:
        return tx.truth(self._call(tx, "__bool__", []))

    def length(self, tx: Context) -> int:
        n = self._call(tx, "__len__", [])
        if not n.is_constant() or type(n.as_constant()) is not int:
            raise Unsupported(f"len() of {self.describe()} answered by {n.describe()}")
        return int(n.as_constant())

    def unpack(self, tx: Context) -> list[Value]:
        return tx.unpack(self._call(tx, "__iter__", []))

    def iterate(self, tx: Context) -> Value:
        return self._call(tx, "__iter__", [])

    def getitem(self, tx: Context, key: Value) -> Value:
        return self._call(tx, "__getitem__", [key])

    def setitem(self, tx: Context, key: Value, value: Value) -> None:
        self._call(tx, "__setitem__", [key, value])

    def contains(self, tx: Context, item: Value) -> bool:
        return tx.truth(self._call(tx, "__contains__", [item]))

    def hash_key(self, tx: Context) -> Any:
        if self.cls.__hash__ is not torch.Tensor.__hash__:
            raise Unsupported(f"hashing {self.describe()} (its class defines __hash__)")
        return ("__tensor__", id(self))


def overriding_input(tx: Context, obj: torch.Tensor, source: Source) -> OverridingTensorValue:
    """The value of the input tensor ``obj`` of an :func:`overriding_class`."""
    cls = type(obj)
    tx.guard(GuardKind.TYPE_MATCH, source, cls)
    if shadows_tensor_names(obj):
        raise Unsupported(
            f"a {cls.__qualname__} tensor input whose __dict__ shadows a name of its class"
        )
    tx.guard_false(ReaderSource(source, shadows_tensor_names))
    plain = tx.tensor_input(plain_alias(obj), ReaderSource(source, plain_alias))
    assert isinstance(plain, TensorValue)
    return OverridingTensorValue(plain, cls, source)


def as_subclass(tx: Context, value: Value, cls: Any) -> Value:
    """``value.as_subclass(cls)`` run without ``__torch_function__`` (as torch runs it):
    a new tensor object viewing the same data, of the class ``cls``."""
    plain = value.tensor if isinstance(value, OverridingTensorValue) else value
    if not isinstance(plain, TensorValue):
        raise Unsupported(f"as_subclass of {value.describe()}")
    if cls is not torch.Tensor and not overriding_class(cls):
        raise Unsupported(f"as_subclass({getattr(cls, '__qualname__', cls)!s})")
    alias = tx.graph.call_function(tx, torch.ops.aten.alias.default, [plain], {})
    assert isinstance(alias, TensorValue)
    return alias if cls is torch.Tensor else OverridingTensorValue(alias, cls)


def as_subclass_call(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``Tensor.as_subclass(self, cls)`` called (never dispatched to ``__torch_function__``)."""
    bound = bind_named("Tensor.as_subclass", ("self", "cls"), args, kwargs)
    if set(bound) != {"self", "cls"} or not bound["cls"].is_constant():
        raise Unsupported("Tensor.as_subclass with these arguments")
    return as_subclass(tx, bound["self"], bound["cls"].as_constant())


def make_subclass(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``torch.Tensor._make_subclass(cls, data, require_grad=False)`` (what a subclass's
    ``__new__`` calls): ``data`` detached, as a new tensor object of ``cls``."""
    bound = bind_named("Tensor._make_subclass", ("cls", "data", "require_grad"), args, kwargs)
    cls_value, data = bound.get("cls"), bound.get("data")
    flag = bound.get("require_grad")
    if cls_value is None or data is None or not cls_value.is_constant():
        raise Unsupported("Tensor._make_subclass with these arguments (TypeError)")
    if flag is not None and not (flag.is_constant() and flag.as_constant() is False):
        raise Unsupported("Tensor._make_subclass(require_grad=True) inside the compiled function")
    cls = cls_value.as_constant()
    plain = data.tensor if isinstance(data, OverridingTensorValue) else data
    if not isinstance(plain, TensorValue) or not overriding_class(cls):
        raise Unsupported(f"Tensor._make_subclass({getattr(cls, '__qualname__', cls)!s}, ...)")
    detached = tx.graph.call_function(tx, torch.ops.aten.detach.default, [plain], {})
    assert isinstance(detached, TensorValue)
    return OverridingTensorValue(detached, cls)


def overriding_getattr(tx: Context, value: OverridingTensorValue, name: str) -> Value:
    cls = value.cls
    klass, raw = lookup_mro(cls, name)
    data = klass is not None and is_data_descriptor(raw)
    if not data:
        assigned = assigned_attributes(value)
        if name in assigned:
            return assigned[name]
        own = input_attribute(tx, tx.object_of.get(id(value)), value.source, name)
        if own is not None:
            return own
    if klass is not None and klass not in _TORCH_CLASSES:
        found = class_attribute(tx, cls, name, value)  # the user's class: inlined
        assert found is not None
        return found
    if klass is None:
        if lookup_mro(cls, "__getattr__")[0] not in (None, *_TORCH_CLASSES):
            raise Unsupported(f"{cls.__qualname__}.__getattr__")
        raise attribute_missing(value.describe(), name)
    # (a later definition in the user's classes would win)
    guard_not_defined(tx, itertools.takewhile(lambda k: k not in _TORCH_CLASSES, cls.__mro__), name)
    if name in ("__class__", "__dict__"):
        raise Unsupported(f"{name} of {value.describe()}")
    if type(raw) is types.GetSetDescriptorType:  # ``x.shape``: Tensor.shape.__get__(x)
        return tx.call(TorchFunctionValue(raw.__get__), [value], {})
    if isinstance(raw, property) and raw.fget is not None:
        return tx.call(TorchFunctionValue(raw.fget), [value], {})
    if isinstance(raw, (types.FunctionType, types.MethodDescriptorType)) or (
        type(raw) is types.WrapperDescriptorType
    ):
        return BoundMethodValue(TorchFunctionValue(getattr(torch.Tensor, name)), value)
    raise Unsupported(f"Tensor.{name} ({type(raw).__name__}) of {value.describe()}")
