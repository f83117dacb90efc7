"""Objects of the interpreter's own runtime reached from the inputs: ``os.environ`` (each
variable read lazily and guarded), weak references (read through the reference) and
``threading.Lock`` objects used in ``with`` blocks."""

from __future__ import annotations

from typing import Any

from sapwood_graph import ItemSource, Source

from ..errors import TracedException, Unsupported
from ..guards.sources import ContainsSource, ReaderSource, WeakRefTargetSource
from .base import BoundBuiltinMethod, ConstantValue, Context, Value

__all__ = ["EnvironValue", "LockValue", "WeakRefValue"]


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


def lock_held(lock: Any) -> bool:
    return bool(lock.locked())


class LockValue(Value):
    """A ``threading.Lock`` of the inputs as the context of a ``with`` block.

    The block is traced as its body: the compiled call runs as one graph, its writes replayed
    after, with no point in between where another thread could run the block. The entry
    checks that no thread holds the lock when the call starts (another trace, which stops at
    the ``with`` so the eager part takes the lock, waiting as Python would, if one does).
    ``acquire()`` and ``release()`` called by name are graph breaks."""

    __slots__ = ("held", "lock")

    def __init__(self, lock: Any, source: Source) -> None:
        super().__init__(source)
        self.lock = lock
        self.held = False  # (one value per lock in a trace: see builder.SHARED_VALUES)

    def describe(self) -> str:
        return "a threading.Lock"

    def python_type(self) -> type:
        return type(self.lock)

    def enter(self, tx: Context) -> Value:
        assert self.source is not None
        if self.lock.locked() or self.held:
            # (taken again inside its own block, Python would wait forever: so does the
            # eager part of the graph break)
            raise Unsupported("a with block over a threading.Lock that is held")
        tx.guard_false(ReaderSource(self.source, lock_held))
        self.held = True
        return ConstantValue(True)

    def exit(self, tx: Context) -> None:
        self.held = False
