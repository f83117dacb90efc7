"""Dataclasses that are also ordered dicts of their set fields (Hugging Face's ``ModelOutput``).

Such a class behaves like a dataclass (fields as attributes, ``None`` by default) and like an
``OrderedDict`` holding the fields whose value is not ``None``, in field order; integer and
slice indexing go through ``to_tuple()``. The value models exactly that; the real class is
only called when the result is rebuilt after the graph ran (with the same keyword
arguments, so its own ``__post_init__`` sees what eager code would have passed).

An instance passed in (a source, ``obj``) is modelled only where the model is exact: its class
is ``ModelOutput``'s kind (:func:`is_model_output_class`: every method the model stands for is
``ModelOutput``'s or ``OrderedDict``'s), and the object's dict entries agree with its
attributes (:func:`stored_keys`, guarded). Assignments to it are attribute writes replayed on
the real object after the graph (``ModelOutput.__setattr__`` stores the entry too).

Invariant: the dict's keys are the set fields in field order. A key added where Python would
append it after a later set field, an entry set to ``None`` (a key whose value is ``None``),
and the old cache names that ``ModelOutput`` renames are refused, never guessed.
"""

from __future__ import annotations

import collections
import dataclasses
import weakref
from collections.abc import Callable
from typing import Any

from ..errors import TracedException, Unsupported
from .attributes import class_attribute
from .base import BoundBuiltinMethod, ConstantValue, Context, Value, attribute_missing
from .containers import DictValue, ListValue, TupleValue

__all__ = [
    "OrderedDataclassValue",
    "is_model_output_class",
    "is_ordered_dataclass",
    "rebuild_expression",
    "stored_keys",
]


def is_ordered_dataclass(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) and issubclass(cls, collections.OrderedDict)


#: keys that ``ModelOutput`` renames to ``"cache"`` (with a deprecation warning)
_OLD_CACHE_NAMES = ("past_key_values", "cache_params")

#: the methods the value stands for, and whose they must be: ``ModelOutput``'s own ...
_OWN_METHODS = ("__getitem__", "__setitem__", "__setattr__", "__delitem__", "__contains__", "get")
#: ... or the ones it inherits (OrderedDict's storage and order, object's attribute lookup)
_INHERITED = ("keys", "values", "items", "__iter__", "__len__", "__reversed__", "__getattribute__")


def _output_base(cls: type) -> type | None:
    """The class in ``cls``'s MRO that defines ``to_tuple`` (``ModelOutput`` for its kind)."""
    return next((k for k in cls.__mro__ if "to_tuple" in vars(k)), None)


def is_model_output_class(cls: type) -> bool:
    """Whether instances of ``cls`` behave as the value models them: a dataclass whose base
    defining ``to_tuple`` is Hugging Face's ``ModelOutput`` (an ``OrderedDict`` subclass),
    and nothing in between overrides a method the value stands for or adds ``__getattr__``
    or ``__bool__``."""
    if not is_ordered_dataclass(cls):
        return False
    base = _output_base(cls)
    if (
        base is None
        or base.__name__ != "ModelOutput"
        or not base.__module__.startswith("transformers.")
        or base.__bases__ != (collections.OrderedDict,)
        or hasattr(cls, "__getattr__")
        or hasattr(cls, "__bool__")
    ):
        return False
    if any(getattr(cls, m) is not getattr(base, m) for m in ("to_tuple", *_OWN_METHODS)):
        return False
    if any(getattr(cls, m) is not getattr(collections.OrderedDict, m) for m in _INHERITED):
        return False
    names = [f.name for f in dataclasses.fields(cls)]
    return bool(names) and not (
        hasattr(base, "_replace_old_cache_name") and set(names) & set(_OLD_CACHE_NAMES)
    )


def stored_keys(obj: Any) -> tuple[str, ...] | None:
    """The keys of ``obj`` (of a :func:`is_model_output_class` class) where its storage agrees
    with its attributes, else ``None``: the instance dict holds the fields and nothing else,
    and the dict's entries, in order, are the fields whose attribute is not ``None``, each
    holding the attribute's very object (``dict.__setitem__`` behind the class's back, or a
    set field assigned ``None``, breaks that). A pure function of the object, read without
    running its class's code; a guard reads it on every call."""
    names = [f.name for f in dataclasses.fields(type(obj))]
    attrs = object.__getattribute__(obj, "__dict__")
    if len(attrs) != len(names) or not all(n in attrs for n in names):
        return None
    expected = [(n, attrs[n]) for n in names if attrs[n] is not None]
    try:
        stored = list(collections.OrderedDict.items(obj))
    except RuntimeError:  # (the order and the dict disagree on the size)
        return None
    if len(stored) != len(expected) or dict.__len__(obj) != len(expected):
        return None
    for (k, v), (n, a) in zip(stored, expected):
        if type(k) is not str or k != n or v is not a:
            return None
    return tuple(n for n, _ in expected)


def _is_none(v: Value) -> bool:
    return isinstance(v, ConstantValue) and v.value is None


class OrderedDataclassValue(Value):
    """An instance made during the trace, or one from the inputs (``source`` and ``obj``, the
    real object); ``fields`` maps every field name to its value."""

    __slots__ = ("cls", "fields", "obj")

    def __init__(
        self, cls: type, fields: dict[str, Value], source: Any = None, obj: Any = None
    ) -> None:
        super().__init__(source)
        self.cls = cls
        self.fields = fields
        self.obj = obj

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
            key = self._key(args[0])
            return dict(items).get(key, args[1] if len(args) > 1 else ConstantValue(None))
        raise Unsupported(f"{self.cls.__qualname__}.{name}")

    def _key(self, key: Value) -> Any:
        k = key.as_constant()
        if k in _OLD_CACHE_NAMES and hasattr(self.cls, "_replace_old_cache_name"):
            raise Unsupported(f"the old cache name {k!r} as a key of {self.describe()}")
        return k

    def getitem(self, tx: Context, key: Value) -> Value:
        k = self._key(key)
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
        if _is_none(value):
            if not _is_none(self.fields[name]):
                # ModelOutput keeps the old dict entry when a set field is assigned None
                raise Unsupported(f"assigning None to the set field {name!r} of {self.describe()}")
            return  # (None over None: nothing changes)
        if _is_none(self.fields[name]):
            names = list(self.fields)
            later = [n for n in names[names.index(name) + 1 :] if not _is_none(self.fields[n])]
            if later:
                # the new key goes last in Python's dict, after the later field's
                raise Unsupported(
                    f"setting the field {name!r} of {self.describe()} while the later field "
                    f"{later[0]!r} is set (the dict's order would no longer be the fields')"
                )
        if self.source is not None:
            # from the inputs: replayed after the graph as ``setattr``, which for a value that
            # is not None stores the dict entry too, as ``__setitem__`` does
            tx.record_attr_write(self, name, value)
        self.fields[name] = value

    def setitem(self, tx: Context, key: Value, value: Value) -> None:
        k = self._key(key)
        if not isinstance(k, str) or _is_none(value):
            # (None is stored as an entry by __setitem__, unlike by __setattr__)
            raise Unsupported(f"{self.describe()}[{k!r}] = {value.describe()}")
        self.setattr(tx, k, value)

    def unpack(self, tx: Context) -> list[Value]:
        return [ConstantValue(k) for k, _ in self.items()]

    def length(self, tx: Context) -> int:
        return len(self.items())

    def truth(self, tx: Context) -> bool:
        return bool(self.items())

    def contains(self, tx: Context, item: Value) -> bool:
        return self._key(item) in dict(self.items())

    def rebuild_kwargs(self) -> dict[str, Value]:
        return dict(self.items())


#: per class: whether :func:`_fresh` makes what its constructor makes (found on its first
#: rebuild, which calls the constructor)
_FAST: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def _fresh(cls: type, names: tuple[str, ...], values: tuple[Any, ...]) -> Any:
    """What a ``ModelOutput`` class's constructor makes of these field values, without its
    code: every field an attribute, in field order, and the fields that are not ``None``
    entries, in field order (each ``__setattr__`` of the dataclass ``__init__`` stores both;
    ``__post_init__`` stores them again in place)."""
    obj = collections.OrderedDict.__new__(cls)
    for name, value in zip(names, values):
        object.__setattr__(obj, name, value)
        if value is not None:
            collections.OrderedDict.__setitem__(obj, name, value)
    return obj


def _same_state(a: Any, b: Any) -> bool:
    attrs_a = object.__getattribute__(a, "__dict__")
    attrs_b = object.__getattribute__(b, "__dict__")
    items_a = list(collections.OrderedDict.items(a))
    items_b = list(collections.OrderedDict.items(b))
    return (
        type(a) is type(b)
        and list(attrs_a) == list(attrs_b)
        and all(attrs_a[k] is attrs_b[k] for k in attrs_a)
        and [k for k, _ in items_a] == [k for k, _ in items_b]
        and all(x is y for (_, x), (_, y) in zip(items_a, items_b))
    )


def rebuild_model_output(cls: type, names: tuple[str, ...], values: tuple[Any, ...]) -> Any:
    """``cls(**fields that are not None)``. The first rebuild of a class calls the
    constructor and checks that :func:`_fresh` makes the same object; later ones use
    :func:`_fresh` where it did (the constructor calls ``fields()`` once per field and
    again in ``__post_init__``: tens of microseconds a call)."""
    fast = _FAST.get(cls)
    if fast:
        return _fresh(cls, names, values)
    obj = cls(**{n: v for n, v in zip(names, values) if v is not None})
    if fast is None:
        try:
            _FAST[cls] = _same_state(obj, _fresh(cls, names, values))
        except Exception:  # (a class whose instances refuse the direct stores)
            _FAST[cls] = False
    return obj


_PLAIN_FIRST = (str, bytes, int, float, complex, bool, type(None))


def rebuild_expression(const: Callable[[Any], str], value: Any, parts: dict[str, str]) -> str:
    """The expression that rebuilds ``value`` (an :class:`OrderedDataclassValue` made in
    the trace) from ``parts``, the expressions of its fields that are not ``None``."""
    from .tensors import TensorValue

    cls = value.cls
    names = [f.name for f in dataclasses.fields(cls)]
    base = _output_base(cls)
    first = value.fields[names[0]] if names else None
    others_set = any(not _is_none(value.fields[n]) for n in names[1:])
    # ``__post_init__`` only sets the entries again, unless the first field alone is set and
    # is neither a tensor nor a plain constant (then it may unpack it as key/value pairs)
    plain_first = isinstance(first, TensorValue) or (
        isinstance(first, ConstantValue) and type(first.value) in _PLAIN_FIRST
    )
    if (
        is_model_output_class(cls)
        and base is not None
        and getattr(cls, "__post_init__", None) is getattr(base, "__post_init__", 0)
        and (others_set or plain_first)
    ):
        args = "".join(f"{parts.get(n, 'None')}, " for n in names)
        return f"{const(rebuild_model_output)}({const(cls)}, {const(tuple(names))}, ({args}))"
    pairs = ", ".join(f"{const(k)}: {p}" for k, p in parts.items())
    return f"{const(cls)}(**{{{pairs}}})"
