"""Exceptions as values: raised, caught and inspected inside the trace.

An :class:`ExceptionValue` is an exception object that exists only in the trace: raised by the
traced code (``raise ValueError(...)``) or by the model of an operation that raises in Python
(a missing dict key, ``next()`` of an exhausted iterator). Raising it is
:class:`~sapwood_tracer.errors.TracedException`, which the frame sends to the handler its
exception table names, as CPython does; one that no traced handler catches becomes a graph
break at the instruction that raised, which then raises for real.

Invariants:

* Only what the trace knows is answered: ``args``, attributes set on it, its class's methods,
  ``__cause__``/``__context__`` when they are exceptions of the trace. The traceback and
  the exception the *caller* was handling (``OUTER_EXCEPTION``) are unknown, and reading them
  is refused.
* ``str()``/``repr()`` of an exception of a builtin class with constant arguments are those of
  the real exception made from the same arguments.
"""

from __future__ import annotations

import types
from typing import Any

from ..errors import TracedException, Unsupported, forget_handled
from .attributes import class_attribute
from .base import (
    BoundBuiltinMethod,
    ConstantValue,
    Context,
    Value,
    attribute_missing,
    is_constant_type,
)
from .containers import TupleValue

__all__ = [
    "CHAINING_FIELDS",
    "OUTER_EXCEPTION",
    "ExceptionValue",
    "OuterExceptionValue",
    "TracebackValue",
    "catches",
    "chain_context",
    "chaining_writes",
    "exception_value",
    "has_builtin_init",
    "make_exception",
    "python_error",
    "raise_error",
    "raised_for_real",
]


class ExceptionValue(Value):
    """An instance of an exception class, made in the trace."""

    __slots__ = ("args", "attrs", "cls")

    def __init__(self, cls: type, args: list[Value]) -> None:
        super().__init__(None)
        self.cls = cls
        self.args = args
        #: attributes set on it (by its ``__init__``, by ``raise ... from``, by the code)
        self.attrs: dict[str, Value] = {}

    def describe(self) -> str:
        return f"a {self.cls.__qualname__} exception"

    def python_type(self) -> type:
        return self.cls

    def real(self) -> BaseException | None:
        """The same exception made for real as far as its builtin class sees it (arguments
        and the builtin fields set on it), where those are constants (``None`` otherwise, or
        when its builtin ``__init__`` refuses them)."""
        if not all(a.is_constant() for a in self.args):
            return None
        # (only the builtin class's own fields matter to it; other attributes are the program's)
        fields = {k: v for k, v in self.attrs.items() if _builtin_field(self.cls, k)}
        if not all(v is not OUTER_EXCEPTION and v.is_constant() for v in fields.values()):
            return None
        try:
            return make_exception(
                self.cls,
                tuple(a.as_constant() for a in self.args),
                {k: v.as_constant() for k, v in fields.items()},
            )
        except Exception:
            return None

    def getattr(self, tx: Context, name: str) -> Value:
        if name in self.attrs:
            value = self.attrs[name]
            if value is OUTER_EXCEPTION:
                raise Unsupported(f"{name} of an exception: {value.describe()}")
            return value
        if name == "args":
            return TupleValue(list(self.args))
        if name in ("__cause__", "__context__"):
            return ConstantValue(None)
        if name == "__suppress_context__":
            return ConstantValue(False)
        if name == "__traceback__":
            raise Unsupported("the traceback of an exception raised in the traced code")
        if name == "with_traceback":
            return BoundBuiltinMethod(self, name)
        if name == "value" and issubclass(self.cls, StopIteration):
            return self.args[0] if self.args else ConstantValue(None)
        if _builtin_field(self.cls, name):
            # a field the builtin class's C __init__ fills from the arguments (``filename``
            # of SyntaxError, ``start`` of UnicodeError, ...): read it off the real one
            real = self.real()
            if real is None:
                raise Unsupported(f"{name!r} of {self.describe()} with non-constant parts")
            field = getattr(real, name)
            if not is_constant_type(field):
                raise Unsupported(f"{name!r} of {self.describe()}")
            return ConstantValue(field)
        found = class_attribute(tx, self.cls, name, self)
        if found is None:
            raise attribute_missing(self.describe(), name)
        return found

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        if name == "args":
            self.args = tx.unpack(value)
            return
        if name in CHAINING_FIELDS:
            self.attrs.update(chaining_writes(name, value))
            return
        if name == "__traceback__" and not (value.is_constant() and value.as_constant() is None):
            # (None is kept: read back until the exception is raised again)
            if isinstance(value, TracebackValue) or value.source is not None:
                raise Unsupported("setting the traceback of an exception in the traced code")
            if value.python_type() is not types.TracebackType:
                raise_error(TypeError, "__traceback__ must be a traceback or None")
        self.attrs[name] = value

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if name == "__init__":  # BaseException.__init__ (and a builtin subclass's): set args
            self.args = list(args)
            return ConstantValue(None)
        if name == "with_traceback":
            if not (args and args[0].is_constant() and args[0].as_constant() is None):
                raise Unsupported("with_traceback() of a traceback in the traced code")
            return self
        raise Unsupported(f"{self.cls.__qualname__}.{name}")

    def truth(self, tx: Context) -> bool:
        return True

    def hash_key(self, tx: Context) -> Any:
        return ("__exception__", id(self))


def _builtin_base(cls: type) -> type:
    return next(k for k in cls.__mro__ if k.__module__ == "builtins")


def has_builtin_init(cls: type) -> bool:
    """Whether the builtin class ``cls`` derives from has a C ``__init__`` of its own (one
    that fills fields from the arguments, beyond ``args``)."""
    return _builtin_base(cls).__init__ is not BaseException.__init__


def _builtin_field(cls: type, name: str) -> bool:
    """Whether ``name`` is a field (member or getset descriptor) that a builtin exception
    class below BaseException defines."""
    for klass in cls.__mro__:
        if klass is BaseException:
            return False
        raw = klass.__dict__.get(name)
        if raw is not None:
            return klass.__module__ == "builtins" and isinstance(
                raw, (types.MemberDescriptorType, types.GetSetDescriptorType)
            )
    return False


def make_exception(cls: type, args: tuple[Any, ...], attrs: dict[str, Any]) -> BaseException:
    """The exception of class ``cls`` that the traced program made: arguments passed to its
    builtin base's ``__init__`` (which fills fields such as SyntaxError's ``filename``), then
    the attributes the program set. A ``__init__`` written in Python already ran in the trace;
    only its effect on the builtin part (the arguments it passed up) is replayed here."""
    exc: Any
    if issubclass(cls, OSError) and cls.__module__ == "builtins":
        exc = cls(*args)  # its fields are filled by __new__, from the arguments
    else:
        exc = BaseException.__new__(cls)
        init = _builtin_base(cls).__init__
        if init is BaseException.__init__:
            exc.args = args
        else:
            init(exc, *args)
    for name, value in attrs.items():
        setattr(exc, name, value)
    return exc


#: the fields of implicit and explicit chaining, set through BaseException's descriptors
CHAINING_FIELDS = frozenset({"__context__", "__cause__", "__suppress_context__"})


def chaining_writes(name: str, value: Value) -> list[tuple[str, Value]]:
    """What ``exc.<name> = value`` stores for a chaining field, as BaseException's setters do
    it: a context or cause must be an exception or None (TypeError otherwise), setting the
    cause also sets ``__suppress_context__``, which must be a bool."""
    if name == "__suppress_context__":
        if not value.is_constant():
            raise Unsupported(f"setting __suppress_context__ to {value.describe()}")
        if type(value.as_constant()) is not bool:
            raise_error(TypeError, "attribute value type must be bool")
        return [(name, value)]
    if not (value.is_constant() and value.as_constant() is None):
        if value is OUTER_EXCEPTION:
            raise Unsupported(f"setting {name} to {value.describe()}")
        kind = value.python_type()
        if not (isinstance(kind, type) and issubclass(kind, BaseException)):
            what = "context" if name == "__context__" else "cause"
            raise_error(TypeError, f"exception {what} must be None or derive from BaseException")
    if name == "__cause__":
        return [(name, value), ("__suppress_context__", ConstantValue(True))]
    return [(name, value)]


class OuterExceptionValue(Value):
    """The exception the caller of the compiled function may be handling, unknown here."""

    __slots__ = ()

    def describe(self) -> str:
        return "the exception being handled by the caller (unknown while tracing)"

    def python_type(self) -> type:
        raise Unsupported(self.describe())


OUTER_EXCEPTION = OuterExceptionValue()


class TracebackValue(Value):
    """The traceback of an exception raised in the traced code, as a ``with`` block hands it
    to ``__exit__``: a real traceback (never None) whose frames the trace does not have, so
    everything but its identity and truth is refused, and so is rebuilding it."""

    __slots__ = ("exception",)

    def __init__(self, exception: ExceptionValue) -> None:
        super().__init__(None)
        self.exception = exception

    def describe(self) -> str:
        return f"the traceback of {self.exception.describe()}"

    def python_type(self) -> type:
        return types.TracebackType

    def truth(self, tx: Context) -> bool:
        return True

    def hash_key(self, tx: Context) -> Any:
        # two values may stand for one traceback object (or for two, as it grows)
        raise Unsupported(f"{self.describe()} as a dict key or set member")


def chain_context(tx: Context, value: ExceptionValue, handled: Value | None) -> None:
    """Python's implicit chaining when ``value`` is raised (not re-raised) while ``handled``
    is the exception being handled: ``value.__context__`` becomes ``handled``, after any link
    of ``handled``'s own context chain that leads back to ``value`` is cut (set to None), so
    no cycle forms. Nothing changes while nothing is handled or ``value`` is the one handled.
    """
    if handled is None or handled is value:
        return
    if handled is OUTER_EXCEPTION:
        if tx.caller_handles_nothing():
            return
        if "__context__" in value.attrs:
            # the caller's exception replaces the old context, unless there is none: unknown
            raise Unsupported(
                f"raising {value.describe()} again while the caller may be handling an exception"
            )
        value.attrs["__context__"] = handled
        return
    link, seen = handled, set()
    while isinstance(link, ExceptionValue) and id(link) not in seen:
        seen.add(id(link))
        context = link.attrs.get("__context__")
        if context is value:
            link.attrs["__context__"] = ConstantValue(None)
            break
        link = context
    value.attrs["__context__"] = handled


def exception_value(raised: TracedException) -> Value:
    """The exception value a traced raise carries (made from its class and arguments when
    the raise came from the model of an operation)."""
    if raised.value is None:
        assert raised.cls is not None
        raised.value = ExceptionValue(raised.cls, list(raised.values))  # type: ignore[arg-type]
    return raised.value  # type: ignore[return-value]


def catches(raised: TracedException, kind: type | tuple[type, ...]) -> bool:
    """Whether the traced exception ``raised`` is of the class ``kind`` (or of one of them),
    which the model asking catches: then it is handled, and its Python traceback is dropped
    (:func:`~sapwood_tracer.errors.forget_handled`)."""
    if not issubclass(getattr(exception_value(raised), "cls", type(None)), kind):
        return False
    forget_handled(raised)
    return True


def raised_for_real(error: BaseException, what: str) -> Unsupported:
    """An exception that a pure function raised, called on the trace's constants, as the
    same exception raised by the traced code (its arguments constants), or, where its
    arguments are not constants, an :class:`Unsupported` naming it."""
    if isinstance(error, FloatingPointError):  # numpy's warning, raised (``numpy_errors_raise``)
        return Unsupported(f"{what} on numpy scalars, where numpy warns ({error})")
    if type(error).__module__ == "builtins" and all(is_constant_type(a) for a in error.args):
        return TracedException(ExceptionValue(type(error), [ConstantValue(a) for a in error.args]))
    return Unsupported(f"{what} raising {type(error).__name__}: {error}")


def python_error(cls: type[BaseException], *args: Any) -> TracedException:
    """The error Python raises here: ``cls(*args)`` (constant arguments), to raise."""
    return TracedException(ExceptionValue(cls, [ConstantValue(a) for a in args]))


def raise_error(cls: type[BaseException], *args: Any) -> Any:
    """Raise ``cls(*args)`` in the traced program (as a traced exception)."""
    raise python_error(cls, *args)
