"""Dict subclasses written in Python (``collections.Counter``, ``class Registry(dict)``) built
inside the compiled function, and the syntax that reaches their own special methods.

An instance is a :class:`DictValue` of the subclass: dict's storage, with the class's methods
written in Python found first by attribute lookup (and inlined) and its operators dispatched by
:mod:`.operators`. That is exact only where everything Python does with the instance either
goes through a method the class may override *and the model looks it up*, or through dict's
storage directly. So a class is built in the trace only when:

* every class between it and ``dict`` is written in Python, none defines ``__new__`` and the
  metaclass is ``type`` (the object is ``dict.__new__(cls)``, rebuilt that way after the
  graph);
* none overrides a special method the model applies without looking at the class: item
  reads and writes, ``in``, ``len``, iteration, truth, attribute access, ``__del__``.
  (A class whose ``__repr__`` is its own, outside ``collections``, never counts as a
  constant: ``repr()`` would run it once, while tracing.)
  ``__delitem__`` is looked up by ``del x[k]`` (:func:`delete_item`), ``__setitem__`` by
  ``x[k] = v`` (:func:`store_item`; dict's own methods never call it) and ``__missing__`` by
  a missing key, so those may be overridden. An input of a class that overrides
  ``__setitem__`` is not mutated by the trace (the write-back stores items).

The instance has no attributes of its own: setting one is refused (a graph break), so a
rebuilt object lacks nothing the eager one has.

``_collections._count_elements(mapping, iterable)`` (``Counter``'s counting loop in C) is
modelled where the mapping keeps dict's ``get`` and a ``__setitem__`` the model implements
(dict's or ``OrderedDict``'s): it counts into the storage as the C loop does.
"""

from __future__ import annotations

import collections
import operator
import types

from ..errors import Unsupported
from ..values.attributes import class_attribute, lookup_mro
from ..values.base import ConstantValue, Context, IteratorValue, Value
from ..values.containers import DictValue, ListValue, TupleValue
from ..values.dict_storage import python_dict_subclass
from ..values.sets import SetValue
from .builtins import handles

__all__ = ["construct_dict_subclass", "delete_item", "python_dict_subclass", "store_item"]


def construct_dict_subclass(
    tx: Context, cls: type, args: list[Value], kwargs: dict[str, Value]
) -> Value:
    """``cls(*args, **kwargs)``: ``dict.__new__(cls)``, then the class's ``__init__`` inlined
    (or dict's, which fills the storage as ``update`` does)."""
    obj = DictValue({}, cls=cls)
    if not isinstance(lookup_mro(cls, "__init__")[1], types.FunctionType):
        if len(args) > 1:
            raise Unsupported(f"{cls.__qualname__}() with {len(args)} positional arguments")
        obj.call_method(tx, "update", args, kwargs)
        return obj
    init = class_attribute(tx, cls, "__init__", obj)
    assert init is not None
    returned = tx.call(init, args, kwargs)
    if not (returned.is_constant() and returned.as_constant() is None):
        raise Unsupported(f"{cls.__qualname__}.__init__ returning a value (TypeError)")
    return obj


_CONTAINERS = (DictValue, ListValue, TupleValue, SetValue)
_BUILTIN_CONTAINERS = (dict, list, tuple, set, frozenset)


def _own_method(tx: Context, container: Value, kinds: tuple[type, ...], name: str) -> Value | None:
    """The special method ``name`` of a container subclass, where a class written in Python
    defines it (bound to ``container``, to inline); None for builtin containers and others."""
    cls = container.python_type()
    if not isinstance(container, kinds) or cls in _BUILTIN_CONTAINERS:
        return None
    if not isinstance(lookup_mro(cls, name)[1], types.FunctionType):
        return None
    method = class_attribute(tx, cls, name, container)
    assert method is not None
    return method


def delete_item(tx: Context, container: Value, key: Value) -> None:
    """``del container[key]``: the ``__delitem__`` of a container subclass written in Python
    (``Counter``'s ignores a missing key) inlined, else the container's own deletion."""
    method = _own_method(tx, container, _CONTAINERS, "__delitem__")
    if method is not None:
        tx.call(method, [key], {})
    else:
        container.delitem(tx, key)


def store_item(tx: Context, container: Value, key: Value, value: Value) -> None:
    """``container[key] = value``: the ``__setitem__`` of a dict subclass written in Python
    inlined (its ``super().__setitem__`` writes the storage), else the container's own store."""
    method = _own_method(tx, container, (DictValue,), "__setitem__")
    if method is not None:
        tx.call(method, [key, value], {})
    else:
        container.setitem(tx, key, value)


#: the classes whose ``__setitem__`` and ``get`` the model implements on dict's storage
_COUNTABLE = (dict, collections.OrderedDict)


@handles(collections._count_elements)  # type: ignore[attr-defined]
def _count_elements(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if kwargs or len(args) != 2:
        raise Unsupported("_count_elements() with these arguments (TypeError)")
    mapping, iterable = args
    cls = mapping.python_type()
    if (
        not isinstance(mapping, DictValue)
        or lookup_mro(cls, "get")[0] is not dict
        or lookup_mro(cls, "__setitem__")[0] not in _COUNTABLE
        or getattr(mapping.obj, "__dict__", None)  # an instance attribute may shadow `get`
    ):
        raise Unsupported(f"_count_elements() counting into {mapping.describe()}")
    iterator = tx.iterate(iterable)
    if not isinstance(iterator, IteratorValue):
        raise Unsupported(f"_count_elements() over {iterable.describe()}")
    while (item := iterator.next_value(tx)) is not None:
        key = item.hash_key(tx)
        old = mapping.entries.get(key)
        if old is None:
            count: Value = ConstantValue(1)  # C's loop stores 1 itself
        else:
            count = tx.binary_operation(operator.add, old[1], ConstantValue(1))
        mapping.setitem(tx, item, count)
    return ConstantValue(None)
