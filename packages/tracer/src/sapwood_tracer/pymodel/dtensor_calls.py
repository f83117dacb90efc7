"""DTensor's own entry points in the trace, as tensor parallelism's module hooks call them:
``DTensor.from_local(t, mesh, placements)``, ``d.redistribute(mesh, placements)``,
``d.to_local()``, and reading ``d.placements`` / ``d.device_mesh``.

Each call is one node of the graph whose target closes over the device mesh and the
placements (the graph's arguments are tensors only); fake propagation runs the real
function on fake tensors, so DTensor's sharding rules decide the result, as they do eagerly.
The mesh is guarded by identity (and held), placements by equality: a placement is an
immutable value (see :func:`is_placement`), wrapped as a constant. ``run_check=True``,
which communicates to check the shards, is refused.

Loaded only where the program loaded ``torch.distributed.tensor`` (:func:`dtensor_names`).
"""

from __future__ import annotations

import sys
from typing import Any

from sapwood_graph import GuardKind

from ..errors import Unsupported
from ..values.base import Context, Value, bind_named
from ..values.sequences import ListValue, TupleValue
from ..values.tensors import TensorValue

__all__ = ["dtensor_attribute", "dtensor_names", "is_placement"]

_loaded = [False]


def dtensor_names(special: dict[Any, Any]) -> None:
    """Add the handlers to ``special`` (the torch-function table) once the program has
    loaded ``torch.distributed.tensor``."""
    if _loaded[0] or "torch.distributed.tensor" not in sys.modules:
        return
    _loaded[0] = True
    from torch.distributed.tensor import DTensor

    special[DTensor.from_local] = _from_local


def is_placement(obj: Any) -> bool:
    """A DTensor placement (``Shard(0)``, ``Replicate()``): an immutable value."""
    module = sys.modules.get("torch.distributed.tensor.placement_types")
    return module is not None and isinstance(obj, module.Placement)


def _real(tx: Context, value: Value, what: str) -> Any:
    """The object ``value`` stands for, fixed in the graph's code: a constant (placements
    are), a tuple or list of them, or a device mesh from the inputs (guarded by identity)."""
    if isinstance(value, (TupleValue, ListValue)):
        items = [_real(tx, v, what) for v in value.items]
        return tuple(items) if isinstance(value, TupleValue) else items
    if value.is_constant():
        return value.as_constant()
    obj = tx.object_of.get(id(value))
    module = sys.modules.get("torch.distributed.device_mesh")
    if obj is not None and value.source is not None and isinstance(obj, module.DeviceMesh):
        tx.hold(obj)
        tx.guard(GuardKind.ID_MATCH, value.source, id(obj))
        return obj
    raise Unsupported(f"{what} with {value.describe()}")


def _leaf(name: str, fn: Any) -> Any:
    def call(*args: Any) -> Any:
        return fn(*args)

    call.__name__ = call.__qualname__ = name
    return call


def _fixed(tx: Context, what: str, bound: dict[str, Value]) -> dict[str, Any]:
    """The bound arguments of ``what`` as the objects the graph's code fixes
    (:func:`_real`), the placements as a tuple."""
    given = {k: _real(tx, v, what) for k, v in bound.items()}
    if isinstance(given.get("placements"), list):
        given["placements"] = tuple(given["placements"])
    return given


def _from_local(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    from torch.distributed.tensor import DTensor

    names = ("local_tensor", "device_mesh", "placements", "run_check", "shape", "stride")
    bound = bind_named("DTensor.from_local", (*names, "grad_placements"), args, kwargs)
    local = bound.pop("local_tensor", None)
    if not isinstance(local, TensorValue):
        raise Unsupported("DTensor.from_local of a value that is not a plain tensor")
    given = _fixed(tx, "DTensor.from_local", bound)
    if given.get("run_check"):
        raise Unsupported("DTensor.from_local(run_check=True), which communicates")
    target = _leaf("dtensor_from_local", lambda t: DTensor.from_local(t, **given))
    return tx.graph.call_function(tx, target, [local], {})


def dtensor_attribute(tx: Context, value: TensorValue, name: str) -> Value | None:
    """``d.name`` of a DTensor value where it is modelled here; None elsewhere."""
    module = sys.modules.get("torch.distributed.tensor")
    if module is None or not isinstance(value.fake, module.DTensor):
        return None
    if name in ("placements", "device_mesh"):
        # fixed for the trace: an input's by its layout guard, a result's by the sharding
        # rules on the guarded inputs
        return tx.wrap_trusted(getattr(value.fake, name))
    if name in ("to_local", "redistribute"):
        return _DTensorMethod(value, name)
    return None


class _DTensorMethod(Value):
    __slots__ = ("name", "tensor")

    def __init__(self, tensor: TensorValue, name: str) -> None:
        super().__init__(None)
        self.tensor = tensor
        self.name = name

    def describe(self) -> str:
        return f"DTensor.{self.name}"

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        what = f"DTensor.{self.name}"
        if self.name == "to_local":
            if args or kwargs:  # (``grad_placements=`` is not modelled yet)
                raise Unsupported(f"{what} with arguments")
            target = _leaf("dtensor_to_local", lambda t: t.to_local())
        else:
            names = ("device_mesh", "placements", "async_op", "forward_dtype", "backward_dtype")
            given = _fixed(tx, what, bind_named(what, names, args, kwargs))
            target = _leaf("dtensor_redistribute", lambda t: t.redistribute(**given))
        return tx.graph.call_function(tx, target, [self.tensor], {})
