"""Hook handles (``torch.utils.hooks.RemovableHandle``) made by the traced code.

``Module.register_forward_hook`` and its kin make a handle, whose ``id`` comes from a counter
on the class (``RemovableHandle.next_id``), and store the hook in the module's hook dict under
that id. The counter moves whenever anything registers a hook, AOT autograd's own tracing
included, so the trace cannot know the id the handle will get: the handle is modelled, not
traced.

Invariants:

* The id of a handle made by the trace is a value of its own (:class:`HookIdValue`), equal
  only to itself: it is no id of a hook registered before (the counter only grows).
* Every handle the trace made is made again by the entry, for real and in the order the
  trace made them, before the writes are replayed (:meth:`EffectLog.make_again`): the
  counter moves as it would have, and the hook dicts are written back with the real ids.
* ``handle.remove()`` and ``with handle:`` remove the entries from the dicts in the trace;
  the weak references the real handle holds are never read by the trace.
"""

from __future__ import annotations

from typing import Any

from ..errors import Unsupported
from .base import BoundBuiltinMethod, ConstantValue, Context, Value
from .dicts import DictValue

__all__ = ["HookHandleValue", "HookIdValue", "make_hook_handle"]


class HookIdValue(Value):
    """The ``id`` of a hook handle the trace made: an int known only at replay."""

    __slots__ = ("key",)

    def __init__(self) -> None:
        super().__init__(None)
        self.key = object()  # (no constant is equal to it as a dict key)

    def describe(self) -> str:
        return "the id of a hook handle made in the compiled function"

    def python_type(self) -> type:
        return int

    def hash_key(self, tx: Context) -> Any:
        return self.key


class HookHandleValue(Value):
    """``RemovableHandle(hooks_dict, extra_dict=...)`` made by the trace."""

    __slots__ = ("cls", "dicts", "extra_arg", "hook_id")

    def __init__(self, cls: type, dicts: list[DictValue], extra_arg: Value | None) -> None:
        super().__init__(None)
        self.cls = cls
        self.dicts = dicts  # the hooks dict, then the extra dicts
        self.extra_arg = extra_arg  # the extra_dict argument as given (rebuilt as given)
        self.hook_id = HookIdValue()

    def describe(self) -> str:
        return "a hook handle made in the compiled function"

    def python_type(self) -> type:
        return self.cls

    def getattr(self, tx: Context, name: str) -> Value:
        if name == "id":
            return self.hook_id
        if name in ("remove", "__enter__", "__exit__"):
            return BoundBuiltinMethod(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        if name == "__enter__":
            return self
        self.remove(tx)
        return ConstantValue(None)

    def enter(self, tx: Context) -> Value:
        return self

    def exit(self, tx: Context) -> None:
        self.remove(tx)

    def remove(self, tx: Context) -> None:
        for table in self.dicts:
            if table.contains(tx, self.hook_id):
                table.delitem(tx, self.hook_id)


def make_hook_handle(
    tx: Context, cls: type, args: list[Value], kwargs: dict[str, Value]
) -> HookHandleValue:
    """``RemovableHandle(hooks_dict, *, extra_dict=None)`` in the trace."""
    if len(args) != 1 or set(kwargs) - {"extra_dict"}:
        raise Unsupported("RemovableHandle called with other arguments than torch's own")
    extra = kwargs.get("extra_dict")
    dicts = [args[0]]
    if extra is not None and not (extra.is_constant() and extra.as_constant() is None):
        dicts += tx.unpack(extra) if extra.python_type() is list else [extra]
    if not all(isinstance(d, DictValue) for d in dicts):
        raise Unsupported("a hook handle over something other than dicts")
    handle = HookHandleValue(cls, dicts, extra)  # type: ignore[arg-type]
    tx.side_effects.make_again(handle)
    return handle
