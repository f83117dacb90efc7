"""Calling a class: constructing objects during the trace.

* Immutable torch/Python value classes (``torch.Size``, ``torch.device``, ``torch.finfo``,
  ``slice``, ...) called on constants are folded.
* Named tuples are built from their fields (no user code runs); ``collections.deque`` as a
  :class:`~sapwood_tracer.values.deques.DequeValue`.
* Subclasses of dict written in Python (:mod:`.dict_subclasses`) and of set or frozenset that
  define nothing (:mod:`sapwood_tracer.values.set_subclasses`) are built as their base.
* Instances of plain user classes and dataclasses become :class:`NewObjectValue`; their
  ``__init__`` (and a dataclass's generated ``__init__`` and ``__post_init__``) is inlined.
* A ``__new__`` written in Python is inlined (its ``object.__new__(cls)`` makes the object),
  then ``__init__`` of the object's class, where the object is an instance of the class.
* ``functools.partial`` (each copy of the C type) and its plain subclasses are modelled.
* Classes with a builtin ``__new__`` or a custom metaclass, modules, exceptions, and anything
  else are refused.
"""

from __future__ import annotations

import collections
import dis
import functools
import types
import weakref
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from ..errors import Unsupported, weakly_referenced
from ..guards.sources import HeldObjectSource
from ..values.attributes import class_attribute, lookup_mro
from ..values.base import BuiltinValue, ConstantValue, Context, Value, is_constant_type
from ..values.containers import DictValue, NamedTupleValue
from ..values.default_dicts import DefaultDictValue, check_factory
from ..values.deques import make_deque
from ..values.exceptions import (
    ExceptionValue,
    has_builtin_init,
    make_exception,
    raised_for_real,
)
from ..values.hook_handles import make_hook_handle
from ..values.modules import ModuleValue
from ..values.numpy_functions import calls_numpy_on_numbers, fold_numpy_call
from ..values.objects import ClassValue, NewObjectValue
from ..values.ordered_dataclasses import OrderedDataclassValue, is_ordered_dataclass
from ..values.partials import c_partial_base, make_partial
from ..values.set_subclasses import SetSubclassValue, plain_set_subclass, plain_subclass_of
from .builtins import new_set
from .dict_subclasses import construct_dict_subclass, python_dict_subclass
from .overriding_tensors import overriding_class

__all__ = ["construct", "is_plain_python_class"]

_FOLDED_CLASSES = (
    torch.Size,
    torch.device,
    torch.finfo,
    torch.iinfo,
    slice,
    complex,
    range,
)


#: Weak references see when their object dies: the trace cannot promise Python's lifetimes.
_WEAK_REFERENCES = (
    weakref.ref,
    weakref.finalize,
    weakref.WeakKeyDictionary,
    weakref.WeakValueDictionary,
    weakref.WeakSet,
)
_WEAK_MAKERS = frozenset(map(id, (*_WEAK_REFERENCES, weakref.proxy, weakref)))


def makes_weak_references(code: types.CodeType, f_globals: dict[str, Any]) -> bool:
    """Whether ``code`` reads a global that makes weak references (the ``weakref`` module,
    ``weakref.ref``, ``proxy``, ...): such code runs eagerly as a whole, since values passed
    across a graph break can keep an object alive past the point where Python frees it."""
    for name in code.co_names:
        value = f_globals.get(name)
        if value is not None and id(value) in _WEAK_MAKERS:
            return True
    return False


#: Names whose reading means the code looks at frames or tracebacks: a graph break moves the
#: code into other frames (the entry function, resume functions), so what it would see differs.
_FRAME_NAMES = frozenset(
    {
        "__traceback__",
        "tb_frame",
        "tb_next",
        "f_back",
        "_getframe",
        "_getframemodulename",
        "currentframe",
        "extract_tb",
        "extract_stack",
        "format_tb",
        "format_stack",
        "print_tb",
        "print_stack",
        "walk_tb",
        "walk_stack",
        # reference counts and referrers: the trace, its guards and the values handed across
        # a graph break hold references of their own
        "getrefcount",
        "get_referrers",
        "get_referents",
    }
)


#: Of those, the names through which code reads the frames that *called* it (its module name,
#: file and line for a warning, the caller's locals): at a graph break such code is called from
#: generated code, so its callers differ from Python's whatever frame it runs in.
_CALLER_FRAME_NAMES = frozenset(
    {
        "_getframemodulename",
        "f_back",
        "extract_stack",
        "format_stack",
        "print_stack",
        "walk_stack",
    }
)


def reads_caller_frames(code: types.CodeType) -> str | None:
    """The name through which ``code`` reads the frames that called it, if any (a subset of
    :func:`inspects_frames`): a call of such code cannot be moved to a graph break.
    ``sys._getframe`` counts where the code has a positive integer constant (its depth:
    ``_getframe(1)``); ``sys._getframe()`` alone is the code's own frame."""
    found = next((name for name in code.co_names if name in _CALLER_FRAME_NAMES), None)
    if found is None and "_getframe" in code.co_names:
        depths = (c for c in code.co_consts if type(c) is int and c > 0)
        found = "_getframe" if next(depths, None) is not None else None
    return found


def inspects_frames(code: types.CodeType) -> str | None:
    """The name through which ``code`` reads frames or tracebacks (``exc.__traceback__``,
    ``sys._getframe``, ``traceback.extract_tb``, ...) or reference counts, if any: such code runs eagerly as a
    whole, where its frames are the ones Python would have. A name the code only assigns
    (``exc.__traceback__ = tb``) reads nothing: that assignment is refused where it runs."""
    found = [name for name in code.co_names if name in _FRAME_NAMES]
    if found:
        read = _names_read(code)
        found = [name for name in found if name in read]
    return found[0] if found else None


_ASSIGNING_OPS = frozenset({"STORE_ATTR", "DELETE_ATTR"})


@functools.lru_cache(maxsize=1024)
def _names_read(code: types.CodeType) -> frozenset[str]:
    """The names of ``co_names`` that an instruction other than an attribute assignment uses."""
    return frozenset(
        inst.argval
        for inst in dis.get_instructions(code)
        if inst.opcode in _NAME_OPS and inst.opname not in _ASSIGNING_OPS
    )


_NAME_OPS = frozenset(dis.hasname)


def construct(
    tx: Context, cls_value: ClassValue, args: list[Value], kwargs: dict[str, Value]
) -> Value:
    cls = cls_value.cls
    if isinstance(cls, type) and issubclass(cls, _WEAK_REFERENCES):
        raise weakly_referenced(cls.__qualname__)
    if cls is RemovableHandle:
        return make_hook_handle(tx, cls, args, kwargs)
    if cls is collections.deque:
        return make_deque(tx, args, kwargs)
    if cls in _FOLDED_CLASSES:
        if cls is torch.Size and args:
            items = tx.unpack(args[0])
            return ConstantValue(torch.Size([int(i.as_constant()) for i in items]))
        consts = [a.as_constant() for a in args]
        kw = {k: v.as_constant() for k, v in kwargs.items()}
        result = cls(*consts, **kw)
        return ConstantValue(result)
    if issubclass(cls, torch.nn.Module):
        stateless = _stateless_torch_module(tx, cls, args, kwargs)
        if stateless is not None:
            return stateless
        raise Unsupported(
            f"constructing the module {cls.__qualname__} inside the compiled function",
            hint="Create modules in __init__, not in forward.",
        )
    if issubclass(cls, BaseException):
        return _exception(tx, cls_value, args, kwargs)
    if issubclass(cls, torch.Tensor):
        if cls is torch.Tensor or cls in torch._tensor_classes:  # type: ignore[attr-defined]
            # torch.Tensor(...) and the legacy typed classes (torch.FloatTensor, ...)
            return tx.call_torch_function(cls, args, kwargs)
        if overriding_class(cls) and _python_new(cls) and cls.__init__ is object.__init__:
            # (a __torch_function__ subclass's own __new__, as ``_make_subclass`` in it)
            new = class_attribute(tx, cls, "__new__", None)
            assert new is not None
            return tx.call(new, [tx.wrap_trusted(cls), *args], kwargs)
        raise Unsupported(
            f"constructing a {cls.__qualname__} inside the compiled function",
            hint="Create parameters and tensor subclasses outside the compiled function "
            "(in __init__) and pass them in.",
        )
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return _namedtuple(tx, cls, args, kwargs)
    if is_ordered_dataclass(cls):
        return OrderedDataclassValue.construct(tx, cls, args, kwargs)
    if type(cls) is not type and type(cls).__call__ is not type.__call__:
        raise Unsupported(
            f"constructing {cls.__qualname__}, whose metaclass is {type(cls).__qualname__}"
        )
    if cls is collections.defaultdict:
        factory = args[0] if args else ConstantValue(None)
        check_factory(factory)
        made = tx.call_builtin(BuiltinValue(dict), args[1:], kwargs)
        assert isinstance(made, DictValue)
        return DefaultDictValue(made.entries, factory)
    if plain_subclass_of(cls, (dict,)):
        # nothing of dict's is overridden: dict's own construction, of this class
        made = tx.call_builtin(BuiltinValue(dict), args, kwargs)
        assert isinstance(made, DictValue)
        made.cls = cls
        return made
    if c_partial_base(cls) is not None:
        return make_partial(tx, cls, args, kwargs)
    if plain_set_subclass(cls):
        # no special method of set's is overridden: set's own construction, of this class
        # (the key mirror of a class with methods of its own is of the base: the mirror's
        # operations are set's, never the class's)
        if len(args) > 1 or kwargs:
            raise Unsupported(f"{cls.__qualname__}() with these arguments (TypeError)")
        frozen = issubclass(cls, frozenset)
        mirror = cls if plain_subclass_of(cls, (set, frozenset)) else None
        made = new_set(tx, args, {}, frozen=frozen, kind=mirror)
        return SetSubclassValue(cls, made.members, made.order)
    if python_dict_subclass(cls):
        return construct_dict_subclass(tx, cls, args, kwargs)
    if calls_numpy_on_numbers(cls, args, kwargs):  # ``np.float32(0.5)``
        return fold_numpy_call(cls, args)
    if cls.__new__ is not object.__new__ and not _python_new(cls):
        raise Unsupported(f"constructing {cls.__qualname__}, which defines __new__")
    if not is_plain_python_class(cls):
        raise Unsupported(f"constructing {cls.__qualname__}, a subclass of a builtin type")
    if cls.__new__ is object.__new__:
        obj: Value = NewObjectValue(cls)
    else:
        # the class's own __new__, inlined; its object.__new__(cls) makes the object
        new = class_attribute(tx, cls, "__new__", None)
        assert new is not None
        obj = tx.call(new, [tx.wrap_trusted(cls), *args], kwargs)
        if not issubclass(obj.python_type(), cls):
            return obj  # (Python calls no __init__ then)
        cls = obj.python_type()
    init = None if cls.__init__ is object.__init__ else class_attribute(tx, cls, "__init__", obj)
    if init is None or init.is_constant():
        if (args or kwargs) and cls.__new__ is object.__new__:
            raise Unsupported(f"{cls.__qualname__}() takes no arguments (TypeError)")
        return obj
    returned = tx.call(init, args, kwargs)
    if not (returned.is_constant() and returned.as_constant() is None):
        raise Unsupported(f"{cls.__qualname__}.__init__ returning a value (TypeError)")
    return obj


def is_plain_python_class(cls: type) -> bool:
    """Whether ``cls`` is a Python class whose only builtin base is ``object``:
    ``object.__new__`` makes its instances."""
    return isinstance(cls, type) and not any(
        base.__module__ == "builtins" and base is not object for base in cls.__mro__
    )


def _python_new(cls: type) -> bool:
    """Whether the ``__new__`` ``cls`` inherits is a static method written in Python."""
    klass, raw = lookup_mro(cls, "__new__")
    return (
        klass is not None
        and klass.__module__ != "builtins"
        and isinstance(raw, staticmethod)
        and isinstance(raw.__func__, types.FunctionType)
    )


def _python_defines(cls: type, name: str) -> bool:
    """Whether a class of ``cls``'s MRO written in Python defines ``name``."""
    return any(name in klass.__dict__ for klass in cls.__mro__ if klass.__module__ != "builtins")


def _exception(
    tx: Context, cls_value: ClassValue, args: list[Value], kwargs: dict[str, Value]
) -> Value:
    """An exception instance: BaseException's ``__new__`` keeps the arguments as ``args``, and
    a ``__init__`` written in Python is inlined (its ``super().__init__(...)`` sets ``args``)."""
    cls = cls_value.cls
    if issubclass(cls, OSError):
        return _os_error(cls, args, kwargs)
    if _python_defines(cls, "__new__"):
        raise Unsupported(f"constructing the exception {cls.__qualname__}")
    if type(cls) is not type:
        raise Unsupported(
            f"constructing {cls.__qualname__}, whose metaclass is {type(cls).__name__}"
        )
    exc = ExceptionValue(cls, list(args))
    if _python_defines(cls, "__init__"):
        init = class_attribute(tx, cls, "__init__", exc)
        assert init is not None
        returned = tx.call(init, args, kwargs)
        if not (returned.is_constant() and returned.as_constant() is None):
            raise Unsupported(f"{cls.__qualname__}.__init__ returning a value (TypeError)")
    elif kwargs:
        _keyword_fields(cls, exc, args, kwargs)
    elif has_builtin_init(cls) and not issubclass(cls, (StopIteration, SystemExit)):
        # a C __init__ that checks and reads its arguments (SyntaxError, UnicodeError, ...):
        # what it does with them is known only for constants
        if not all(a.is_constant() for a in args):
            raise Unsupported(f"constructing {cls.__qualname__} from non-constant arguments")
        try:
            make_exception(cls, tuple(a.as_constant() for a in args), {})
        except Exception as error:
            raise raised_for_real(error, f"constructing {cls.__qualname__}") from None
    return exc


#: builtin exception classes whose ``__init__`` takes keywords, each setting the field of its
#: name (and nothing else)
_KEYWORD_FIELDS: tuple[tuple[type, frozenset[str]], ...] = (
    (AttributeError, frozenset({"name", "obj"})),
    (NameError, frozenset({"name"})),
    (ImportError, frozenset({"name", "path"})),
)


def _keyword_fields(
    cls: type, exc: ExceptionValue, args: list[Value], kwargs: dict[str, Value]
) -> None:
    """``AttributeError(msg, name=..., obj=...)`` and the like: the builtin ``__init__`` takes
    the arguments as without keywords (checked on the constants), then sets each keyword's
    field."""
    fields = next((names for base, names in _KEYWORD_FIELDS if issubclass(cls, base)), None)
    if fields is None or not set(kwargs) <= fields or not all(a.is_constant() for a in args):
        raise Unsupported(f"{cls.__qualname__}() with keyword arguments")
    try:
        make_exception(cls, tuple(a.as_constant() for a in args), {})
    except Exception as error:
        raise raised_for_real(error, f"constructing {cls.__qualname__}") from None
    exc.attrs.update(kwargs)


def _os_error(cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """OSError and its builtin subclasses: ``__new__`` picks the subclass from ``errno`` and
    fills the fields; the same construction, made for real on constant arguments (it has no
    side effects), says which class Python makes. With more than two arguments ``args`` is
    not the arguments (a filename is kept apart): not modelled."""
    consts = [a.as_constant() for a in args if a.is_constant()]
    if cls.__module__ != "builtins" or kwargs or len(args) > 2 or len(consts) < len(args):
        raise Unsupported(f"constructing the exception {cls.__qualname__}")
    try:
        made = cls(*consts)
    except Exception as error:
        raise raised_for_real(error, f"constructing {cls.__qualname__}") from None
    return ExceptionValue(type(made), list(args))


def _stateless_torch_module(
    tx: Context, cls: type, args: list[Value], kwargs: dict[str, Value]
) -> Value | None:
    """``nn.CrossEntropyLoss()``, ``nn.ReLU()``, ... built in ``forward``: a torch module
    with constant arguments and no parameters or buffers is built for real while tracing (its
    forward is inlined, so nothing of it reaches the graph but the operations)."""
    if not cls.__module__.startswith("torch.nn.modules."):
        return None
    if not all(v.is_constant() for v in [*args, *kwargs.values()]):
        return None
    module = cls(
        *(a.as_constant() for a in args), **{k: v.as_constant() for k, v in kwargs.items()}
    )
    if any(True for _ in module.parameters()) or any(True for _ in module.buffers()):
        return None  # fresh random weights on every call: not a constant
    tx.hold(module)
    return ModuleValue(
        module, HeldObjectSource(id(module), f"{cls.__qualname__} built in forward", module)
    )


def _namedtuple(tx: Context, cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    fields: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    defaults: dict[str, object] = getattr(cls, "_field_defaults", {})
    if cls.__new__ is not _namedtuple_new(cls):
        raise Unsupported(f"constructing {cls.__qualname__}, a named tuple with a custom __new__")
    values: dict[str, Value] = dict(zip(fields, args))
    if len(args) > len(fields):
        raise Unsupported(f"{cls.__qualname__}() with too many arguments (TypeError)")
    for k, v in kwargs.items():
        if k not in fields or k in values:
            raise Unsupported(f"{cls.__qualname__}() with a bad keyword {k!r} (TypeError)")
        values[k] = v
    items = []
    for f in fields:
        if f in values:
            items.append(values[f])
        elif f in defaults and is_constant_type(defaults[f]):
            items.append(ConstantValue(defaults[f]))
        else:
            raise Unsupported(f"{cls.__qualname__}() missing field {f!r}")
    return NamedTupleValue(cls, items)


def _namedtuple_new(cls: type) -> object:
    # collections.namedtuple puts its generated __new__ on the class itself (or a base made by
    # typing.NamedTuple); a user class deriving from it keeps that __new__.
    for klass in cls.__mro__:
        if "_fields" in klass.__dict__ and "__new__" in klass.__dict__:
            raw = klass.__dict__["__new__"]
            return getattr(raw, "__func__", raw)
    return None
