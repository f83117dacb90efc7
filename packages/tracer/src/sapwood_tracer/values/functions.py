"""Callables: user functions (inlined), bound methods, builtins, ``functools.partial``.

Invariants:

* A user function is never called for real during a trace: calling one inlines its bytecode
  in a child frame (see ``TraceContext.inline`` in :mod:`sapwood_tracer.context`).
* A real function object read from the inputs is guarded by identity; its defaults and closure
  cells are read through sources, so changing them recompiles.
* Builtins are modelled one by one (:mod:`sapwood_tracer.pymodel.builtins`); an unknown builtin is refused, never run.
"""

from __future__ import annotations

import types
from typing import Any

from sapwood_graph import AttrSource, ClosureCellSource, DefaultArgSource, Source

from ..errors import TracedException, Unsupported
from ..guards.sources import HasAttrSource
from .base import ConstantValue, Context, Value, attribute_missing, is_constant_type

__all__ = [
    "BoundMethodValue",
    "CellValue",
    "ConstantResultFunctionValue",
    "FunctionValue",
    "NestedFunctionValue",
    "RealCellValue",
    "UserFunctionValue",
]


class CellValue(Value):
    """A closure cell created during the trace (by MAKE_CELL)."""

    __slots__ = ("contents",)

    def __init__(self, contents: Value | None = None) -> None:
        super().__init__(None)
        self.contents = contents

    def describe(self) -> str:
        return "a closure cell"

    def load(self, tx: Context, name: str) -> Value:
        if self.contents is None:
            raise TracedException(
                cls=NameError,
                args=(
                    ConstantValue(
                        f"cannot access free variable {name!r} where it is not associated "
                        "with a value in enclosing scope"
                    ),
                ),
            )
        return self.contents

    def store(self, tx: Context, value: Value | None) -> None:
        self.contents = value


class RealCellValue(Value):
    """A closure cell of a function that existed before the trace: read through its source."""

    __slots__ = ("cell", "stored")

    def __init__(self, cell: types.CellType, source: Source) -> None:
        super().__init__(source)
        self.cell = cell
        self.stored: Value | None = None

    def describe(self) -> str:
        return "a closure cell"

    def load(self, tx: Context, name: str) -> Value:
        if self.stored is not None:
            return self.stored
        try:
            contents = self.cell.cell_contents
        except ValueError:
            raise Unsupported(f"free variable {name!r} read before assignment") from None
        # a cell made inside the trace is stored to before it is read, so it has a value here
        self.stored = tx.wrap(contents, self.source)  # type: ignore[arg-type]
        return self.stored

    def store(self, tx: Context, value: Value | None) -> None:
        if value is None:
            raise Unsupported("del of a nonlocal variable of a function defined outside")
        # written back to the real cell after the graph ran (see _side_effects)
        self.stored = value
        tx.side_effects.store_cell(self)


class FunctionValue(Value):
    """A Python function whose bytecode the interpreter inlines."""

    __slots__ = ()

    code: types.CodeType
    f_globals: dict[str, Any]
    globals_source: Source | None
    name: str

    def defaults(self, tx: Context) -> tuple[Value, ...]:
        raise NotImplementedError

    def kwdefaults(self, tx: Context) -> dict[str, Value]:
        raise NotImplementedError

    def cells(self, tx: Context) -> tuple[Value, ...]:
        raise NotImplementedError

    def truth(self, tx: Context) -> bool:
        return True  # (a function's class defines neither __bool__ nor __len__)

    def python_type(self) -> type:
        return types.FunctionType

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        return tx.inline(self, args, kwargs)

    def getattr(self, tx: Context, name: str) -> Value:
        if name == "__name__":
            return ConstantValue(self.name)
        if name == "__qualname__":
            return ConstantValue(self.code.co_qualname)
        if name == "__code__":
            return ConstantValue(self.code)
        raise attribute_missing(self.describe(), name)


class UserFunctionValue(FunctionValue):
    """A real Python function object (guarded by identity where it came from)."""

    __slots__ = ("code", "f_globals", "fn", "globals_source", "name")

    def __init__(self, fn: types.FunctionType, source: Source) -> None:
        super().__init__(source)
        self.fn = fn
        self.code = fn.__code__
        self.f_globals = fn.__globals__
        self.globals_source = None
        self.name = fn.__name__

    def describe(self) -> str:
        return f"function {self.fn.__qualname__}"

    def defaults(self, tx: Context) -> tuple[Value, ...]:
        assert self.source is not None
        return tuple(
            tx.wrap(v, DefaultArgSource(self.source, i))
            for i, v in enumerate(self.fn.__defaults__ or ())
        )

    def kwdefaults(self, tx: Context) -> dict[str, Value]:
        assert self.source is not None
        return {
            k: tx.wrap(v, DefaultArgSource(self.source, k))
            for k, v in (self.fn.__kwdefaults__ or {}).items()
        }

    def cells(self, tx: Context) -> tuple[Value, ...]:
        assert self.source is not None
        closure = self.fn.__closure__ or ()
        return tuple(
            tx.real_cell(cell, ClosureCellSource(self.source, name))
            for cell, name in zip(closure, self.code.co_freevars)
        )

    def getattr(self, tx: Context, name: str) -> Value:
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return ConstantValue(getattr(self.fn, name))
        if name in ("__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__"):
            return super().getattr(tx, name)
        assert self.source is not None
        if name in self.fn.__dict__:  # attributes set on the function object
            return tx.wrap(self.fn.__dict__[name], AttrSource(self.source, name))
        tx.guard_false(HasAttrSource(self.source, name))
        return super().getattr(tx, name)


class NestedFunctionValue(FunctionValue):
    """A function made by MAKE_FUNCTION during the trace (lambda, nested def, comprehension)."""

    __slots__ = (
        "cell_values",
        "code",
        "default_values",
        "f_globals",
        "globals_source",
        "kwdefault_values",
        "name",
    )

    def __init__(
        self,
        code: types.CodeType,
        f_globals: dict[str, Any],
        globals_source: Source | None,
        defaults: tuple[Value, ...],
        kwdefaults: dict[str, Value],
        cells: tuple[Value, ...],
    ) -> None:
        super().__init__(None)
        self.code = code
        self.f_globals = f_globals
        self.globals_source = globals_source
        self.default_values = defaults
        self.kwdefault_values = kwdefaults
        self.cell_values = cells
        self.name = code.co_name

    def describe(self) -> str:
        return f"function {self.code.co_qualname}"

    def defaults(self, tx: Context) -> tuple[Value, ...]:
        return self.default_values

    def kwdefaults(self, tx: Context) -> dict[str, Value]:
        return self.kwdefault_values

    def cells(self, tx: Context) -> tuple[Value, ...]:
        return self.cell_values


class BoundMethodValue(Value):
    """``obj.method``: calling it calls ``function(obj, ...)``."""

    __slots__ = ("function", "receiver")

    def __init__(self, function: Value, receiver: Value) -> None:
        super().__init__(None)
        self.function = function
        self.receiver = receiver

    def describe(self) -> str:
        return f"bound method of {self.function.describe()}"

    def python_type(self) -> type:
        return types.MethodType

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        return tx.call(self.function, [self.receiver, *args], kwargs)

    def getattr(self, tx: Context, name: str) -> Value:
        if name == "__self__":
            return self.receiver
        if name == "__func__":
            return self.function
        return self.function.getattr(tx, name)


#: The attribute ``torch._dynamo.assume_constant_result`` sets on a function (libraries such as
#: transformers set it directly on install probes and version checks, without importing torch).
CONSTANT_RESULT_MARK = "_dynamo_marked_constant"


def marked_constant_result(fn: Any) -> bool:
    """Whether ``fn`` (or the function a memoising wrapper holds) promises a constant result."""
    target = getattr(fn, "__wrapped__", fn) if not isinstance(fn, types.FunctionType) else fn
    return getattr(target, CONSTANT_RESULT_MARK, False) is True


class ConstantResultFunctionValue(Value):
    """A function marked with ``torch._dynamo.assume_constant_result``: its author promises the
    result is fixed for the life of the process (an install probe, a version check).

    Called with constant arguments, it runs for real at trace time and its result, when a
    constant, enters the trace as a constant, as under ``torch.compile``. Any other call (a
    non-constant argument, a non-constant result) traces the function as usual, so the mark
    only ever saves tracing work; an exception raised by the real call refuses the call (the
    trace breaks there) rather than guessing.
    """

    __slots__ = ("fn", "traced")

    def __init__(self, fn: Any, traced: Value, source: Source) -> None:
        super().__init__(source)
        self.fn = fn
        self.traced = traced

    def describe(self) -> str:
        return f"constant-result function {getattr(self.fn, '__qualname__', self.fn)!r}"

    def python_type(self) -> type:
        return type(self.fn)

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        values = [*args, *kwargs.values()]
        if all(v.is_constant() and is_constant_type(v.as_constant()) for v in values):
            real_args = [a.as_constant() for a in args]
            real_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
            try:
                result = self.fn(*real_args, **real_kwargs)
            except Exception as exc:
                raise Unsupported(
                    f"{self.describe()} raised {type(exc).__name__} when run at trace time"
                ) from exc
            if is_constant_type(result):
                return ConstantValue(result)
        return self.traced.call(tx, args, kwargs)

    def getattr(self, tx: Context, name: str) -> Value:
        return self.traced.getattr(tx, name)
