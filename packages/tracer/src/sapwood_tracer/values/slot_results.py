"""CPython's checks on what a user's special method returns.

CPython calls special methods implicitly (``len()`` and truth tests call ``__len__``; ``if``,
``not``, ``and`` call ``__bool__``; ``for`` calls ``__iter__``; ``hash()``, ``int()``,
``float()``, ``operator.index`` and every slice call theirs) and checks what they return
before using it: ``__len__`` must give an integer (through ``__index__``) that is >= 0 and
fits a ``Py_ssize_t``, ``__bool__`` exactly a bool, ``__hash__`` an int (-1 becomes -2),
``__iter__`` an iterator, and so on. The tracer inlines the user's method
(:func:`inline_special`) and hands what it returned to :func:`checked`, which makes CPython's
own check on it.

It lets CPython make the check: the result, a constant, is returned by the method of the same
name of a stand-in object, whose class has the user's class's name, and the builtin that
calls that method is called for real on the stand-in, at trace time. The value, the exception
and its message are the running interpreter's own, on every version; no message is written
here.

Invariants:

* The stand-in runs no code of the user's. Its method returns only a constant of an immutable
  builtin type (no enum member whose class has Python code), or an instance of an empty class
  named like the result's type, where that type is no kind of what the check accepts and has
  none of the special methods the check reads (``__index__`` for ``__len__``, ``__next__``
  for ``__iter__``).
* A check that warns (CPython converts an ``int`` subclass from ``__int__`` or ``__index__``,
  a ``float`` subclass from ``__float__``, with a ``DeprecationWarning``) is a graph break:
  the warning is Python's to give, at run time.
* A result the trace does not know (a tensor, a symbolic float) is a graph break; a symbolic
  int is specialised (the cache entry is guarded on its value).
"""

from __future__ import annotations

import functools
import operator
import warnings
from typing import Any

from ..errors import TracedException, Unsupported
from .attributes import class_attribute, has_python_special, indexes_in_python, lookup_mro
from .base import Context, Value, holds_user_enum, is_constant_type
from .exceptions import catches, python_error
from .symbolic import specialised_int

__all__ = [
    "checked",
    "inline_special",
    "length_hint",
    "presized",
    "sized_items",
]

#: the builtin that calls each special method and checks its result
_CALLERS: dict[str, Any] = {
    "__len__": len,
    "__bool__": bool,
    "__index__": operator.index,
    "__int__": int,
    "__float__": float,
    "__complex__": complex,
    "__hash__": hash,
    "__length_hint__": operator.length_hint,
    "__str__": str,
    "__repr__": repr,
    "__format__": format,
    "__bytes__": bytes,
    "__iter__": iter,
}

#: what each check accepts without looking further (a result of another type is refused by
#: type alone, unless the type has the special method the check reads: ``_READS``)
_ACCEPTS: dict[str, type] = {
    "__len__": int,
    "__bool__": bool,
    "__index__": int,
    "__int__": int,
    "__float__": float,
    "__complex__": complex,
    "__hash__": int,
    "__length_hint__": int,
    "__str__": str,
    "__repr__": str,
    "__format__": str,
    "__bytes__": bytes,
}
_READS = {"__len__": "__index__", "__iter__": "__next__"}

_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: the type's C name is its __name__


def inline_special(tx: Context, obj: Value, name: str, args: list[Value] | None = None) -> Value:
    """``type(obj).<name>(obj, *args)``, the class's Python method inlined (the caller
    checked that there is one: :func:`has_python_special`)."""
    cls = obj.python_type()
    if not has_python_special(cls, name):
        raise Unsupported(f"{name} of {obj.describe()} (not a Python function)")
    method = class_attribute(tx, cls, name, obj)
    assert method is not None
    return tx.call(method, list(args or ()), {})


def checked(tx: Context, name: str, result: Value, owner: type, *extra: Any) -> Any:
    """What the builtin that calls ``owner``'s special method ``name`` makes of ``result``,
    the value that method returned: ``len``'s int, ``bool``'s bool, ``hash``'s hash, ...
    (``extra``: that builtin's further arguments, a format spec or a default). Raises
    CPython's exception, as a traced one, where CPython refuses the result."""
    if name == "__bool__" and not result.is_constant() and result.python_type() is bool:
        return tx.truth(result)  # (a symbolic bool: guarded)
    result = specialised_int(result)
    if name == "__len__" and indexes_in_python(result):
        # the length goes through operator.index: the result's own __index__, inlined
        index = checked(
            tx, "__index__", inline_special(tx, result, "__index__"), result.python_type()
        )
        return _judged(name, owner, index, extra)
    if result.is_constant():
        constant = result.as_constant()
        if is_constant_type(constant) and not holds_user_enum(constant):
            return _judged(name, owner, constant, extra)
    kind = result.python_type()
    if _refused_by_type(name, kind):
        return _judged(name, owner, _stand_in_class(_c_name(kind, result))(), extra)
    raise Unsupported(f"{owner.__qualname__}.{name} returning {result.describe()}")


def length_hint(tx: Context, obj: Value, default: int = 0) -> int:
    """``operator.length_hint(obj, default)``, as ``PyObject_LengthHint`` makes it (what
    ``list()``, ``tuple()`` and the like size their result with): the class's ``__len__``;
    where that is missing or raises a TypeError, its ``__length_hint__`` (a TypeError there,
    or NotImplemented, gives ``default``); each result checked as CPython checks it."""
    cls = obj.python_type()
    if lookup_mro(cls, "__len__")[0] is not None:
        try:
            return obj.length(tx)
        except TracedException as raised:
            if not catches(raised, TypeError):
                raise
    if lookup_mro(cls, "__length_hint__")[0] is None:
        return default
    try:
        result = inline_special(tx, obj, "__length_hint__")
    except TracedException as raised:
        if not catches(raised, TypeError):
            raise
        return default
    return checked(tx, "__length_hint__", result, cls, default)  # type: ignore[no-any-return]


def sized_items(tx: Context, obj: Value) -> list[Value]:
    """The items of ``obj`` (an object of the user's) as ``list(obj)`` collects them:
    ``iter(obj)``, then the length hint that sizes the list (only its size matters: every
    item is taken), then each item."""
    iterator = obj.iterate(tx)
    presized(length_hint(tx, obj, 8))
    return tx.unpack(iterator)


#: a length hint above this is refused: ``list()`` and ``tuple()`` allocate room for that
#: many items first, and whether that allocation fails (a MemoryError) is the machine's to say
_PRESIZE_LIMIT = 1 << 20


def presized(hint: int) -> None:
    """Refuses a length hint that ``list()``, ``tuple()`` and the like would allocate room for
    with a chance of failing (a MemoryError at run time that the trace cannot foresee)."""
    if hint > _PRESIZE_LIMIT:
        raise Unsupported(f"a length hint of {hint} (Python allocates that much room first)")


def _refused_by_type(name: str, kind: type) -> bool:
    """Whether CPython's check refuses a result of type ``kind`` by its type alone."""
    accepted = _ACCEPTS.get(name)
    if accepted is not None and issubclass(kind, accepted):
        return False
    reads = _READS.get(name)
    return reads is None or not hasattr(kind, reads)


def _c_name(kind: type, result: Value) -> str:
    """The type's name as CPython's messages print it (``tp_name``)."""
    if kind.__flags__ & _HEAP_TYPE or kind.__module__ == "builtins":
        return kind.__name__
    raise Unsupported(f"a special method returning {result.describe()}")


def _judged(name: str, owner: type, returned: Any, extra: tuple[Any, ...]) -> Any:
    """The real builtin on a stand-in whose method ``name`` returns ``returned``."""
    stand_in = _stand_in_returning(owner.__name__, name)(returned)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        try:
            outcome = _CALLERS[name](stand_in, *extra)
        except (TypeError, ValueError, OverflowError) as refused:
            raise python_error(type(refused), *refused.args) from None
    if warned:
        what = f"a {type(returned).__qualname__}"
        kind = _ACCEPTS.get(name)
        if kind is not None and isinstance(returned, kind):
            what += f" (a subclass of {kind.__name__})"
        raise Unsupported(
            f"{owner.__qualname__}.{name} returning {what}, which Python accepts with a "
            f"warning ({warned[0].category.__name__})"
        )
    return outcome


@functools.lru_cache(maxsize=256)
def _stand_in_returning(class_name: str, name: str) -> type:
    def method(self: Any, *args: Any) -> Any:
        return self.returned

    def init(self: Any, returned: Any) -> None:
        self.returned = returned

    return type(class_name, (), {"__slots__": ("returned",), "__init__": init, name: method})


@functools.lru_cache(maxsize=256)
def _stand_in_class(c_name: str) -> type:
    return type(c_name, (), {"__slots__": ()})
