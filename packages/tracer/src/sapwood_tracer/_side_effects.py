"""Side effects of a trace on objects that existed before the call.

Only attribute writes are supported: ``obj.attr = value`` on an object (or module) that came
from the inputs. During the trace later reads of that attribute see the written value; after
the graph runs, the writes are replayed in program order on the real objects.

Invariant: a write is keyed by the real object's identity, not by the source it was reached
through, so two paths to one object see one pending value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sapwood_graph import Source

from .values.base import Value

__all__ = ["AttributeWrite", "SideEffects"]


@dataclass(slots=True)
class AttributeWrite:
    """``setattr(<obj at source>, name, <value>)`` to replay after the graph ran."""

    obj: Any
    source: Source
    name: str
    value: Value


class SideEffects:
    """The attribute writes recorded by one trace, in order."""

    def __init__(self) -> None:
        self.writes: list[AttributeWrite] = []
        self._pending: dict[tuple[int, str], Value] = {}

    def store_attr(self, target: Value, name: str, value: Value) -> None:
        obj = getattr(target, "obj", None)
        if obj is None:
            obj = target.module  # type: ignore[attr-defined]
        assert target.source is not None
        self.writes.append(AttributeWrite(obj, target.source, name, value))
        self._pending[(id(obj), name)] = value

    def pending_attr(self, obj: Any, name: str) -> Value | None:
        return self._pending.get((id(obj), name))

    def final_writes(self) -> list[AttributeWrite]:
        """The writes to replay: the last write of each (object, name), in first-write order."""
        last: dict[tuple[int, str], AttributeWrite] = {}
        for write in self.writes:
            last[(id(write.obj), write.name)] = write
        order: dict[tuple[int, str], None] = {}
        for write in self.writes:
            order.setdefault((id(write.obj), write.name), None)
        return [last[k] for k in order]
