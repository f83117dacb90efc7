"""Base value kinds: the abstract :class:`Value` and Python constants.

Invariants:

* A value never holds a real mutable object from outside the trace without a source: reads
  of such objects go through the builder, which records guards.
* :class:`ConstantValue` holds an immutable Python value (int, float, str, dtype, device, ...);
  operations on constants are folded at trace time, so they never reach the graph.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
from typing import Any

import torch

from sapwood_graph import Source

from ..context import TraceContext
from ..errors import TracedException, Unsupported, forget_handled
from ..foreign import is_numpy_scalar
from .enum_code import class_runs_user_code, enum_class_runs_user_code, runs_enum_user_code

__all__ = [
    "BoundBuiltinMethod",
    "BuiltinValue",
    "ConstantValue",
    "Context",
    "IteratorRecipe",
    "IteratorValue",
    "ListIteratorValue",
    "NullValue",
    "RangeIteratorValue",
    "Value",
    "answers_not_implemented",
    "attribute_missing",
    "bind_named",
    "class_runs_user_code",
    "enum_class_runs_user_code",
    "folds_for_real",
    "holds_user_enum",
    "is_constant_type",
    "runs_enum_user_code",
    "truth_of_plain_object",
]

#: The running trace as a value sees it (implemented by the interpreter's session).
Context = TraceContext["Value"]


class Value:
    """A value of the symbolic frame."""

    __slots__ = ("source",)

    def __init__(self, source: Source | None = None) -> None:
        self.source = source

    def describe(self) -> str:
        return type(self).__name__

    def python_type(self) -> type:
        raise Unsupported(f"type() of {self.describe()}")

    def is_constant(self) -> bool:
        return False

    def as_constant(self) -> Any:
        raise Unsupported(f"{self.describe()} where a Python constant is needed")

    # -- protocol ------------------------------------------------------------------
    def getattr(self, tx: Context, name: str) -> Value:
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def hasattr(self, tx: Context, name: str) -> bool:
        try:
            tx.lookup(self, name)  # (an AttributeError the traced code raised is "missing" too)
        except _AttributeMissing as missing:
            forget_handled(missing)
            return False
        return True

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        raise Unsupported(f"setting attribute {name!r} of {self.describe()}")

    def delattr(self, tx: Context, name: str) -> None:
        raise Unsupported(f"del of attribute {name!r} of {self.describe()}")

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        raise Unsupported(f"calling {self.describe()}")

    def unpack(self, tx: Context) -> list[Value]:
        """The values iteration would produce (finite, no side effects)."""
        raise Unsupported(f"iterating over {self.describe()}")

    def iterate(self, tx: Context) -> Value:
        return ListIteratorValue(self.unpack(tx))

    def collect(self, tx: Context) -> list[Value]:
        """The items as ``list(self)`` collects them: ``iter()``, then the length hint that
        sizes the list, then each item (``tuple()``, ``sorted()``, ``str.join``,
        ``list.extend``, ``[*x]`` and ``f(*x)`` collect the same way). A value whose class
        writes ``__len__`` or ``__length_hint__`` in Python, where the hint runs it, models
        this itself; here that is refused."""
        try:
            cls = self.python_type()
        except Unsupported:
            cls = object  # (a value of the trace's own: no code of the user's)
        if any(
            isinstance(k.__dict__.get(name), types.FunctionType)
            for k in cls.__mro__
            for name in ("__len__", "__length_hint__")
        ):
            raise Unsupported(f"the length hint of {self.describe()} (it runs Python code)")
        return self.unpack(tx)

    def truth(self, tx: Context) -> bool:
        raise Unsupported(f"the truth value of {self.describe()}")

    def length(self, tx: Context) -> int:
        raise Unsupported(f"len() of {self.describe()}")

    def getitem(self, tx: Context, key: Value) -> Value:
        raise Unsupported(f"indexing {self.describe()}")

    def setitem(self, tx: Context, key: Value, value: Value) -> None:
        raise Unsupported(f"item assignment on {self.describe()}")

    def delitem(self, tx: Context, key: Value) -> None:
        raise Unsupported(f"item deletion on {self.describe()}")

    def contains(self, tx: Context, item: Value) -> bool:
        return any(tx.equal(v, item) for v in self.unpack(tx))

    def hash_key(self, tx: Context) -> Any:
        """The trace-time key that stands for this value as a dict key or set member: equal
        for two values exactly when Python would find them equal as keys."""
        cls = self.python_type()
        if cls.__hash__ is None:  # (a list, a dict, a class with __eq__ alone: Python's error)
            text = ConstantValue(f"unhashable type: '{cls.__name__}'")
            raise TracedException(cls=TypeError, args=(text,))
        if self.is_constant():
            return self.as_constant()
        if cls.__hash__ is not object.__hash__ or cls.__eq__ is not object.__eq__:
            # equal-but-distinct objects would be one key in Python, two here
            raise Unsupported(
                f"{self.describe()} as a dict key or set member "
                "(its class defines __hash__ or __eq__)"
            )
        ident = tx.identity_key(self)
        if ident is not None:
            if ident[0] == "__object__":
                tx.keyed_by_identity(self)
            return ident
        raise Unsupported(f"{self.describe()} as a dict key or set member")

    def __repr__(self) -> str:
        return f"<{self.describe()}>"


class _AttributeMissing(Unsupported):
    """An attribute lookup failed during the trace (AttributeError in Python)."""


def attribute_missing(owner: str, name: str) -> _AttributeMissing:
    return _AttributeMissing(f"attribute {name!r} of {owner}, which does not exist")


def answers_not_implemented(result: Value) -> bool:
    """Whether a special method's result is ``NotImplemented`` (Python tries the next)."""
    return result.is_constant() and result.as_constant() is NotImplemented


def bind_named(
    what: str, names: tuple[str, ...], args: list[Value], kwargs: dict[str, Value]
) -> dict[str, Value]:
    """``args`` and ``kwargs`` bound to the parameters ``names`` of the modelled callable
    ``what`` (each at most once; a missing one is absent); a call Python would refuse with a
    TypeError is :class:`Unsupported`."""
    if len(args) > len(names):
        raise Unsupported(f"{what} with {len(args)} positional arguments (TypeError)")
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names or key in bound:
            raise Unsupported(f"{what} with the argument {key!r} (TypeError)")
        bound[key] = value
    return bound


class NullValue(Value):
    """The NULL the interpreter pushes below a callable (CPython's calling convention)."""

    __slots__ = ()

    def describe(self) -> str:
        return "NULL"


NULL = NullValue()

_CONSTANT_TYPES: tuple[type, ...] = (
    int,
    float,
    bool,
    str,
    bytes,
    complex,
    type(None),
    type(Ellipsis),
    type(NotImplemented),
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    torch.finfo,
    torch.iinfo,
    range,
    slice,
    torch.Size,
    inspect.Signature,
    inspect.Parameter,
    type(inspect.Parameter.POSITIONAL_ONLY),
    types.UnionType,  # `int | None`, immutable and compared by its members
)


def is_constant_type(value: Any) -> bool:
    """Whether ``value`` is an immutable atom the tracer may fold at trace time."""
    if isinstance(value, torch.Size):
        return True
    if isinstance(value, (tuple, frozenset)):
        return type(value) in (tuple, frozenset) and all(is_constant_type(v) for v in value)
    if type(value) is slice:  # (its bounds may be any objects, which its methods read)
        return all(is_constant_type(v) for v in (value.start, value.stop, value.step))
    return type(value) in _CONSTANT_TYPES or _is_enum_member(value) or is_numpy_scalar(value)


def _is_enum_member(value: Any) -> bool:
    return isinstance(value, enum.Enum)


def holds_user_enum(value: Any) -> bool:
    """Whether ``value`` is (or is a tuple holding) an enum member whose class has Python code
    of the user's: calling a function on it for real could run that code."""
    if isinstance(value, tuple):
        return any(holds_user_enum(item) for item in value)
    return _is_enum_member(value) and enum_class_runs_user_code(value)


def folds_for_real(value: Any, dunder: str) -> bool:
    """Whether calling ``value``'s method ``dunder`` for real at trace time runs no code of
    the user's (false for an enum member whose class has such code, where ``dunder`` is
    written in Python)."""
    if not _is_enum_member(value) or not enum_class_runs_user_code(value):
        return True
    if dunder in ("__str__", "__repr__", "__format__"):
        return False  # builtin ones call the others (``format(x, "")`` is ``str(x)``)
    for klass in type(value).__mro__:
        if dunder in klass.__dict__:
            return not isinstance(klass.__dict__[dunder], types.FunctionType)
    return True


class ConstantValue(Value):
    """An immutable Python value known at trace time."""

    __slots__ = ("value",)

    def __init__(self, value: Any, source: Source | None = None) -> None:
        super().__init__(source)
        self.value = value

    def describe(self) -> str:
        if _is_enum_member(self.value):
            # (not its repr, which may be code of the user's)
            return f"the enum member {type(self.value).__qualname__}.{self.value._name_}"
        if holds_user_enum(self.value):
            return f"a constant {type(self.value).__qualname__} holding enum members"
        text = repr(self.value)
        if len(text) > 40:
            text = text[:37] + "..."
        return f"the constant {text}"

    def python_type(self) -> type:
        return type(self.value)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.value

    def getattr(self, tx: Context, name: str) -> Value:
        if _is_enum_member(self.value) and runs_enum_user_code(self.value, name):
            # (an enum member wrapped from the inputs is an EnumMemberValue, which inlines it)
            raise Unsupported(f"attribute {name!r} of {self.describe()}, which runs user code")
        try:
            attr = getattr(self.value, name)
        except AttributeError:
            raise attribute_missing(self.describe(), name) from None
        if callable(attr) and not isinstance(attr, type):
            return BuiltinValue(attr)
        if isinstance(attr, types.MappingProxyType):
            return ConstantValue(attr)  # a read-only view derived from an immutable constant
        return tx.constant_or_wrap(attr)

    def unpack(self, tx: Context) -> list[Value]:
        try:
            items = list(self.value)
        except TypeError:
            raise Unsupported(f"iterating over {self.describe()}") from None
        return [tx.constant_or_wrap(v) for v in items]

    def iterate(self, tx: Context) -> Value:
        if type(self.value) is range:
            return RangeIteratorValue(self.value)
        try:
            iter(self.value)  # (a builtin constant: no user code runs)
        except TypeError as exc:  # ``for d in 1``: "'int' object is not iterable"
            raise _raised_by_builtin(exc, f"iterating over {self.describe()}") from None
        return super().iterate(tx)

    def truth(self, tx: Context) -> bool:
        return bool(self.value)

    def length(self, tx: Context) -> int:
        try:
            return len(self.value)
        except TypeError as exc:
            raise _raised_by_builtin(exc, f"len() of {self.describe()}") from None

    def getitem(self, tx: Context, key: Value) -> Value:
        k = key.as_constant()
        try:
            return tx.constant_or_wrap(self.value[k])
        except (TypeError, IndexError, KeyError) as exc:
            what = f"indexing {self.describe()} raised {type(exc).__name__}"
            raise _raised_by_builtin(exc, what) from None

    def contains(self, tx: Context, item: Value) -> bool:
        try:
            return item.as_constant() in self.value
        except TypeError:
            raise Unsupported(f"'in' on {self.describe()}") from None


def _raised_by_builtin(error: Exception, what: str) -> Unsupported:
    """``error``, raised by a builtin operation on constants (``len(5)``, ``"ab"[9]``), as
    the same exception raised by the traced code; refused where its arguments are not
    constants."""
    if type(error).__module__ == "builtins" and all(is_constant_type(a) for a in error.args):
        return TracedException(cls=type(error), args=tuple(ConstantValue(a) for a in error.args))
    return Unsupported(what)


# ----------------------------------------------------------------- callables and iterators
class BuiltinValue(Value):
    """A function implemented in C or the standard library, modelled by :mod:`sapwood_tracer.pymodel.builtins`.

    ``fn`` is the real object; it is only ever called on constants, by models that fold it.
    """

    __slots__ = ("fn",)

    def __init__(self, fn: Any, source: Source | None = None) -> None:
        super().__init__(source)
        self.fn = fn

    def describe(self) -> str:
        name = getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", repr(self.fn))
        module = getattr(self.fn, "__module__", None)
        return f"{module}.{name}" if module else str(name)

    def python_type(self) -> type:
        return type(self.fn)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.fn

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        return tx.call_builtin(self, args, kwargs)

    def truth(self, tx: Context) -> bool:
        return truth_of_plain_object(self.fn, self.describe())

    def getattr(self, tx: Context, name: str) -> Value:
        try:
            attr = getattr(self.fn, name)
        except AttributeError:
            raise attribute_missing(self.describe(), name) from None
        return tx.constant_or_wrap(attr)


def truth_of_plain_object(obj: Any, what: str) -> bool:
    """``bool(obj)`` for an object whose class (a function's, a class's metaclass) defines
    neither ``__bool__`` nor ``__len__``: always true."""
    if any("__bool__" in k.__dict__ or "__len__" in k.__dict__ for k in type(obj).__mro__):
        raise Unsupported(f"the truth value of {what}")
    return True


class BoundBuiltinMethod(Value):
    """A method of a container value (``xs.append``): calls ``obj.call_method(name, ...)``."""

    __slots__ = ("name", "receiver")

    def __init__(self, receiver: Value, name: str) -> None:
        super().__init__(None)
        self.receiver = receiver
        self.name = name

    def describe(self) -> str:
        return f"method {self.name} of {self.receiver.describe()}"

    def getattr(self, tx: Context, name: str) -> Value:
        if name == "__name__":  # (a builtin method's name is the one it was read by)
            return ConstantValue(self.name)
        return super().getattr(tx, name)

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        return self.receiver.call_method(tx, self.name, args, kwargs)  # type: ignore[attr-defined, no-any-return]


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class IteratorRecipe:
    """How a graph break makes an iterator again, eagerly: ``fn(*args)``. Each argument is a
    value (passed to the resume function), a tuple of values (passed as one tuple), or another
    recipe (made first). ``fn`` is a real callable the tracer also models, so the resume
    function is traced like any other code."""

    fn: Any
    args: tuple[Value | tuple[Value, ...] | IteratorRecipe, ...]


class IteratorValue(Value):
    """Base of iterators: ``next_value`` returns the next value or ``None`` when exhausted."""

    __slots__ = ()

    def python_type(self) -> type:
        return type(iter(()))

    def next_value(self, tx: Context) -> Value | None:
        raise NotImplementedError

    def remaining(self) -> list[Value] | None:
        """The items still to come, if known without running anything; else None."""
        return None

    def stop_args(self) -> tuple[Value, ...]:
        """The arguments of the StopIteration its exhaustion raises (a generator's return
        value, the first time)."""
        return ()

    def getattr(self, tx: Context, name: str) -> Value:
        hint = name == "__length_hint__" and hasattr(self.python_type(), name)
        if name in ("__next__", "__iter__") or hint:
            return BoundBuiltinMethod(self, name)
        return super().getattr(tx, name)

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        """``it.__next__()`` as ``next(it)``, ``it.__iter__()`` is the iterator itself,
        ``it.__length_hint__()`` the count of items still to come where they are known."""
        hint = name == "__length_hint__" and not args and not kwargs
        if hint and (rest := self.remaining()) is not None:  # (else unknown: refused below)
            return ConstantValue(len(rest))
        if name == "__next__" and not args and not kwargs:
            value = self.next_value(tx)
            if value is None:
                raise TracedException(cls=StopIteration, args=self.stop_args())
            return value
        if name == "__iter__" and not args and not kwargs:
            return self
        raise Unsupported(f"calling {name} of {self.describe()}")

    def rebuild(self) -> IteratorRecipe | None:
        """How a graph break inside a loop over this iterator makes it again (None: it
        cannot). By default: ``iter()`` of the items still to come, when they are known."""
        rest = self.remaining()
        if rest is None:
            return None
        return IteratorRecipe(iter, (tuple(rest),))

    def iterate(self, tx: Context) -> Value:
        return self

    def unpack(self, tx: Context) -> list[Value]:
        out = []
        while (v := self.next_value(tx)) is not None:
            out.append(v)
            if len(out) > 100_000:
                raise Unsupported("an iterator with more than 100000 items")
        return out

    def truth(self, tx: Context) -> bool:
        return True


class ListIteratorValue(IteratorValue):
    """An iterator over a known list of values."""

    __slots__ = ("index", "items", "kind")

    def __init__(self, items: list[Value], kind: type | None = None) -> None:
        super().__init__(None)
        self.items = items
        self.index = 0
        #: the iterator's real type when it is not a plain one (``itertools.product``, ``zip``)
        self.kind = kind

    def describe(self) -> str:
        return f"a {self.kind.__qualname__} iterator" if self.kind is not None else "an iterator"

    def python_type(self) -> type:
        return self.kind if self.kind is not None else type(iter(()))

    def rebuild(self) -> IteratorRecipe | None:
        if self.kind is not None:
            # an iterator of another type (an itertools object, a zip, a reversed list) made
            # again at a graph break as a tuple iterator would change its type and methods
            # (``__setstate__``, ``__reduce__``, a live view of its list)
            return None
        return super().rebuild()

    def next_value(self, tx: Context) -> Value | None:
        if self.index >= len(self.items):
            return None
        v = self.items[self.index]
        self.index += 1
        return v

    def remaining(self) -> list[Value] | None:
        return list(self.items[self.index :])


class RangeIteratorValue(IteratorValue):
    """``iter(range(...))``: each number is made as it is taken, and a graph break makes the
    iterator again from the range still to come (a loop over a million numbers neither
    builds a million values nor passes them to the resume function)."""

    __slots__ = ("rest",)

    def __init__(self, rest: range) -> None:
        super().__init__(None)
        self.rest = rest

    def describe(self) -> str:
        return "a range iterator"

    def python_type(self) -> type:
        return type(iter(range(0)))

    def next_value(self, tx: Context) -> Value | None:
        if not self.rest:
            return None
        value = self.rest[0]
        self.rest = self.rest[1:]
        return ConstantValue(value)

    def remaining(self) -> list[Value] | None:
        return [ConstantValue(v) for v in self.rest]

    def rebuild(self) -> IteratorRecipe | None:
        return IteratorRecipe(iter, (ConstantValue(self.rest),))
