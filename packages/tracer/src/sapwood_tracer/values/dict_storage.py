"""Which dict subclasses the model follows exactly on dict's storage.

A dict subclass's instance is a :class:`~sapwood_tracer.values.containers.DictValue`: its
entries in dict's storage, the class's Python methods inlined where attribute lookup finds
them. That is exact for the classes :func:`python_dict_subclass` accepts. An instance from
the inputs that the trace mutates has its final entries written back after the graph by
dict's own ``clear`` and ``update`` called on it (the class's overrides are not run: the
trace ran them), which is exact where its entries live in dict's storage alone: not
``OrderedDict``'s family, whose order lives in C beside it (:func:`mutable_input_dict`).
"""

from __future__ import annotations

__all__ = ["mutable_input_dict", "python_dict_subclass"]

_HEAPTYPE = 1 << 9

#: special methods the model applies on dict's storage without looking at the class
_APPLIED_WITHOUT_LOOKUP = frozenset(
    {
        "__new__",
        "__getitem__",
        "__contains__",
        "__len__",
        "__iter__",
        "__reversed__",
        "__bool__",
        "__getattribute__",
        "__getattr__",
        "__setattr__",
        "__delattr__",
        "__del__",
        "__format__",
        "__sizeof__",
    }
)


def python_dict_subclass(cls: type) -> bool:
    """Whether every class between ``cls`` and ``dict`` is written in Python, with a plain
    metaclass, and overrides no special method the model applies on dict's storage without
    looking at the class (nor ``__hash__``): the model of an instance is exact, whether the
    trace builds it (see :mod:`sapwood_tracer.pymodel.dict_subclasses`) or mutates one
    from the inputs."""
    if type(cls) is not type or cls is dict or not issubclass(cls, dict):
        return False
    for klass in cls.__mro__:
        if klass is dict:
            return True
        if not klass.__flags__ & _HEAPTYPE or _APPLIED_WITHOUT_LOOKUP.intersection(klass.__dict__):
            return False
        if klass.__dict__.get("__hash__", None) is not None:
            return False  # hashing a dict subclass: not modelled

    return False


def mutable_input_dict(cls: type) -> bool:
    """Whether an input of the dict subclass ``cls`` may be mutated by the trace: the model
    follows its class exactly, or it keeps all of dict's mutators (``defaultdict``)."""
    if python_dict_subclass(cls):
        # (the write-back stores items: a __setitem__ of the class's would run again)
        owner = next(k for k in cls.__mro__ if "__setitem__" in vars(k))
        return owner is dict
    return issubclass(cls, dict) and all(
        getattr(cls, name) is getattr(dict, name)
        for name in ("clear", "update", "__setitem__", "__delitem__", "pop", "setdefault")
    )
