"""Context managers that change torch's global state inside the graph.

``torch.no_grad()``, ``torch.enable_grad()``, ``torch.set_grad_enabled(b)`` and
``torch.autocast(...)`` are entered *in the graph*: entering records a node that switches the
state (``torch._C._set_grad_enabled`` / ``torch.amp._enter_autocast``), and the normal exit
records the node that switches it back. Recording runs the node on fake values, so the state
is also switched while the rest of the block is traced, and fake results see it.

Invariant: every state switched during a trace is switched back when the trace ends, also
when it fails (the session restores the grad mode and exits open autocast modes).
"""

from __future__ import annotations

import inspect
import types
import warnings
from typing import Any

import torch

from ..errors import Unsupported, user_stacklevel
from ..guards.sources import HeldObjectSource
from .base import ConstantValue, Context, Value
from .functions import FunctionValue

__all__ = [
    "AutocastValue",
    "ContextClassValue",
    "ContextExitValue",
    "GradModeFunctionValue",
    "GradModeValue",
    "ProfilerRangeValue",
    "SubclassFunctionsOffValue",
    "settle_loose_grad_mode",
    "subclass_functions_enabled",
]


class GradModeValue(Value):
    """``torch.no_grad()`` / ``enable_grad()`` / ``set_grad_enabled(b)``: a grad-mode context."""

    __slots__ = ("enabled", "prior")

    def __init__(self, enabled: bool) -> None:
        super().__init__(None)
        self.enabled = enabled
        self.prior: bool | None = None

    def describe(self) -> str:
        return f"grad mode context (enabled={self.enabled})"

    def enter(self, tx: Context) -> Value:
        self.prior = torch.is_grad_enabled()
        tx.graph.record_state_call(tx, torch._C._set_grad_enabled, (self.enabled,))
        return ConstantValue(None)

    def exit(self, tx: Context) -> None:
        assert self.prior is not None
        tx.graph.record_state_call(tx, torch._C._set_grad_enabled, (self.prior,))

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        # ``@torch.no_grad()`` on a function defined or reached in the trace
        return GradModeFunctionValue.decorating(self.enabled, args, kwargs)


def subclass_functions_enabled(tx: Context) -> bool:
    """Whether tensor subclasses' ``__torch_function__`` runs here: as the call began
    (``torch._C._is_torch_function_enabled()``, which every entry's check of torch's global
    state covers), unless a ``with torch._C.DisableTorchFunctionSubclass()`` of the trace is
    open."""
    if tx.subclass_functions is None:
        tx.subclass_functions = bool(torch._C._is_torch_function_enabled())
    return tx.subclass_functions


class SubclassFunctionsOffValue(Value):
    """``torch._C.DisableTorchFunctionSubclass()`` (or ``DisableTorchFunction()``): inside
    it, operations on tensor subclasses run as on plain tensors. The graph only ever holds
    plain tensors, so this is the trace's state alone: no node."""

    __slots__ = ("cls", "prior")

    def __init__(self, cls: Any) -> None:
        super().__init__(None)
        self.cls = cls
        self.prior: bool | None = None

    def describe(self) -> str:
        return f"torch._C.{self.cls.__name__}()"

    def enter(self, tx: Context) -> Value:
        self.prior = subclass_functions_enabled(tx)
        tx.subclass_functions = False
        return ConstantValue(None)

    def exit(self, tx: Context) -> None:
        tx.subclass_functions = self.prior


class GradModeFunctionValue(Value):
    """A Python function decorated with a grad-mode context in the trace (``@torch.no_grad()``,
    ``@torch.enable_grad()``, ``torch.no_grad(fn)``): each call runs the function inside a
    fresh context of that mode, as the decorator's wrapper does, so the mode is switched in
    the graph around the inlined body and switched back however it leaves.

    A generator function is refused: torch's wrapper switches the mode around each step."""

    __slots__ = ("enabled", "fn")

    def __init__(self, enabled: bool, fn: FunctionValue) -> None:
        super().__init__(None)
        self.enabled = enabled
        self.fn = fn

    @staticmethod
    def decorating(enabled: bool, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if len(args) != 1 or kwargs or not isinstance(args[0], FunctionValue):
            raise Unsupported("a grad-mode context called with other than one Python function")
        if args[0].code.co_flags & _GENERATOR_FLAGS:
            raise Unsupported("a grad-mode context decorating a generator or async function")
        return GradModeFunctionValue(enabled, args[0])

    def describe(self) -> str:
        mode = "enable_grad" if self.enabled else "no_grad"
        return f"{self.fn.describe()} decorated with torch.{mode}()"

    def python_type(self) -> type:
        return types.FunctionType

    def truth(self, tx: Context) -> bool:
        return True

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        context = GradModeValue(self.enabled)
        tx.enter_context(context)
        try:
            return tx.call(self.fn, args, kwargs)
        finally:
            opened = getattr(tx, "open_contexts", None)
            if opened and opened[-1] is context:  # (not after a failure that left others open)
                tx.exit_context(context)


_GENERATOR_FLAGS = (
    inspect.CO_GENERATOR
    | inspect.CO_COROUTINE
    | inspect.CO_ASYNC_GENERATOR
    | inspect.CO_ITERABLE_COROUTINE
)


class AutocastValue(Value):
    """``torch.autocast(device_type, dtype=..., enabled=..., cache_enabled=...)``."""

    __slots__ = ("args", "mode_proxy")

    def __init__(self, args: tuple[Any, ...]) -> None:
        super().__init__(None)
        self.args = args
        self.mode_proxy: Any = None

    def describe(self) -> str:
        return "autocast context"

    def enter(self, tx: Context) -> Value:
        self.mode_proxy = tx.graph.record_state_call(tx, torch.amp._enter_autocast, self.args)
        return ConstantValue(None)

    def exit(self, tx: Context) -> None:
        tx.graph.record_state_call(tx, torch.amp._exit_autocast, (self.mode_proxy,))


class ProfilerRangeValue(Value):
    """``torch.profiler.record_function(name, args)``: a named range for the profiler.

    A graph runs as one call, with no Python line to put a range around, so inside a graph the
    range records nothing (torch.compile's default too) and a warning says so once per name.
    Around the eager part of a graph break, and in a resume function that runs eagerly, it is
    the real range again (the break re-enters it with the same arguments)."""

    __slots__ = ("args",)

    def __init__(self, args: tuple[Any, ...]) -> None:
        super().__init__(None)
        self.args = args

    def describe(self) -> str:
        return f"profiler range {self.args[0]!r}"

    def enter(self, tx: Context) -> Value:
        name = self.args[0]
        if name not in _RANGES_WARNED:
            _RANGES_WARNED.add(name)
            where = tx.location()
            warnings.warn(
                f"sapwood: the profiler range {name!r} (torch.profiler.record_function"
                f"{f' at {where}' if where else ''}) is not recorded inside compiled graphs; "
                "the code around graph breaks keeps it",
                stacklevel=user_stacklevel(),
            )
        return self

    def exit(self, tx: Context) -> None:
        return None


_RANGES_WARNED: set[Any] = set()


class ContextExitValue(Value):
    """The bound ``__exit__`` BEFORE_WITH pushes; calling it leaves the context."""

    __slots__ = ("context",)

    def __init__(self, context: Value) -> None:
        super().__init__(None)
        self.context = context

    def describe(self) -> str:
        return f"__exit__ of {self.context.describe()}"

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        # (None, None, None) on the normal exit; (type, exception, traceback) when an
        # exception leaves the block: torch's contexts restore their state and let it go on
        tx.exit_context(self.context)
        if all(a.is_constant() and a.as_constant() is None for a in args):
            return ConstantValue(None)
        return ConstantValue(False)


class ContextClassValue(Value):
    """``torch.no_grad`` and friends as classes: calling one makes the context value."""

    __slots__ = ("cls",)

    def __init__(self, cls: Any) -> None:
        super().__init__(None)
        self.cls = cls

    def describe(self) -> str:
        return f"{self.cls.__qualname__}"

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.cls

    def python_type(self) -> type:
        return type(self.cls)

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        cls = self.cls
        if cls in _SUBCLASS_FUNCTIONS_OFF:
            if args or kwargs:
                raise Unsupported(f"torch._C.{cls.__name__} with arguments (TypeError)")
            return SubclassFunctionsOffValue(cls)
        if cls in (torch.no_grad, torch.enable_grad):
            enabled = cls is torch.enable_grad
            if args or kwargs:  # ``torch.no_grad(fn)``: the class as a bare decorator
                return GradModeFunctionValue.decorating(enabled, args, kwargs)
            return GradModeValue(enabled)
        consts = [a.as_constant() for a in args]
        kw = {k: v.as_constant() for k, v in kwargs.items()}
        if cls is torch.autograd.profiler.record_function:
            bound = dict(zip(("name", "args"), consts), **kw)
            if set(bound) - {"name", "args"} or not isinstance(bound.get("name"), str):
                raise Unsupported("torch.profiler.record_function with these arguments")
            return ProfilerRangeValue((bound["name"], bound.get("args")))
        if cls is torch.set_grad_enabled:
            mode = kw.get("mode", consts[0] if consts else None)
            if not isinstance(mode, bool):
                raise Unsupported("torch.set_grad_enabled with a non-bool mode")
            # Like the real class, the call itself switches the mode (usable without `with`).
            value = GradModeValue(mode)
            value.enter(tx)
            tx.loose_state.append(value)
            return _AlreadyEntered(value)
        if cls in (
            torch.autocast,
            torch.amp.autocast,
            torch.cpu.amp.autocast,
            torch.cuda.amp.autocast,
        ):
            device = kw.pop("device_type", None)
            if cls is torch.cpu.amp.autocast:
                device = "cpu"
            elif cls is torch.cuda.amp.autocast:
                device = "cuda"
            elif device is None:
                if not consts:
                    raise Unsupported("torch.autocast without a device type")
                device, consts = consts[0], consts[1:]
            names = ["dtype", "enabled", "cache_enabled"]
            params = dict(zip(names, consts))
            params.update(kw)
            dtype = params.get("dtype")
            if dtype is None:
                dtype = torch.get_autocast_dtype(device)
            enabled = params.get("enabled", True)
            cache = params.get("cache_enabled")
            if cache is None:
                cache = torch.is_autocast_cache_enabled()
            return AutocastValue((device, dtype, enabled, cache))
        raise Unsupported(f"the context manager {cls.__qualname__}")


class _AlreadyEntered(Value):
    """``torch.set_grad_enabled(b)``: already switched; ``with`` on it only arranges the exit."""

    __slots__ = ("inner",)

    def __init__(self, inner: GradModeValue) -> None:
        super().__init__(None)
        self.inner = inner

    def describe(self) -> str:
        return "set_grad_enabled context"

    def enter(self, tx: Context) -> Value:
        tx.loose_state.remove(self.inner)
        return ConstantValue(None)

    def exit(self, tx: Context) -> None:
        self.inner.exit(tx)


CONTEXT_CLASSES = (
    torch.no_grad,
    torch.enable_grad,
    torch.set_grad_enabled,
    torch.autocast,
    torch.amp.autocast,
    torch.cpu.amp.autocast,
    torch.cuda.amp.autocast,
    torch.inference_mode,
    torch.autograd.profiler.record_function,
    torch._C.DisableTorchFunctionSubclass,
    torch._C.DisableTorchFunction,
)
_SUBCLASS_FUNCTIONS_OFF = (torch._C.DisableTorchFunctionSubclass, torch._C.DisableTorchFunction)


def _call_with(fn: Any, *args: Any) -> None:
    fn(*args)


class _GradModeState:
    """The global grad mode a trace leaves set by ``torch.set_grad_enabled(b)`` called as a
    function (an :class:`~sapwood_tracer.interpreter.side_effects.ObjectState`): the graph
    ends in the mode it began with, and the entry sets the final mode for real after it."""

    __slots__ = ("mode", "source")

    def __init__(self, mode: bool) -> None:
        setter = torch._C._set_grad_enabled
        self.source = HeldObjectSource(id(setter), "torch._C._set_grad_enabled", setter)
        self.mode = mode

    def replay(self) -> tuple[Any, tuple[Any, ...]]:
        return _call_with, (self.mode,)


def settle_loose_grad_mode(tx: Context) -> None:
    """At a graph break or a return after ``torch.set_grad_enabled(b)`` called as a function
    (outside any ``with`` block): switch the mode back in the graph, so it ends balanced, and
    replay the mode the program left set after the graph, as eager code leaves it set. With a
    ``with`` block open as well, which mode is whose is not modelled: a graph break."""
    loose = tx.loose_state
    if not loose:
        return
    if tx.open_contexts:
        raise Unsupported(
            "torch.set_grad_enabled() called as a function while a with block is open"
        )
    final = loose[-1].enabled
    for value in reversed(loose):
        value.exit(tx)
    loose.clear()
    tx.side_effects.track_state(torch._C._set_grad_enabled, _GradModeState(final))
