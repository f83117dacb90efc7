"""``functools.cached_property`` read through an object made in the trace: the value cached in
the object's ``__dict__`` under the property's name, else the function's result, cached there
(as CPython's ``__get__`` does; the lock it takes in 3.11 guards threads only)."""

from __future__ import annotations

from typing import Any

from sapwood_graph import AttrSource, Source

from ..errors import Unsupported
from .base import ConstantValue, Context, Value
from .containers import DictValue
from .exceptions import python_error

__all__ = ["cached_property_get"]


def cached_property_get(
    tx: Context, raw: Any, source: Source, receiver: Value, uncached: str | None = None
) -> Value:
    """``raw.__get__(receiver, type(receiver))`` for a cached property ``raw`` found at
    ``source`` in the class of ``receiver``. With ``uncached`` (an object from the inputs,
    whose ``__dict__`` lacks that name), only the function's result: the caller caches it."""
    name = tx.wrap(raw.attrname, AttrSource(source, "attrname")).as_constant()
    if uncached is not None:
        if name != uncached:
            raise Unsupported(f"a cached property named {name!r} read as {uncached!r}")
        return tx.call(tx.wrap(raw.func, AttrSource(source, "func")), [receiver], {})
    if name is None:
        raise python_error(
            TypeError, "Cannot use cached_property instance without calling __set_name__ on it."
        )
    cls = receiver.python_type()
    if not cls.__dictoffset__:
        raise python_error(
            TypeError,
            f"No '__dict__' attribute on {cls.__name__!r} instance to cache {name!r} property.",
        )
    cache = tx.getattr(receiver, "__dict__")
    if not isinstance(cache, DictValue) or cache.python_type() is not dict:
        raise Unsupported(f"the cached property {name!r} of {receiver.describe()}")
    key = ConstantValue(name)
    entry = cache.entries.get(key.hash_key(tx))
    if entry is not None:
        return entry[1]
    value = tx.call(tx.wrap(raw.func, AttrSource(source, "func")), [receiver], {})
    cache.setitem(tx, key, value)
    return value
