"""Objects of the interpreter's own runtime reached from the inputs: ``os.environ`` (each
variable read lazily and guarded) and weak references (read through the reference)."""

from __future__ import annotations

from typing import Any

from sapwood_graph import ItemSource, Source

from ..errors import TracedException, Unsupported
from ..guards.sources import ContainsSource, WeakRefTargetSource
from .base import BoundBuiltinMethod, ConstantValue, Context, Value

__all__ = ["EnvironValue", "WeakRefValue"]


class EnvironValue(Value):
    """``os.environ``: variables are read lazily, each read (or absence) guarded."""

    __slots__ = ("environ",)

    def __init__(self, environ: Any, source: Source) -> None:
        super().__init__(source)
        self.environ = environ

    def describe(self) -> str:
        return "os.environ"

    def python_type(self) -> type:
        return type(self.environ)

    def _read(self, tx: Context, key: Value) -> Value | None:
        assert self.source is not None
        name = key.as_constant()
        if name in self.environ:
            return tx.wrap(self.environ[name], ItemSource(self.source, name))
        tx.guard_false(ContainsSource(self.source, name))
        return None

    def getitem(self, tx: Context, key: Value) -> Value:
        found = self._read(tx, key)
        if found is None:
            raise TracedException(cls=KeyError, args=(key,))
        return found

    def contains(self, tx: Context, item: Value) -> bool:
        return self._read(tx, item) is not None

    def getattr(self, tx: Context, name: str) -> Value:
        if name == "get":
            return BoundBuiltinMethod(self, name)
        raise Unsupported(f"os.environ.{name}")

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        found = self._read(tx, args[0])
        if found is not None:
            return found
        return args[1] if len(args) > 1 else ConstantValue(None)


class WeakRefValue(Value):
    """A weak reference from the inputs; calling it reads its target through the reference."""

    __slots__ = ("ref",)

    def __init__(self, ref: Any, source: Source) -> None:
        super().__init__(source)
        self.ref = ref

    def describe(self) -> str:
        return "a weak reference"

    def python_type(self) -> type:
        return type(self.ref)

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if args or kwargs:
            raise Unsupported("calling a weak reference with arguments (TypeError)")
        assert self.source is not None
        return tx.wrap(self.ref(), WeakRefTargetSource(self.source))
