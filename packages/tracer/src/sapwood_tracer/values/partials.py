"""``functools.partial`` objects of the C type (and of Python classes deriving from it that
define nothing of their own).

A partial holds its function, its positional arguments as one tuple and its keywords as one
dict: reading ``p.args`` twice gives the same tuple, and a write through ``p.keywords`` is a
write to the dict later calls read, as in Python. Construction follows ``partial_new``: a
partial of a partial is flattened where the inner one has the C ``__call__`` and never had a
``__dict__`` (a partial made in the trace has none; one passed in may, so it is refused).

The C type may exist more than once in a process (``import_fresh_module`` loads ``_functools``
again): each copy is recognised by its layout, and the value keeps its own class.
"""

from __future__ import annotations

import functools
import types
from typing import Any

from sapwood_graph import Source

from ..errors import Unsupported
from .base import BuiltinValue, ConstantValue, Context, Value, attribute_missing
from .containers import DictValue, TupleValue
from .exceptions import python_error

__all__ = ["PartialValue", "c_partial_base", "make_partial"]

_C_PARTIAL_NAMES = frozenset(functools.partial.__dict__)


def _is_c_partial_type(cls: type) -> bool:
    if cls is functools.partial:
        return True
    return (
        cls.__module__ == "functools"
        and cls.__name__ == "partial"
        and isinstance(cls.__dict__.get("__new__"), types.BuiltinFunctionType)
        and isinstance(cls.__dict__.get("__call__"), types.WrapperDescriptorType)
        and frozenset(cls.__dict__) == _C_PARTIAL_NAMES
    )


#: what a class statement puts in a class that defines nothing
_INERT_NAMES = frozenset(
    {"__module__", "__qualname__", "__doc__", "__firstlineno__", "__static_attributes__"}
)


def c_partial_base(cls: type) -> type | None:
    """The C partial type ``cls`` is, or derives from through Python classes that define
    nothing (``class P(functools.partial): pass``) under the plain metaclass; else None."""
    if not isinstance(cls, type) or type(cls) is not type:
        return None
    for klass in cls.__mro__:
        if _is_c_partial_type(klass):
            return klass
        if klass.__module__ == "builtins" or not _INERT_NAMES.issuperset(klass.__dict__):
            return None
    return None


class PartialValue(Value):
    """A partial object: ``cls`` is its class, the C type or a plain subclass of it. One from
    the inputs keeps its object (``obj``) for identity only (``is``); one made in the trace
    has none."""

    __slots__ = ("args", "cls", "fn", "keywords", "obj")

    def __init__(
        self,
        fn: Value,
        args: TupleValue,
        keywords: DictValue,
        cls: type = functools.partial,
        source: Source | None = None,
        obj: Any = None,
    ) -> None:
        super().__init__(source)
        self.fn = fn
        self.args = args
        self.keywords = keywords
        self.cls = cls
        self.obj = obj

    def describe(self) -> str:
        return f"{self.cls.__name__}({self.fn.describe()})"

    def python_type(self) -> type:
        return self.cls

    def keyword_values(self) -> dict[str, Value]:
        keywords = {
            k.as_constant() if k.is_constant() else k: v for k, v in self.keywords.entries.values()
        }
        if not all(type(k) is str for k in keywords):
            raise Unsupported(f"calling {self.describe()}, whose keywords are not all strings")
        return keywords

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        return tx.call(self.fn, [*self.args.items, *args], {**self.keyword_values(), **kwargs})

    def getattr(self, tx: Context, name: str) -> Value:
        if name == "func":
            return self.fn
        if name == "args":
            return self.args
        if name == "keywords":
            return self.keywords
        if self.source is not None or name == "__dict__" or hasattr(self.cls, name):
            # its own attributes (``__dict__``, set by the program) and partial's methods
            raise Unsupported(f"the attribute {name!r} of {self.describe()}")
        raise attribute_missing(self.describe(), name)


def make_partial(tx: Context, cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``cls(fn, *args, **kwargs)`` for a C partial type or a plain subclass of one."""
    if not args:
        raise python_error(TypeError, "type 'partial' takes at least one argument")
    fn, rest, keywords = args[0], list(args[1:]), dict(kwargs)
    if isinstance(fn, PartialValue):
        if fn.source is not None:
            # flattened only if it never had a ``__dict__``, which Python does not show
            raise Unsupported("functools.partial of a partial passed in")
        rest = [*fn.args.items, *rest]
        keywords = {**fn.keyword_values(), **keywords}
        fn = fn.fn
    callable_ = tx.call_builtin(BuiltinValue(callable), [fn], {})
    if not callable_.as_constant():
        raise python_error(TypeError, "the first argument must be callable")
    pairs: list[tuple[Value, Value]] = [(ConstantValue(k), v) for k, v in keywords.items()]
    return PartialValue(fn, TupleValue(rest), DictValue.from_pairs(tx, pairs), cls)
