"""Generators: a suspended symbolic frame that resumes on each ``next``.

Invariant: a generator frame only ever runs inside :meth:`GeneratorValue.next_value` (after
its prologue ran at creation), so the values it yields and the side effects between yields
happen in the same order relative to its consumer as in Python.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

import torch

from ..errors import TracedException
from .base import ConstantValue, Context, Value
from .exceptions import ExceptionValue, exception_value
from .iterators import IteratorValue

if TYPE_CHECKING:
    from ..context import FrameState

__all__ = ["MODULE_GENERATOR_CODES", "GeneratorValue", "advanced_generator", "stop_iteration_error"]

#: ``nn.Module``'s own generators: they only read the module tree (whose structure the entry
#: guards), so the entry can make one again and advance it to where the trace left it
MODULE_GENERATOR_CODES = frozenset(
    getattr(torch.nn.Module, name).__code__
    for name in (
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "children",
        "named_children",
        "modules",
        "named_modules",
    )
)


def advanced_generator(fn: Any, args: tuple[Any, ...], produced: int, done: bool) -> Any:
    """``fn(*args)``, a real generator, advanced past ``produced`` values (and to its end
    when ``done``): where the trace left the generator it made of ``fn``."""
    generator = fn(*args)
    for _ in range(produced):
        next(generator)
    if done:
        for _ in generator:
            raise RuntimeError(f"{fn.__qualname__} yielded more than the trace saw")
    return generator


class GeneratorValue(IteratorValue):
    """A generator made during the trace."""

    __slots__ = (
        "backing",
        "done",
        "frame",
        "handled",
        "names",
        "produced",
        "replay",
        "returned",
        "running",
    )

    def __init__(self, frame: FrameState[Value], source: Any = None, backing: Any = None) -> None:
        super().__init__(source)
        self.frame = frame
        self.done = False
        self.running = False
        #: the exception its own code handles (kept while it is suspended in an except block)
        self.handled: Value | None = None
        #: for a real generator of a repositionable code (from the inputs, ``source`` says
        #: where), what is known of that code: once advanced, the entry repositions it
        self.backing = backing
        #: its ``__name__`` and ``__qualname__`` (its function's; None: not known)
        self.names: tuple[str, str] | None = (frame.code.co_name, frame.code.co_qualname)
        #: what its ``return`` gave, until the StopIteration that carries it is raised
        self.returned: Value | None = None
        #: how many values it yielded in the trace
        self.produced = 0
        #: for one of ``nn.Module``'s own generators (``parameters()``, ``named_modules()``,
        #: ...): ``(function, argument values, the trace's side effects)``, so that the entry
        #: can make the real generator again and advance it past ``produced`` values
        self.replay: tuple[Any, list[Value], Any] | None = None

    def describe(self) -> str:
        return f"generator {self.frame.code.co_qualname}"

    def python_type(self) -> type:
        return types.GeneratorType

    def next_value(self, tx: Context) -> Value | None:
        if self.done:
            self.returned = None  # (only the call that finished it carries the value)
            return None
        if self.running:
            raise TracedException(
                cls=ValueError, args=(ConstantValue("generator already executing"),)
            )
        if self.backing is not None:
            tx.side_effects.mutate_container(self)  # (put where the trace leaves it)
        self.frame.push(ConstantValue(None))  # what the suspended yield evaluates to
        self.running = True
        # it runs at a level of its own: what it handles is not its caller's, and the reverse
        tx.enclosing_handled.append(tx.handled)
        tx.handled = self.handled
        try:
            suspended, value = tx.resume(self.frame)
        except TracedException as raised:
            self.done = True  # an exception left the generator: it is finished
            raise _stop_iteration_error(raised) from None
        finally:
            self.running = False
            self.handled = tx.handled
            tx.handled = tx.enclosing_handled.pop()
        if suspended:
            self.produced += 1
        else:
            self.done = True
            if not (value.is_constant() and value.as_constant() is None):
                self.returned = value  # (``return None`` raises a StopIteration without args)
            return None
        return value

    def stop_args(self) -> tuple[Value, ...]:
        returned, self.returned = self.returned, None
        return () if returned is None else (returned,)


def stop_iteration_error(value: Value) -> Value:
    """3.12's ``CALL_INTRINSIC_1 INTRINSIC_STOPITERATION_ERROR`` in a generator's handler: a
    StopIteration becomes ``RuntimeError("generator raised StopIteration")`` whose cause and
    context are it; any other exception is left as it is."""
    if not (isinstance(value, ExceptionValue) and issubclass(value.cls, StopIteration)):
        return value
    error = ExceptionValue(RuntimeError, [ConstantValue("generator raised StopIteration")])
    error.attrs.update(__cause__=value, __context__=value, __suppress_context__=ConstantValue(True))
    return error


def _stop_iteration_error(raised: TracedException) -> TracedException:
    """What leaves a generator whose code raised ``raised``: a StopIteration becomes
    ``RuntimeError("generator raised StopIteration")`` whose cause and context are it
    (PEP 479; 3.11 converts when the exception leaves the frame, 3.12 in the generator's own
    bytecode, which then raises the RuntimeError already)."""
    value = exception_value(raised)
    if not (isinstance(value, ExceptionValue) and issubclass(value.cls, StopIteration)):
        return raised
    error = ExceptionValue(RuntimeError, [ConstantValue("generator raised StopIteration")])
    error.attrs.update(__cause__=value, __context__=value, __suppress_context__=ConstantValue(True))
    converted = TracedException(error)
    converted.chained = True  # (its context is the StopIteration, whatever is handled)
    return converted
