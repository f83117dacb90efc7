"""What a compiled module runs: whatever ``module.forward`` is at the call, compiled.

``nn.Module.__call__`` reads ``self.forward`` at every call, so a forward assigned to the
instance (``m.forward = f.__get__(m)``), replaced on the class, or brought by a new
``__class__`` is the one eager runs from then on. A compiled module reads the attribute the
same way at each call and keeps one compiled callable per function it has seen:

* the function it was built for runs through its own compiled forward (the common case: one
  attribute read and two identity tests per call);
* any other function is compiled on first sight (a bound method's function unbound, called
  with its ``__self__``; a plain function or a callable object as it is) and kept in a small
  table keyed by the object's identity.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

from ..marks import is_disabled

__all__ = ["NO_RECEIVER", "Forwards", "caller_of"]

NO_RECEIVER: Any = object()
"""The receiver of a forward that is not a bound method: it is called with the arguments alone."""

_TABLE_SIZE = 8  # functions kept compiled besides the module's own; more clear the table


def caller_of(target: Any) -> types.FunctionType:
    """``lambda *args, **kwargs: target(*args, **kwargs)``, with a code of its own for each
    target (the cache is per code object: targets must not share one, and its recompile
    limit)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return target(*args, **kwargs)

    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    code = call.__code__.replace(co_name=f"{name} at {id(target):#x}", co_qualname=str(name))
    caller = types.FunctionType(code, call.__globals__, code.co_name, None, call.__closure__)
    functools.update_wrapper(caller, target, updated=())
    return caller


class Forwards:
    """Compiled callables for the forwards a module has had, made by ``make(function)``.

    ``make`` compiles a Python function (unbound); :meth:`set_wrap` names what is applied to
    each result (the backend's generation signal, see ``sapwood_backend.entry``).
    """

    def __init__(self, make: Callable[[types.FunctionType], Callable[..., Any]]) -> None:
        self._make = make
        self._table: dict[int, tuple[Any, Callable[..., Any]]] = {}
        self._wrap: Callable[[Callable[..., Any]], Callable[..., Any]] = _unchanged

    def set_wrap(self, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        """Apply ``wrap`` to every compiled callable from now on (those made before are
        dropped, to be made again)."""
        self._wrap = wrap
        self._table.clear()

    def resolve(self, forward: Any) -> tuple[Callable[..., Any], Any]:
        """The compiled callable for ``forward`` (what ``module.forward`` gave) and the
        receiver to pass first (:data:`NO_RECEIVER` for none)."""
        if type(forward) is types.MethodType and type(forward.__func__) is types.FunctionType:
            target, receiver = forward.__func__, forward.__self__
        else:
            target, receiver = forward, NO_RECEIVER
        entry = self._table.get(id(target))
        if entry is None or entry[0] is not target:
            if len(self._table) >= _TABLE_SIZE:
                self._table.clear()
            if _runs_as_it_is(target):
                entry = (target, target)
            else:
                function = target if type(target) is types.FunctionType else caller_of(target)
                entry = (target, self._wrap(self._make(function)))
            self._table[id(target)] = entry
        return entry[1], receiver

    def bound(self, forward: Any) -> Callable[..., Any]:
        """The compiled callable for ``forward`` with its receiver bound."""
        run, receiver = self.resolve(forward)
        return run if receiver is NO_RECEIVER else functools.partial(run, receiver)


def _runs_as_it_is(target: Any) -> bool:
    """A forward compiled already (``m.forward = sapwood.compile(m.forward)``) or one the
    user excluded from compiling is called as it is."""
    return getattr(target, "__sapwood_original__", None) is not None or is_disabled(target)


def _unchanged(fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn
