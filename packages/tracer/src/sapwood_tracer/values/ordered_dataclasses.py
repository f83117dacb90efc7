"""Dataclasses that are also ordered dicts of their set fields (Hugging Face's ``ModelOutput``).

Such a class behaves like a dataclass (fields as attributes, ``None`` by default) and like an
``OrderedDict`` holding the fields whose value is not ``None``, in field order; integer and
slice indexing go through ``to_tuple()``. The value models exactly that; the real class is
only called when the result is rebuilt after the graph ran (with the same keyword
arguments, so its own ``__post_init__`` sees what eager code would have passed).
"""

from __future__ import annotations

import collections
import dataclasses

from ..errors import TracedException, Unsupported
from .attributes import class_attribute
from .base import BoundBuiltinMethod, ConstantValue, Context, Value, attribute_missing
from .containers import DictValue, ListValue, TupleValue

__all__ = ["OrderedDataclassValue", "is_ordered_dataclass"]


def is_ordered_dataclass(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) and issubclass(cls, collections.OrderedDict)


def _is_none(v: Value) -> bool:
    return isinstance(v, ConstantValue) and v.value is None


class OrderedDataclassValue(Value):
    """An instance made during the trace; ``fields`` maps every field name to its value."""

    __slots__ = ("cls", "fields")

    def __init__(self, cls: type, fields: dict[str, Value]) -> None:
        super().__init__(None)
        self.cls = cls
        self.fields = fields

    @classmethod
    def construct(
        cls, tx: Context, klass: type, args: list[Value], kwargs: dict[str, Value]
    ) -> OrderedDataclassValue:
        names = [f.name for f in dataclasses.fields(klass)]
        values: dict[str, Value] = {}
        for name, value in zip(names, args):
            values[name] = value
        for name, value in kwargs.items():
            if name not in names or name in values:
                raise Unsupported(f"{klass.__qualname__}() with the keyword {name!r}")
            values[name] = value
        for f in dataclasses.fields(klass):
            if f.name not in values:
                if f.default is not None and f.default is not dataclasses.MISSING:
                    raise Unsupported(
                        f"{klass.__qualname__} field {f.name!r} with a non-None default"
                    )
                values[f.name] = ConstantValue(None)
        first = values[names[0]] if names else None
        others_none = all(_is_none(values[n]) for n in names[1:])
        if (
            first is not None
            and others_none
            and isinstance(first, (DictValue, ListValue, TupleValue))
        ):
            raise Unsupported(
                f"{klass.__qualname__} built from a mapping or iterator in its first field"
            )
        return cls(klass, {n: values[n] for n in names})

    def describe(self) -> str:
        return f"a {self.cls.__qualname__}"

    def python_type(self) -> type:
        return self.cls

    def items(self) -> list[tuple[str, Value]]:
        return [(k, v) for k, v in self.fields.items() if not _is_none(v)]

    def getattr(self, tx: Context, name: str) -> Value:
        if name in self.fields:
            return self.fields[name]
        if name in ("to_tuple", "keys", "values", "items", "get"):
            return BoundBuiltinMethod(self, name)
        found = class_attribute(tx, self.cls, name, self)
        if found is None:
            raise attribute_missing(self.describe(), name)
        return found

    def call_method(self, tx: Context, name: str, args: list[Value], kwargs: dict) -> Value:
        items = self.items()
        if name == "to_tuple":
            return TupleValue([v for _, v in items])
        if name == "keys":
            return ListValue([ConstantValue(k) for k, _ in items])
        if name == "values":
            return ListValue([v for _, v in items])
        if name == "items":
            return ListValue([TupleValue([ConstantValue(k), v]) for k, v in items])
        if name == "get":
            key = args[0].as_constant()
            return dict(items).get(key, args[1] if len(args) > 1 else ConstantValue(None))
        raise Unsupported(f"{self.cls.__qualname__}.{name}")

    def getitem(self, tx: Context, key: Value) -> Value:
        k = key.as_constant()
        items = self.items()
        if isinstance(k, str):
            found = dict(items).get(k)
            if found is None:
                raise TracedException(cls=KeyError, args=(key,))
            return found
        values = TupleValue([v for _, v in items])
        return values.getitem(tx, key)

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        if name not in self.fields:
            raise Unsupported(f"setting the non-field attribute {name!r} of {self.describe()}")
        if _is_none(value) and not _is_none(self.fields[name]):
            # ModelOutput keeps the old dict entry when a set field is assigned None
            raise Unsupported(f"assigning None to the set field {name!r} of {self.describe()}")
        self.fields[name] = value

    def setitem(self, tx: Context, key: Value, value: Value) -> None:
        self.setattr(tx, key.as_constant(), value)

    def unpack(self, tx: Context) -> list[Value]:
        return [ConstantValue(k) for k, _ in self.items()]

    def length(self, tx: Context) -> int:
        return len(self.items())

    def truth(self, tx: Context) -> bool:
        return bool(self.items())

    def contains(self, tx: Context, item: Value) -> bool:
        return item.as_constant() in dict(self.items())

    def rebuild_kwargs(self) -> dict[str, Value]:
        return dict(self.items())
