"""Tracer-side sources, beside sapwood_graph's.

sapwood_graph's sources describe places in user data (locals, globals, attributes, items).
The tracer also guards on facts that are not places: the length of a container, the keys of a
dict, a class attribute not being shadowed by an instance attribute, and global torch state.
These are frozen dataclasses subclassing :class:`sapwood_graph.Source`, like the graph's, so
they fit in :class:`sapwood_graph.Guard` records. Nothing here is evaluated from text.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
import types
import weakref
from typing import Any, TypeVar, dataclass_transform

import torch

from sapwood_graph import ClosureCellSource, Source

__all__ = [
    "CellAtSource",
    "ContainsSource",
    "DistinctIdsSource",
    "GlobalStateSource",
    "HasAttrSource",
    "HeldObjectSource",
    "InstanceDictSource",
    "KeysSource",
    "LeafViewSource",
    "LenSource",
    "ModuleHooksSource",
    "ReaderSource",
    "ReduceSource",
    "ViewedDictSource",
    "WeakHandle",
    "WeakRefTargetSource",
    "dict_of_view",
    "held_weakly",
    "program_function_mode",
    "read_from",
    "strong",
    "torch_global_state",
    "torch_state_snapshot",
]

#: User objects that guards and cache entries refer to weakly: a cache entry must not keep a
#: function or a Python module alive; it is dropped when one of them dies instead.
_WEAKLY_HELD = (types.FunctionType, types.ModuleType, type)


class WeakHandle:
    """A weak reference to an object a cache entry depends on (see :func:`held_weakly`)."""

    __slots__ = ("obj_id", "ref")

    def __init__(self, obj: Any) -> None:
        self.obj_id = id(obj)
        self.ref = weakref.ref(obj)

    def get(self) -> Any:
        """The object, or ``None`` once it died."""
        return self.ref()

    def __repr__(self) -> str:
        return f"<WeakHandle {self.ref()!r}>"


def read_from(source: Source, roots: Any) -> bool:
    """Whether ``source`` is read from (not equal to) one of ``roots`` (a dict or set of
    sources)."""
    base = source.base
    while base is not None:
        if base in roots:
            return True
        base = base.base
    return False


def held_weakly(obj: Any) -> Any:
    """``obj`` as a cache entry keeps it: a :class:`WeakHandle` for functions, classes and
    Python modules (the entry is dropped when they die), the object itself otherwise
    (objects that cannot be weakly referenced, or that only the entry keeps alive)."""
    if isinstance(obj, _WEAKLY_HELD):
        try:
            return WeakHandle(obj)
        except TypeError:  # a class or module that refuses weak references
            return obj
    return obj


def strong(held: Any) -> Any:
    """The object behind what :func:`held_weakly` returned (``None`` if it died)."""
    return held.get() if isinstance(held, WeakHandle) else held


_S = TypeVar("_S")


@dataclass_transform(frozen_default=True)
def _frozen(cls: type[_S]) -> type[_S]:
    return dataclasses.dataclass(frozen=True, slots=True, repr=False)(cls)


class _Printable(Source):
    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


@_frozen
class HeldObjectSource(_Printable):
    """A specific object the cache entry holds a reference to (a module's globals dict, a class).

    Compared by identity of the held object, so two sources for the same object are equal.
    """

    obj_id: int
    label: str
    #: the object, or a :class:`WeakHandle` to it for functions and Python modules (see
    #: :func:`held_weakly`; classes stay strong here: type guards hold them anyway)
    held: Any = dataclasses.field(compare=False, hash=False)

    def __post_init__(self) -> None:
        if isinstance(self.held, (types.FunctionType, types.ModuleType)):
            object.__setattr__(self, "held", held_weakly(self.held))

    @property
    def target(self) -> Any:
        """The held object (``None`` once a weakly held one died)."""
        return strong(self.held)

    def _render(self) -> str:
        return f"<{self.label}>"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return self.target


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class CellAtSource(ClosureCellSource):
    """A closure cell whose position in the function's ``__closure__`` the trace saw.

    Read as ``of.__closure__[index].cell_contents``: a function's closure tuple cannot be
    replaced, so for the function guarded by identity (whose code the trace assumes, as for
    any function it inlined) the position found when tracing stays right. Looking the name up
    instead reads ``__code__``, which raises an audit event (a call into every audit hook a
    library installed) on every check.
    """

    index: int


@_frozen
class LenSource(_Printable):
    """``len(of)``."""

    of: Source

    @property
    def base(self) -> Source | None:
        return self.of

    def _render(self) -> str:
        return f"len({self.of})"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return len(self.of.resolve(f_locals, f_globals, function))


@_frozen
class ReaderSource(_Printable):
    """``reader(of)``: the state of the object at ``of`` as a pure function of the standard
    library reads it (a random generator's state, a range iterator's items still to come)."""

    of: Source
    reader: Any

    @property
    def base(self) -> Source | None:
        return self.of

    def _render(self) -> str:
        return f"{self.reader.__name__}({self.of})"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return self.reader(self.of.resolve(f_locals, f_globals, function))


@_frozen
class KeysSource(_Printable):
    """``tuple(of.keys())`` for a dict."""

    of: Source

    @property
    def base(self) -> Source | None:
        return self.of

    def _render(self) -> str:
        return f"tuple({self.of}.keys())"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return tuple(self.of.resolve(f_locals, f_globals, function).keys())


@_frozen
class DistinctIdsSource(_Printable):
    """``len({id(s) for s in sources})``: guarded equal to ``len(sources)`` (no aliasing)."""

    sources: tuple[Source, ...]

    def _render(self) -> str:
        return f"len({{id(x) for x in ({', '.join(map(str, self.sources))})}})"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return len({id(s.resolve(f_locals, f_globals, function)) for s in self.sources})


@_frozen
class ContainsSource(_Printable):
    """``key in of`` (a dict or mapping), guarded ``== False`` to keep a name unshadowed."""

    of: Source
    key: str

    @property
    def base(self) -> Source | None:
        return self.of

    def _render(self) -> str:
        return f"({self.key!r} in {self.of})"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return self.key in self.of.resolve(f_locals, f_globals, function)


def dict_of_view(view: Any) -> Any:
    """The dict a ``dict_keys``/``dict_values``/``dict_items`` view shows: Python hands out
    only a read-only proxy of it (``view.mapping``), but the view's one referent is the dict."""
    (mapping,) = gc.get_referents(view)
    return mapping


@_frozen
class ViewedDictSource(_Printable):
    """The dict the view ``of`` (``d.keys()``, ...) shows (see :func:`dict_of_view`)."""

    of: Source

    @property
    def base(self) -> Source | None:
        return self.of

    def _render(self) -> str:
        return f"dict_of_view({self.of})"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return dict_of_view(self.of.resolve(f_locals, f_globals, function))


@_frozen
class ReduceSource(_Printable):
    """``of.__reduce__()`` (of a builtin iterator: how to make it again, read without
    running user code)."""

    of: Source

    @property
    def base(self) -> Source | None:
        return self.of

    def _render(self) -> str:
        return f"{self.of}.__reduce__()"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return self.of.resolve(f_locals, f_globals, function).__reduce__()


@_frozen
class WeakRefTargetSource(_Printable):
    """``of()`` for a weak reference: the object it refers to (or None)."""

    of: Source

    @property
    def base(self) -> Source | None:
        return self.of

    def _render(self) -> str:
        return f"{self.of}()"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return self.of.resolve(f_locals, f_globals, function)()


@_frozen
class HasAttrSource(_Printable):
    """``hasattr(of, attr)``: guarded ``False`` where the trace relied on an attribute's absence."""

    of: Source
    attr: str

    @property
    def base(self) -> Source | None:
        return self.of

    def _render(self) -> str:
        return f"hasattr({self.of}, {self.attr!r})"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return hasattr(self.of.resolve(f_locals, f_globals, function), self.attr)


@_frozen
class InstanceDictSource(_Printable):
    """``object.__getattribute__(of, '__dict__')``: the instance dict of ``of``, read past its
    class's own ``__getattribute__`` (which attribute access, ``of.__dict__``, would run)."""

    of: Source

    @property
    def base(self) -> Source | None:
        return self.of

    def _render(self) -> str:
        return f"object.__getattribute__({self.of}, '__dict__')"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return object.__getattribute__(self.of.resolve(f_locals, f_globals, function), "__dict__")


@_frozen
class ModuleHooksSource(_Printable):
    """Whether the module at ``of`` has any forward/backward (pre-)hooks: guarded ``False``."""

    of: Source

    @property
    def base(self) -> Source | None:
        return self.of

    def _render(self) -> str:
        return f"has_hooks({self.of})"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        m = self.of.resolve(f_locals, f_globals, function)
        return bool(
            m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks
        )


#: the device of the default-device mode (``torch.set_default_device``, ``with
#: torch.device(...)``) in force at the call being traced, while sapwood traces and compiles
#: it with that mode set aside (see ``api.modes.device_modes_set_aside``); None otherwise
SET_ASIDE_DEVICE: list[Any] = [None]


def _innermost_function_mode(device: bool) -> Any:
    """The innermost torch function mode that is (``device``) or is not one of torch's
    default-device modes (``DeviceContext``); None where there is none."""
    from torch.utils._device import DeviceContext

    for i in range(torch._C._len_torch_function_stack() - 1, -1, -1):
        mode = torch._C._get_function_stack_at(i)
        if isinstance(mode, DeviceContext) is device:
            return mode
    return None


def default_device_mode() -> Any:
    """The device torch's factory functions get when none is given: the innermost
    ``DeviceContext`` mode's, or None where there is none (their own default, the CPU)."""
    if SET_ASIDE_DEVICE[0] is not None:
        return SET_ASIDE_DEVICE[0]
    mode = _innermost_function_mode(device=True)
    return None if mode is None else mode.device


def program_function_mode() -> Any:
    """The innermost torch function mode of the program's (not a default-device mode), or
    None (under which a compiled call runs eagerly: see ``api.modes``)."""
    if not torch._C._is_torch_function_mode_enabled():
        return None
    return _innermost_function_mode(device=False)


def function_modes() -> str:
    """Which torch function modes are active: ``"none"``, ``"device"`` (torch's
    default-device modes only, which traces follow) or ``"other"`` (a mode of the program's,
    under which calls run eagerly: an entry made under default-device modes alone must not
    serve them)."""
    if SET_ASIDE_DEVICE[0] is not None:
        return "device"
    if not torch._C._is_torch_function_mode_enabled():
        return "none"
    return "device" if program_function_mode() is None else "other"


#: torch's state every entry checks in Python (the rest is :func:`torch_global_state`'s)
_STATE_READERS = {
    "inference_mode": torch.is_inference_mode_enabled,
    "dispatch_modes": torch._C._len_torch_dispatch_stack,
    "torch_function_modes": function_modes,
}


def torch_global_state(snapshot: Any) -> str:
    """``""`` while torch's global state is as ``snapshot`` (torch's C++
    ``GlobalStateGuard``, made as the trace began) recorded it, else the first setting that
    changed (``"grad_mode"``). One C++ check covers grad mode, the default dtype, autocast
    (every device, its dtypes and cache), deterministic algorithms, the thread count, TF32
    and reduced-precision reductions, and whether ``__torch_function__`` runs: what
    torch.compile checks, in about a tenth of the time of reading them one by one."""
    return "" if snapshot.check() else str(snapshot.reason()).strip() or "changed"


def torch_state_snapshot() -> Any:
    return torch._C._dynamo.guards.GlobalStateGuard()


#: torch's settings a trace may read, guarded only by the traces that read them
_TORCH_SETTING_READERS: dict[str, Any] = {
    "autocast_dtype_cpu": lambda: torch.get_autocast_dtype("cpu"),
    "autocast_dtype_cuda": lambda: torch.get_autocast_dtype("cuda"),
    "cudnn_enabled": torch._C._get_cudnn_enabled,
    "functorch_transforms": torch._C._are_functorch_transforms_active,
    "jit_tracing": torch._C._is_tracing,
    "jit_tracing_state": torch._C._get_tracing_state,
    "privateuse1_name": torch._C._get_privateuse1_backend_name,
    "default_device": default_device_mode,
}


#: the interpreter's settings a trace may read: guarded only by the traces that read them
def _caller_handling() -> bool:
    """Whether an exception is being handled where the compiled function was called (read in
    the entry's guards, which run outside any handler of their own)."""
    return sys.exc_info()[1] is not None


_SETTING_READERS: dict[str, Any] = {
    "recursion_limit": sys.getrecursionlimit,
    "int_max_str_digits": sys.get_int_max_str_digits,
    "caller_handling": _caller_handling,
    # (3.11's test hook float.__setformat__ can change them)
    "double_format": lambda: float.__getformat__("double"),
    "float_format": lambda: float.__getformat__("float"),
}


@_frozen
class GlobalStateSource(_Printable):
    """A piece of global state the graph depends on: torch's (grad mode, default dtype, ...,
    guarded by every trace) or an interpreter setting (the recursion limit, ..., guarded by
    the traces that read it)."""

    state: str

    def _render(self) -> str:
        if self.state in _SETTING_READERS:
            return f"sys_setting.{self.state}"
        return f"torch_state.{self.state}"

    def reader(self) -> Any:
        return (
            _STATE_READERS.get(self.state)
            or _TORCH_SETTING_READERS.get(self.state)
            or _SETTING_READERS[self.state]
        )

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return self.reader()()


#: a view step replayed by :class:`LeafViewSource`: (``"call_function"`` or ``"call_method"``,
#: the target, the arguments with :data:`VIEWED` where the tensor goes, the keyword arguments)
ViewStep = tuple[str, Any, tuple[Any, ...], dict[str, Any]]

#: stands for the tensor being viewed among a :data:`ViewStep`'s arguments
VIEWED = object()


def make_view_leaf(base: torch.Tensor, steps: tuple[ViewStep, ...]) -> torch.Tensor:
    """The views ``steps`` of ``base``, made a leaf that requires grad (as the traced program
    made them and then set ``requires_grad = True``)."""
    tensor = base
    for kind, target, args, kwargs in steps:
        real = tuple(tensor if a is VIEWED else a for a in args)
        if kind == "call_method":
            tensor = getattr(real[0], target)(*real[1:], **kwargs)
        else:
            tensor = target(*real, **kwargs)
    tensor.requires_grad_(True)
    return tensor


@_frozen
class LeafViewSource(_Printable):
    """A tensor the entry makes before the graph runs: views of ``of`` (a graph input that
    does not require grad), made a leaf that requires grad. The traced program set
    ``requires_grad`` on such a view; the graph takes it as an input, so autograd fills its
    ``.grad`` as in eager. Its properties follow from ``of``'s guards: never guarded itself.
    Sources of two leaves differ by ``serial`` (the steps hold unhashable slices)."""

    of: Source
    serial: int
    steps: tuple[ViewStep, ...] = dataclasses.field(compare=False, hash=False)

    @property
    def base(self) -> Source | None:
        return self.of

    def _render(self) -> str:
        return f"leaf_view#{self.serial}({self.of})"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return make_view_leaf(self.of.resolve(f_locals, f_globals, function), self.steps)


def global_state_names() -> tuple[str, ...]:
    return tuple(_STATE_READERS)
