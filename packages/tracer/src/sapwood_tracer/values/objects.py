"""User objects, classes, Python modules, and objects of library classes (``os.environ``,
weak references, loggers, ``functools.partial``).

Invariants:

* Attribute lookup is modelled statically, in Python's order: data descriptors of the type
  (properties are inlined), the instance ``__dict__``, then the type's other attributes.
  A class's Python ``__getattribute__`` is inlined (see :mod:`.getattribute`).
* An object that existed before the call (:class:`ObjectValue`) is guarded on its type;
  attribute writes on it are recorded as side effects, replayed after the graph runs, and seen
  by later reads in the trace.
* An object constructed during the trace (:class:`NewObjectValue`) holds its attributes as
  values; it becomes real only when the outputs are rebuilt.
"""

from __future__ import annotations

import logging
import types
from typing import Any

import torch

from sapwood_graph import AttrSource, Source

from ..errors import TracedException, Unsupported
from ..guards.sources import ContainsSource, HasAttrSource
from .attributes import (
    class_attribute,
    class_dict_source,
    has_python_special,
    held,
    is_cached_property,
    is_data_descriptor,
    is_slot,
    is_slot_name,
    lookup_mro,
    plain_instance_dict,
    python_getattr_hook,
)
from .base import (
    BuiltinValue,
    ConstantValue,
    Context,
    IteratorRecipe,
    IteratorValue,
    Value,
    attribute_missing,
    truth_of_plain_object,
)
from .cached_properties import cached_property_get
from .class_subscripts import class_subscript
from .containers import DictValue
from .exceptions import CHAINING_FIELDS, catches, python_error
from .functions import BoundMethodValue
from .getattribute import python_getattribute, python_hook
from .logging_calls import LOGGER_METHODS, LoggingCallValue
from .module_writes import (
    delete_module_attribute,
    pending_module_attribute,
    write_module_attribute,
)
from .sequence_iterators import SequenceIteratorValue, user_iterator_of
from .slot_results import checked, inline_special, sized_items

__all__ = [
    "ClassValue",
    "NewObjectValue",
    "ObjectValue",
    "PyModuleValue",
    "SuperValue",
    "UserIteratorValue",
]


class _UserProtocols(Value):
    """Python protocols of user objects, by inlining the class's own dunder methods."""

    __slots__ = ()

    def _dunder(self, tx: Context, name: str, args: list[Value]) -> Value:
        return inline_special(tx, self, name, args)

    def _has(self, name: str) -> bool:
        return has_python_special(self.python_type(), name)

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if not self._has("__call__"):
            raise Unsupported(f"calling {self.describe()}")
        method = class_attribute(tx, self.python_type(), "__call__", self)
        assert method is not None
        return tx.call(method, args, kwargs)

    def getitem(self, tx: Context, key: Value) -> Value:
        return self._dunder(tx, "__getitem__", [key])

    def setitem(self, tx: Context, key: Value, value: Value) -> None:
        self._dunder(tx, "__setitem__", [key, value])

    def delitem(self, tx: Context, key: Value) -> None:
        self._dunder(tx, "__delitem__", [key])

    def length(self, tx: Context) -> int:
        return checked(tx, "__len__", self._dunder(tx, "__len__", []), self.python_type())  # type: ignore[no-any-return]

    def iterate(self, tx: Context) -> Value:
        klass, _ = lookup_mro(self.python_type(), "__iter__")
        if klass is None and self._has("__getitem__"):
            return SequenceIteratorValue(self)  # the old protocol: self[0], self[1], ...
        iterator = self._dunder(tx, "__iter__", [])
        if isinstance(iterator, _UserProtocols) and iterator._has("__next__"):
            return UserIteratorValue(iterator)  # (often the object itself)
        if isinstance(iterator, _UserProtocols) or not hasattr(iterator.python_type(), "__next__"):
            checked(tx, "__iter__", iterator, self.python_type())  # (no iterator: it raises)
        return tx.iterate(iterator)

    def unpack(self, tx: Context) -> list[Value]:
        return tx.unpack(self.iterate(tx))

    def collect(self, tx: Context) -> list[Value]:
        return sized_items(tx, self)

    def contains(self, tx: Context, item: Value) -> bool:
        if self._has("__contains__"):
            return tx.truth(self._dunder(tx, "__contains__", [item]))
        try:
            iterator = self.iterate(tx)
        except TracedException as raised:
            if not catches(raised, TypeError):
                raise
            name = self.python_type().__name__
            raise python_error(TypeError, f"argument of type '{name}' is not iterable") from None
        if not isinstance(iterator, IteratorValue):
            raise Unsupported(f"'in' over {iterator.describe()}")
        while (candidate := iterator.next_value(tx)) is not None:  # (up to the first equal)
            if tx.equal(candidate, item):
                return True
        return False

    def truth(self, tx: Context) -> bool:
        if self._has("__bool__"):
            return checked(tx, "__bool__", self._dunder(tx, "__bool__", []), self.python_type())  # type: ignore[no-any-return]
        if self._has("__len__"):
            return self.length(tx) > 0
        if lookup_mro(self.python_type(), "__bool__")[0] not in (None, object) or lookup_mro(
            self.python_type(), "__len__"
        )[0] not in (None, object):
            raise Unsupported(f"the truth value of {self.describe()}")
        return True


class UserIteratorValue(IteratorValue):
    """An object of a user class with ``__next__``, iterated: each step inlines ``__next__``,
    and its ``StopIteration`` (raised in the traced code) ends the iteration."""

    __slots__ = ("target",)

    def __init__(self, target: _UserProtocols) -> None:
        super().__init__(None)
        self.target = target

    def describe(self) -> str:
        return f"iteration over {self.target.describe()}"

    def python_type(self) -> type:
        return self.target.python_type()

    def rebuild(self) -> IteratorRecipe | None:
        # the object is its own iterator state: Python's loop goes on calling its __next__
        return IteratorRecipe(user_iterator_of, (self.target,))

    def iterate(self, tx: Context) -> Value:
        return self.target.iterate(tx)  # (Python calls the object's __iter__ again)

    def collect(self, tx: Context) -> list[Value]:
        return sized_items(tx, self.target)  # (iter() of the object, its length hint)

    def next_value(self, tx: Context) -> Value | None:
        try:
            return self.target._dunder(tx, "__next__", [])
        except TracedException as raised:
            if catches(raised, StopIteration):
                return None
            raise


class ObjectValue(_UserProtocols):
    """A user object that existed before the call (guarded on its type)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any, source: Source) -> None:
        super().__init__(source)
        self.obj = obj

    def describe(self) -> str:
        return f"a {type(self.obj).__qualname__} object"

    def python_type(self) -> type:
        return type(self.obj)

    def getattr(self, tx: Context, name: str) -> Value:
        cls = type(self.obj)
        if cls.__getattribute__ is not object.__getattribute__ and python_hook(cls) is not None:
            return python_getattribute(tx, self, name)  # (it sees the trace's writes)
        if name == "__dict__":
            raise Unsupported(f"{self.describe()}.__dict__ (use attribute access instead)")
        pending = tx.side_effects.pending_attr(self.obj, name)
        if pending is not None:
            return pending
        if isinstance(self.obj, logging.Logger) and name in LOGGER_METHODS:
            return LoggingCallValue(getattr(self.obj, name))
        if cls.__getattribute__ is not object.__getattribute__:
            return self.real_getattr(tx, name)  # (a hook of C: run for real)
        klass, raw = lookup_mro(cls, name)
        if klass is not None and is_data_descriptor(raw):
            if isinstance(raw, property):
                return _call_or_fail(class_attribute(tx, cls, name, self), name)
            assert self.source is not None
            return tx.wrap(getattr(self.obj, name), AttrSource(self.source, name))
        inst = getattr(self.obj, "__dict__", None)
        if inst is not None and name in inst:
            assert self.source is not None
            return tx.wrap(inst[name], AttrSource(self.source, name))
        if klass is not None:
            if inst is not None:
                # an instance attribute of the same name would shadow the class's
                assert self.source is not None
                tx.guard_false(ContainsSource(AttrSource(self.source, "__dict__"), name))
            if (
                inst is not None
                and is_cached_property(raw)
                and cls.__setattr__ is object.__setattr__
            ):
                # computed now, and cached in the object's __dict__ after the graph (a plain
                # attribute write lands there: the property has no __set__)
                class_attribute(tx, cls, name, None)  # (guards where the class finds it)
                value = cached_property_get(tx, raw, class_dict_source(klass, name), self, name)
                tx.record_attr_write(self, name, value)
                return value
            return _call_or_fail(class_attribute(tx, cls, name, self), name)
        if "__getattr__" in dir(cls):
            return self.custom_getattr(tx, name)
        raise self.missing(tx, name)

    def missing(self, tx: Context, name: str) -> Exception:
        """The error for a missing attribute, guarding that it stays missing."""
        if self.source is not None:
            tx.guard_false(HasAttrSource(self.source, name))
        return attribute_missing(self.describe(), name)

    def custom_getattr(self, tx: Context, name: str) -> Value:
        return self.real_getattr(tx, name)

    def real_getattr(self, tx: Context, name: str) -> Value:
        """Attribute lookup through a class's own ``__getattribute__``/``__getattr__``, where
        it cannot be inlined (see :mod:`.getattribute`).

        The lookup runs for real now and again in the guard on every call (the attribute's
        source re-reads it), so it must be free of side effects, as configuration objects'
        lookups are (e.g. an attribute-name alias map).
        """
        assert self.source is not None
        try:
            attr = getattr(self.obj, name)
        except AttributeError:
            raise self.missing(tx, name) from None
        return tx.wrap(attr, AttrSource(self.source, name))

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        cls = type(self.obj)
        klass, raw = lookup_mro(cls, name)
        chaining = isinstance(self.obj, BaseException) and name in CHAINING_FIELDS
        if klass is not None and is_data_descriptor(raw) and not chaining:
            raise Unsupported(f"assigning {name!r} through a descriptor of {cls.__qualname__}")
        if not hasattr(self.obj, "__dict__"):  # (Python raises AttributeError)
            raise Unsupported(f"assigning {name!r} of {self.describe()}, which has no __dict__")
        if cls.__setattr__ is not object.__setattr__ and not tx.plain_setattr(cls):
            raise Unsupported(
                f"assigning attributes of {cls.__qualname__}, which defines __setattr__"
            )
        held_dict = python_hook(cls) and tx.known(object.__getattribute__(self.obj, "__dict__"))
        if held_dict is not None:  # (the dict would not see the write)
            raise Unsupported(f"assigning {name!r} of {self.describe()}, whose __dict__ is held")
        tx.record_attr_write(self, name, value)


def _call_or_fail(value: Value | None, name: str) -> Value:
    if value is None:
        raise Unsupported(f"attribute {name!r}")
    return value


class NewObjectValue(_UserProtocols):
    """An instance of a plain user class constructed during the trace."""

    __slots__ = ("attrs", "cls", "own_dict")

    def __init__(self, cls: type) -> None:
        super().__init__(None)
        self.cls = cls
        self.attrs: dict[str, Value] = {}
        #: the ``__dict__`` the object was made with, once read (not one assigned to it)
        self.own_dict: DictValue | None = None

    def describe(self) -> str:
        return f"a new {self.cls.__qualname__} object"

    def python_type(self) -> type:
        return self.cls

    def _instance_dict(self, tx: Context) -> DictValue:
        """``obj.__dict__``: made from the attributes on first use; from then on it holds
        them (kept under ``"__dict__"`` in ``attrs``, next to the slots' values)."""
        made = self.attrs.get("__dict__")
        if isinstance(made, DictValue):
            return made
        if not plain_instance_dict(self.cls):
            raise Unsupported(f"the __dict__ of {self.describe()}")
        slots = {k: v for k, v in self.attrs.items() if is_slot_name(self.cls, k)}
        pairs = [(ConstantValue(k), v) for k, v in self.attrs.items() if k not in slots]
        made = self.own_dict = DictValue.from_pairs(tx, pairs)
        self.attrs = {"__dict__": made, **slots}
        return made

    def getattr(self, tx: Context, name: str) -> Value:
        if self.cls.__getattribute__ is not object.__getattribute__:
            raise Unsupported(f"{name!r} of {self.describe()}, whose class has __getattribute__")
        klass, raw = lookup_mro(self.cls, name)
        if klass is not None and is_data_descriptor(raw) and isinstance(raw, property):
            return _call_or_fail(class_attribute(tx, self.cls, name, self), name)
        if name == "__dict__":
            return self._instance_dict(tx)
        slot = klass is not None and is_slot(klass, raw)
        held_dict = self.attrs.get("__dict__")
        if isinstance(held_dict, DictValue) and not slot:
            entry = held_dict.entries.get(ConstantValue(name).hash_key(tx))
            if entry is not None:
                return entry[1]
        elif name in self.attrs:
            return self.attrs[name]
        if slot:
            raise attribute_missing(self.describe(), name)  # a slot not assigned yet
        if name == "__class__":
            return tx.wrap(self.cls, held(self.cls, self.cls.__qualname__))
        if klass is not None and is_cached_property(raw):
            class_attribute(tx, self.cls, name, None)  # (guards where the class finds it)
            return cached_property_get(tx, raw, class_dict_source(klass, name), self)
        if klass is not None:
            return _call_or_fail(class_attribute(tx, self.cls, name, self), name)
        hooked = python_getattr_hook(tx, self.cls, self, name)
        if hooked is not None:
            return hooked
        raise attribute_missing(self.describe(), name)

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        if self.cls.__setattr__ is not object.__setattr__:
            _, hook = lookup_mro(self.cls, "__setattr__")
            if not isinstance(hook, types.FunctionType):
                raise Unsupported(f"assigning {name!r} of {self.describe()} (its __setattr__)")
            method = class_attribute(tx, self.cls, "__setattr__", self)  # inlined
            assert method is not None
            tx.call(method, [ConstantValue(name), value], {})
            return
        self.set_own(tx, name, value)

    def set_own(self, tx: Context, name: str, value: Value) -> None:
        """``object.__setattr__(self, name, value)``: the store itself."""
        if name == "__dict__":
            if value.python_type() is not dict or not isinstance(value, DictValue):
                raise Unsupported(f"assigning {value.describe()} as a __dict__")
            self._instance_dict(tx)
            self.attrs["__dict__"] = value
            return
        klass, raw = lookup_mro(self.cls, name)
        slot = klass is not None and is_slot(klass, raw)
        if klass is not None and is_data_descriptor(raw) and not slot:
            raise Unsupported(f"assigning {name!r} through a descriptor of {self.cls.__qualname__}")
        if not slot and not self.cls.__dictoffset__:
            # neither a slot nor an instance dict to hold it: Python raises AttributeError
            raise Unsupported(f"assigning {name!r} of {self.describe()}, which has no __dict__")
        held_dict = self.attrs.get("__dict__")
        if isinstance(held_dict, DictValue) and not slot:
            held_dict.setitem(tx, ConstantValue(name), value)
        else:
            self.attrs[name] = value

    def delattr(self, tx: Context, name: str) -> None:
        klass, raw = lookup_mro(self.cls, name)
        if (klass is not None and is_data_descriptor(raw)) or (
            self.cls.__delattr__ is not object.__delattr__
        ):
            raise Unsupported(f"del of attribute {name!r} of {self.describe()}")
        if self.attrs.pop(name, None) is None:
            msg = f"{self.cls.__name__!r} object has no attribute {name!r}"
            raise python_error(AttributeError, msg)


_HEAP_TYPE = 1 << 9  # (Py_TPFLAGS_HEAPTYPE: a class made by a class statement)


class ClassValue(Value):
    """A class (guarded by identity)."""

    __slots__ = ("cls",)

    def __init__(self, cls: type, source: Source | None) -> None:
        super().__init__(source)
        self.cls = cls

    def describe(self) -> str:
        return f"class {self.cls.__qualname__}"

    def python_type(self) -> type:
        return type(self.cls)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.cls

    def truth(self, tx: Context) -> bool:
        return truth_of_plain_object(self.cls, self.describe())

    def getitem(self, tx: Context, key: Value) -> Value:
        return class_subscript(tx, self.cls, key)

    def getattr(self, tx: Context, name: str) -> Value:
        if name == "__name__":
            return ConstantValue(self.cls.__name__)
        if name == "__qualname__":
            return ConstantValue(self.cls.__qualname__)
        # Python's order for a class: a data descriptor of the metaclass, the class's MRO,
        # then any other attribute of the metaclass (``__mro__``, ``register``, ``mro``)
        meta = type(self.cls)
        klass, raw = lookup_mro(meta, name)
        if klass is not None and klass is not type and is_data_descriptor(raw):
            return self._metaclass_attribute(tx, klass, raw, name)
        found = class_attribute(tx, self.cls, name, None)
        if found is not None:
            return found
        if klass is not None:
            return self._metaclass_attribute(tx, klass, raw, name)
        raise attribute_missing(self.describe(), name)

    def _metaclass_attribute(self, tx: Context, klass: type, raw: Any, name: str) -> Value:
        """``cls.name`` found on the metaclass ``klass``: bound to the class."""
        if isinstance(raw, types.FunctionType):
            fn = tx.wrap(raw, class_dict_source(klass, name))
            return BoundMethodValue(fn, self)
        if isinstance(raw, property) and raw.fget is not None:
            fget = tx.wrap(raw.fget, AttrSource(class_dict_source(klass, name), "fget"))
            return tx.call(fget, [self], {})
        if klass is type and isinstance(
            raw, (types.GetSetDescriptorType, types.MemberDescriptorType)
        ):
            # type's own fields of the class (``__mro__``, ``__bases__``, ...): read for real
            source = self.source or held(self.cls, self.cls.__qualname__)
            return tx.wrap(getattr(self.cls, name), AttrSource(source, name))
        if klass is type and name == "__subclasses__":  # (modelled: the live subclasses)
            return BoundMethodValue(BuiltinValue(type.__subclasses__), self)
        if klass is type and isinstance(raw, types.MethodDescriptorType):
            return tx.wrap_trusted(getattr(self.cls, name))  # ``cls.mro``
        raise Unsupported(
            f"the attribute {name!r} of {self.describe()} from its metaclass "
            f"{klass.__qualname__} ({type(raw).__name__})"
        )

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        return tx.construct(self, args, kwargs)

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        # a constant stored on a plain class (a counter such as RemovableHandle.next_id):
        # replayed after the graph, seen by later reads of the trace through the class and
        # its instances (see class_attribute); anything else could change how the class
        # behaves (methods, descriptors, dunders), which the trace does not follow
        cls = self.cls
        if (
            type(cls) is not type
            or not cls.__flags__ & _HEAP_TYPE
            or name.startswith("__")
            or not isinstance(value, ConstantValue)
        ):
            raise Unsupported(f"setting attribute {name!r} of {self.describe()}")
        target = self if self.source is not None else ClassValue(cls, held(cls, cls.__qualname__))
        tx.record_attr_write(target, name, value)


class PyModuleValue(Value):
    """A Python module (``math``, ``torch.nn.functional``, a user module), guarded by identity."""

    __slots__ = ("module",)

    def __init__(self, module: types.ModuleType, source: Source | None) -> None:
        super().__init__(source)
        self.module = module

    def describe(self) -> str:
        return f"module {self.module.__name__}"

    def python_type(self) -> type:
        return types.ModuleType

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.module

    def getattr(self, tx: Context, name: str) -> Value:
        written, pending = pending_module_attribute(tx, self.module, name)
        if written:
            if pending is None:  # deleted in the trace (sys has no module ``__getattr__``)
                raise attribute_missing(self.describe(), name)
            return pending
        try:
            attr = getattr(self.module, name)
        except AttributeError:
            raise attribute_missing(self.describe(), name) from None
        if self.module.__name__.partition(".")[0] in _LIBRARY_ROOTS and (
            callable(attr) or isinstance(attr, (types.ModuleType, torch.dtype))
        ):
            # Functions, classes and submodules of library namespaces are trusted not to be
            # monkeypatched between calls; their data (flags, registries) is guarded.
            return tx.wrap_trusted(attr)
        return tx.wrap(attr, AttrSource(held(self.module, self.module.__name__), name))

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        write_module_attribute(tx, self.module, name, value, self.describe())

    def delattr(self, tx: Context, name: str) -> None:
        source = held(self.module, self.module.__name__)
        delete_module_attribute(tx, self.module, name, source, self.describe())


_LIBRARY_ROOTS = frozenset(
    [
        "torch",
        "math",
        "operator",
        "functools",
        "itertools",
        "collections",
        "typing",
        "dataclasses",
        "enum",
        "numbers",
        "builtins",
        "warnings",
        "inspect",
        "abc",
        "copy",
        "types",
    ]
)


class SuperValue(Value):
    """``super(cls, receiver)``: attribute lookup starts after ``cls`` in the receiver's MRO."""

    __slots__ = ("cls", "receiver")

    def __init__(self, cls: type, receiver: Value) -> None:
        super().__init__(None)
        self.cls = cls
        self.receiver = receiver

    def describe(self) -> str:
        return f"super({self.cls.__qualname__})"

    def getattr(self, tx: Context, name: str) -> Value:
        # Python's rule: a class below ``cls`` gives its MRO, anything else its type's
        receiver_type = self.receiver.python_type()
        if isinstance(self.receiver, ClassValue) and issubclass(self.receiver.cls, self.cls):
            receiver_type = self.receiver.cls
        mro = receiver_type.__mro__
        if self.cls not in mro:
            raise Unsupported("super() with a class outside the receiver's MRO")
        for klass in mro[mro.index(self.cls) + 1 :]:
            if name not in klass.__dict__:
                tx.guard_false(
                    ContainsSource(AttrSource(held(klass, klass.__qualname__), "__dict__"), name)
                )
                continue
            raw = klass.__dict__[name]
            source = class_dict_source(klass, name)
            if isinstance(raw, types.FunctionType):
                return BoundMethodValue(tx.wrap(raw, source), self.receiver)
            if isinstance(raw, staticmethod):
                return tx.wrap(raw.__func__, AttrSource(source, "__func__"))
            if isinstance(raw, classmethod):
                fn = tx.wrap(raw.__func__, AttrSource(source, "__func__"))
                return BoundMethodValue(fn, tx.wrap_trusted(receiver_type))
            if isinstance(raw, property) and raw.fget is not None:
                return tx.call(tx.wrap(raw.fget, AttrSource(source, "fget")), [self.receiver], {})
            if isinstance(raw, (types.WrapperDescriptorType, types.MethodDescriptorType)):
                return BoundMethodValue(BuiltinValue(raw), self.receiver)
            return tx.wrap(raw, source)
        raise attribute_missing(self.describe(), name)
