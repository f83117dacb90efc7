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

from sapwood_graph import AttrSource, DefaultArgSource, Source

from ..errors import TracedException, Unsupported
from ..guards.sources import CellAtSource, HasAttrSource
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
        if _function_field(name):  # the function type has it: never missing
            raise Unsupported(f"the attribute {name!r} of {self.describe()}")
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

    def hash_key(self, tx: Context) -> Any:
        # the function object itself: wherever it came from, its identity is guarded (or
        # the entry holds it), and a function is a key equal only to itself
        return self.fn

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
            tx.real_cell(cell, CellAtSource(self.source, name, index))
            for index, (cell, name) in enumerate(zip(closure, self.code.co_freevars))
        )

    def getattr(self, tx: Context, name: str) -> Value:
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return ConstantValue(getattr(self.fn, name))
        if name == "__annotations__":
            assert self.source is not None
            return tx.wrap(self.fn.__annotations__, AttrSource(self.source, name))
        if name in ("__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__"):
            return super().getattr(tx, name)
        assert self.source is not None
        if name in self.fn.__dict__:  # attributes set on the function object
            return tx.wrap(self.fn.__dict__[name], AttrSource(self.source, name))
        tx.guard_false(HasAttrSource(self.source, name))
        return super().getattr(tx, name)


#: what a function's own fields accept when assigned (a str, any value, a tuple)
_ASSIGNABLE_FIELDS: dict[str, type] = {
    "__name__": str,
    "__qualname__": str,
    "__doc__": object,
    "__module__": object,
}
if hasattr(types.FunctionType, "__type_params__"):  # (3.12+; functools.wraps copies it)
    _ASSIGNABLE_FIELDS["__type_params__"] = tuple


def _docstring(code: types.CodeType) -> Any:
    """The ``__doc__`` Python gives a new function of ``code`` (by the running version's rule)."""
    closure = tuple(types.CellType() for _ in code.co_freevars) or None
    return types.FunctionType(code, {}, None, None, closure).__doc__


class NestedFunctionValue(FunctionValue):
    """A function made by MAKE_FUNCTION during the trace (lambda, nested def, comprehension).

    Its fields ``__name__``, ``__qualname__``, ``__doc__``, ``__module__`` and
    ``__annotations__`` read as Python's would until the program assigns them (``fields``
    then holds the value); other attributes live in ``namespace``, the value of its
    ``__dict__``. Both are applied to the function when it is rebuilt after the graph.
    """

    __slots__ = (
        "annotations",
        "cell_values",
        "code",
        "default_values",
        "f_globals",
        "fields",
        "globals_source",
        "kwdefault_values",
        "name",
        "namespace",
    )

    def __init__(
        self,
        code: types.CodeType,
        f_globals: dict[str, Any],
        globals_source: Source | None,
        defaults: tuple[Value, ...],
        kwdefaults: dict[str, Value],
        cells: tuple[Value, ...],
        namespace: Value | None = None,
        annotations: Value | None = None,
    ) -> None:
        super().__init__(None)
        self.code = code
        self.f_globals = f_globals
        self.globals_source = globals_source
        self.default_values = defaults
        self.kwdefault_values = kwdefaults
        self.cell_values = cells
        self.name = code.co_name
        #: an empty dict: the ``__dict__`` (None: attributes of it are refused)
        self.namespace = namespace
        #: an empty dict, the ``__annotations__`` Python makes at the first read (None: the
        #: function has annotations, which are not kept, so reading them is refused)
        self.annotations = annotations
        self.fields: dict[str, Value] = {}

    def getattr(self, tx: Context, name: str) -> Value:
        if name in self.fields:
            return self.fields[name]
        if name == "__doc__":
            return ConstantValue(_docstring(self.code))
        if name == "__type_params__" and name in _ASSIGNABLE_FIELDS:
            return ConstantValue(())  # (a function not made by a generic def: no parameters)
        if name == "__module__":
            module = self.f_globals.get("__name__")
            if not is_constant_type(module):
                raise Unsupported(f"__module__ of {self.describe()}")
            return ConstantValue(module)
        if name == "__annotations__" and self.annotations is not None:
            self.fields[name] = self.annotations
            return self.annotations
        if name == "__dict__" and self.namespace is not None:
            return self.namespace
        if name in ("__name__", "__qualname__", "__code__"):
            return super().getattr(tx, name)
        if self.namespace is None or _function_field(name):
            raise Unsupported(f"the attribute {name!r} of {self.describe()}")
        key = ConstantValue(name)
        if self.namespace.contains(tx, key):
            return self.namespace.getitem(tx, key)
        raise attribute_missing(self.describe(), name)

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        kind = _ASSIGNABLE_FIELDS.get(name)
        if kind is not None:
            if kind is str and not (value.is_constant() and type(value.as_constant()) is str):
                raise Unsupported(f"setting {name!r} of {self.describe()} to a non-string")
            if kind is tuple and value.python_type() is not tuple:
                raise Unsupported(f"setting {name!r} of {self.describe()} to a non-tuple")
            self.fields[name] = value
        elif name == "__annotations__" and value.python_type() is dict:
            self.fields[name] = value
        elif self.namespace is None or _function_field(name):
            raise Unsupported(f"setting attribute {name!r} of {self.describe()}")
        else:
            self.namespace.setitem(tx, ConstantValue(name), value)

    def delattr(self, tx: Context, name: str) -> None:
        key = ConstantValue(name)
        if self.namespace is None or _function_field(name):
            raise Unsupported(f"del of attribute {name!r} of {self.describe()}")
        if not self.namespace.contains(tx, key):
            raise TracedException(
                cls=AttributeError,
                args=(ConstantValue(f"'function' object has no attribute {name!r}"),),
            )
        self.namespace.delitem(tx, key)

    def describe(self) -> str:
        return f"function {self.code.co_qualname}"

    def defaults(self, tx: Context) -> tuple[Value, ...]:
        return self.default_values

    def kwdefaults(self, tx: Context) -> dict[str, Value]:
        return self.kwdefault_values

    def cells(self, tx: Context) -> tuple[Value, ...]:
        return self.cell_values


def _function_field(name: str) -> bool:
    """Whether ``name`` is an attribute of the function type (a field such as
    ``__defaults__``, or a method such as ``__get__``), not one of its ``__dict__``."""
    return hasattr(types.FunctionType, name) or name in ("__dict__", "__annotations__")


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
