"""Tensor subclass inputs: traceable wrapper subclasses (``__tensor_flatten__`` /
``__tensor_unflatten__``, as ``TwoTensor``, quantized weights, DTensor) whose class keeps
torch's disabled ``__torch_function__``.

Such an input is a graph input of its class: torch's FakeTensorMode fakes it with fake inner
tensors, each operation runs the class's ``__torch_dispatch__`` on them (so results are of
the class too), and the backends hand it to AOT autograd, which flattens it into graphs of
plain tensors. What the trace relies on is guarded:

* the outer tensor by the tensor guards (its class included, through its Python type);
* the inner tensors and the flatten context by :func:`subclass_layout`: each inner
  tensor's class, dtype, device, sizes, strides, offset and ``requires_grad``, which inner
  tensors are one object or share storage, and the context (compared by equality).

A plain subclass (no ``__torch_function__`` or ``__torch_dispatch__`` of its own, as a
subclass of ``nn.Parameter`` that adds methods) is a graph input like its base: operations
give plain tensors, as eagerly; its own methods and properties are inlined.

Refused (a graph break with the reason): a subclass with a ``__torch_function__`` of its own
(not inlined yet), one that does not flatten, an input whose inner tensors the trace writes
in place (the flattened graph cannot tell which inner tensors alias other inputs), and
attributes of the subclass's own (its inner tensors, its Python methods and properties):
reading an inner tensor would make it a second graph input beside its owner.
The inputs are traced at static sizes.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import Unsupported

__all__ = [
    "SUBCLASS_ATTRIBUTES",
    "check_subclass_input",
    "inner_versions",
    "is_wrapper_subclass",
    "plain_subclass",
    "subclass_attribute_refused",
    "subclass_layout",
    "subclass_method",
    "written_inner_tensors",
]

_HINT = (
    "sapwood traces tensor subclasses that implement __tensor_flatten__/__tensor_unflatten__ "
    "and __torch_dispatch__ (traceable wrapper subclasses) without a __torch_function__ "
    "of their own."
)


def is_wrapper_subclass(t: Any) -> bool:
    """Whether ``t`` is an instance (real or fake) of a traceable wrapper subclass."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    return is_traceable_wrapper_subclass(t)


def plain_subclass(cls: type) -> bool:
    """Whether ``cls`` is a tensor subclass that behaves as its base in every operation: it
    dispatches neither ``__torch_function__`` (torch's disabled one, as ``nn.Parameter``'s)
    nor ``__torch_dispatch__`` of its own, so operations give plain tensors; what it adds
    is Python methods and attributes."""
    return (
        cls.__torch_function__ is torch._C._disabled_torch_function_impl
        and getattr(cls, "__torch_dispatch__", None) is torch.Tensor.__torch_dispatch__
    )


def check_subclass_input(tensor: torch.Tensor) -> bool:
    """Refuse a tensor subclass input the trace cannot model (see the module); True for a
    wrapper subclass, False for a plain one (:func:`plain_subclass`)."""
    cls = type(tensor)
    if not is_wrapper_subclass(tensor):
        if plain_subclass(cls):
            return False
        raise Unsupported(f"a tensor subclass input ({cls.__qualname__})", hint=_HINT)
    if cls.__torch_function__ is not torch._C._disabled_torch_function_impl:
        raise Unsupported(
            f"a tensor subclass input ({cls.__qualname__}) with a __torch_function__ of its own",
            hint=_HINT,
        )
    subclass_layout(tensor)  # (its context must compare: raises Unsupported otherwise)
    return True


def _inner(t: torch.Tensor) -> tuple[list[str], Any, list[torch.Tensor]]:
    names, context = t.__tensor_flatten__()  # type: ignore[attr-defined]
    return list(names), context, [getattr(t, n) for n in names]


def subclass_layout(t: torch.Tensor) -> tuple[Any, ...]:
    """What a traced wrapper-subclass input's inner tensors must keep (a guard reader): for
    each inner tensor its class and layout, nested subclasses in turn; which inner tensors
    are one object or share storage; the flatten context."""
    names, context, inner = _inner(t)
    _comparable(t, context)
    parts: list[Any] = []
    storages: list[Any] = []
    for name, x in zip(names, inner):
        if not isinstance(x, torch.Tensor):  # an opaque member (DTensor's device mesh)
            _comparable(t, x)
            parts.append((name, type(x), x))
            storages.append(None)
            continue
        nested = subclass_layout(x) if is_wrapper_subclass(x) else None
        parts.append(
            (
                name,
                type(x),
                x.dtype,
                x.device,
                tuple(x.shape),
                x.stride(),
                x.storage_offset(),
                x.requires_grad,
                nested,
            )
        )
        storages.append(None if nested is not None else x.untyped_storage()._cdata)
    # which inner tensors are one object, or views of one storage (by first occurrence)
    same = tuple(next(i for i, y in enumerate(inner) if y is x) for x in inner)
    shared = tuple(
        None if s is None else next(i for i, r in enumerate(storages) if r == s) for s in storages
    )
    return (type(t), tuple(names), context, tuple(parts), same, shared)


def _comparable(t: torch.Tensor, part: Any) -> None:
    """Refuse a flatten context or opaque member that cannot be hashed and compared."""
    try:
        hash(part)
        part == part  # noqa: B015
    except Exception:
        raise Unsupported(
            f"a tensor subclass input ({type(t).__qualname__}) whose flatten context cannot "
            "be compared",
            hint=_HINT,
        ) from None


def written_inner_tensors(fake: torch.Tensor, versions: tuple[int, ...]) -> bool:
    """Whether an inner tensor of the fake subclass input ``fake`` was written in place since
    ``versions`` (:func:`inner_versions` when it was made)."""
    return inner_versions(fake) != versions


def inner_versions(fake: torch.Tensor) -> tuple[int, ...]:
    """The version counters of a (fake) wrapper subclass's inner tensors, nested ones too."""
    out: list[int] = [fake._version]
    for x in _inner(fake)[2]:
        if isinstance(x, torch.Tensor):
            out.extend(inner_versions(x) if is_wrapper_subclass(x) else (x._version,))
    return tuple(out)


#: readers of a wrapper subclass's own attributes that a module above this one models
#: (DTensor's ``placements``, ``to_local``, ...): (tx, value, name) -> value or None
SUBCLASS_ATTRIBUTES: list[Any] = []


def subclass_attribute_refused(cls: type, name: str) -> Unsupported | None:
    """The refusal for reading ``name`` of an instance of the wrapper subclass ``cls`` where
    the name is not torch.Tensor's, or the subclass defines it again (its inner tensors,
    its methods and properties); None where torch.Tensor's own attribute answers."""
    for klass in cls.__mro__:
        if klass is torch.Tensor:
            if hasattr(torch.Tensor, name):
                return None
            break
        if name in vars(klass):
            break
    return Unsupported(
        f"{cls.__qualname__}.{name} (an attribute of a tensor subclass's own)", hint=_HINT
    )


def subclass_method(tx: Any, value: Any, cls: type, name: str) -> Any:
    """``value.name`` where a class of a plain subclass ``cls`` (before ``torch.Tensor`` and
    ``nn.Parameter`` in its MRO) defines ``name``: its method or property, inlined; None
    where only torch's classes define it."""
    from .attributes import class_attribute

    for klass in cls.__mro__:
        if klass in (torch.Tensor, torch.nn.Parameter, torch._C.TensorBase):
            return None
        if name in vars(klass):
            return class_attribute(tx, cls, name, value)
    return None
