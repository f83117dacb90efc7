"""The trace session: state shared by every frame of one trace.

A session owns the graph being built (through :mod:`.graph_bridge`), the guards recorded so
far, the side effects to replay, and the table of values already made for each source (so a
source read twice is one value, and a tensor read twice is one graph input).

Invariants:

* Every value that came from outside the trace was made by :meth:`TraceSession.wrap`, which
  recorded the guards that make using it sound.
* User functions are inlined, never called; the only real calls during a trace are to fake
  tensor kernels (through the graph) and to pure builtins on constants.
"""

from __future__ import annotations

import contextlib
import inspect
import operator
import sys
import types
from collections.abc import Callable
from typing import Any

from sapwood_graph import AttrSource, Guard, GuardKind, GuardSet, LocalSource, Source

from ..context import FrameState
from ..errors import TracedException, Unsupported
from ..guards.sources import GlobalStateSource, LenSource
from ..marks import (
    disabled_reason,
    graph_break,
    is_allowed,
    is_disabled,
    is_disallowed,
    is_torch_graph_break,
)
from ..pymodel import builtins as builtins_model
from ..pymodel import operators, torch_functions
from ..pymodel.construct import construct, inspects_frames, reads_caller_frames
from ..values.base import BuiltinValue, ConstantValue, Value, _AttributeMissing, attribute_missing
from ..values.class_subscripts import class_subscript
from ..values.containers import DictValue, TupleValue
from ..values.contexts import ContextExitValue
from ..values.exceptions import (
    CHAINING_FIELDS,
    OUTER_EXCEPTION,
    ExceptionValue,
    chaining_writes,
    exception_value,
    python_error,
)
from ..values.functions import (
    ConstantResultFunctionValue,
    FunctionValue,
    RealCellValue,
    UserFunctionValue,
)
from ..values.generators import MODULE_GENERATOR_CODES, GeneratorValue
from ..values.identity import same_input_object
from ..values.objects import ClassValue, NewObjectValue, ObjectValue, PyModuleValue
from ..values.tensors import TensorValue
from ..values.typing_forms import hint_subscription
from . import budget as _budget
from . import builder
from .binding_errors import binding_error
from .frame import FrameSuspend, SymbolicFrame, format_user_stack
from .pure_comprehensions import run_pure_comprehension
from .side_effects import SideEffects

__all__ = ["TraceSession"]


#: Values of the inputs whose object's identity is guarded (``ID_MATCH``) by the builder.
_ID_GUARDED = (UserFunctionValue, ConstantResultFunctionValue)


class TraceSession:
    """One trace of one code object."""

    def __init__(self, graph: Any, *, f_globals: dict[str, Any], function: Any) -> None:
        self.graph = graph
        self.guards = GuardSet()
        self.side_effects = SideEffects()
        self.budget = _budget.TRACE_BUDGET
        self.f_globals = f_globals
        self.function = function
        self.by_source: dict[Source, Value] = {}
        self.frames: list[SymbolicFrame] = []
        self.made_frames: list[SymbolicFrame] = []  # every frame of the trace (see release)
        self._traces: dict[tuple[tuple[types.CodeType, int], ...], str] = {}
        self.root_locals: dict[str, int] = {}
        # objects (by id) the trace holds values for, so identity survives several sources
        self.by_object: dict[int, tuple[Any, Value]] = {}
        #: the object each value from the inputs was made of, by the value's id (identity)
        self.object_of: dict[int, Any] = {}
        #: classes of objects from the inputs that the trace used as keys by identity
        self.keyed_types: set[type] = set()
        self.held: dict[int, Any] = {}
        self.member_stores: dict[Source, str] = {}
        self.open_contexts: list[Value] = []
        self.loose_state: list[Value] = []  # set_grad_enabled(b) called outside a with block
        self.subclass_functions: bool | None = None  # (see values.contexts)
        #: whether a construct that cannot be captured may become a graph break
        self.breaks_allowed = False
        #: the exception being handled at the running level (what PUSH_EXC_INFO saves and
        #: POP_EXCEPT restores); the caller's is unknown while tracing
        self.handled: Value | None = OUTER_EXCEPTION
        #: the levels below it, innermost last: each running generator has a level of its own
        self.enclosing_handled: list[Value | None] = []
        # (a session is made where sapwood handles no exception of its own: what is handled
        # now is the caller's)
        self._caller_handling = sys.exc_info()[1] is not None

    def topmost_handled(self) -> Value | None:
        """The exception ``sys.exc_info()`` names: the innermost level's that is not None."""
        if self.handled is not None:
            return self.handled
        return next((v for v in reversed(self.enclosing_handled) if v is not None), None)

    def caller_handles_nothing(self) -> bool:
        """Whether the caller handles no exception (``OUTER_EXCEPTION`` is None), guarded
        when so: a call from inside an ``except`` block traces again."""
        if self._caller_handling:
            return False
        self.guard(GuardKind.CONSTANT_MATCH, GlobalStateSource("caller_handling"), False)
        return True

    # -- guards ----------------------------------------------------------------------------
    def guard(self, kind: GuardKind, source: Source, expected: Any) -> None:
        self.guards.add(Guard(kind, source, expected))

    def guard_false(self, source: Source) -> None:
        self.guard(GuardKind.CONSTANT_MATCH, source, False)

    def guard_len(self, source: Source, length: int) -> None:
        self.guard(GuardKind.CONSTANT_MATCH, LenSource(source), length)

    def hold(self, obj: Any) -> None:
        """Keep ``obj`` alive as long as the cache entry (its identity is guarded)."""
        self.held[id(obj)] = obj

    def tensor_input(self, tensor: Any, source: Source) -> Value:
        return self.graph.tensor_input(self, tensor, source)

    def release(self) -> None:
        """The trace is over: drop the tables that reach the call's real arguments (values
        and the graph form reference cycles, which would keep them alive until the cyclic
        garbage collector runs). What the cache entry keeps (``held``, side effects to
        replay) stays."""
        self.by_source.clear()
        self.by_object.clear()
        self.object_of.clear()
        self.frames.clear()
        for frame in self.made_frames:  # (a generator's frame and its creator's, for one)
            frame.release()
        self.made_frames.clear()
        self.graph.release()

    # -- values from the outside ----------------------------------------------------------
    def wrap(self, obj: Any, source: Source, guard_identity_of: Any = None) -> Value:
        return builder.wrap(self, obj, source, guard_identity_of)

    def wrap_trusted(self, obj: Any) -> Value:
        return builder.wrap_trusted(self, obj)

    def known(self, obj: Any) -> Value | None:
        seen = self.by_object.get(id(obj))
        return seen[1] if seen is not None and seen[0] is obj else None

    def constant_or_wrap(self, obj: Any) -> Value:
        return self.wrap_trusted(obj)

    def real_cell(self, cell: types.CellType, source: Source) -> Value:
        key = id(cell)
        known = self.by_object.get(key)
        if known is not None and known[0] is cell:
            return known[1]
        value = RealCellValue(cell, source)
        self.by_object[key] = (cell, value)
        return value

    # -- calls -------------------------------------------------------------------------------
    def call(self, fn: Value, args: list[Value], kwargs: dict[str, Value]) -> Value:
        return fn.call(self, args, kwargs)

    def _qualname(self, fn: FunctionValue) -> str | None:
        """The ``__qualname__`` of the function called (which CPython's binding errors name)
        where the trace can know it: a real function's, guarded from here on, or that of one
        made in the trace and not renamed."""
        code = fn.code
        real = getattr(fn, "fn", None)
        if isinstance(real, types.FunctionType):
            if fn.source is None or not isinstance(real.__qualname__, str):
                return None
            self.guard(
                GuardKind.CONSTANT_MATCH, AttrSource(fn.source, "__qualname__"), real.__qualname__
            )
            return real.__qualname__
        fields = getattr(fn, "fields", None)
        if isinstance(fields, dict) and "__qualname__" not in fields:
            return code.co_qualname
        return None

    def inline(self, fn: Value, args: list[Value], kwargs: dict[str, Value]) -> Value:
        assert isinstance(fn, FunctionValue)
        real = getattr(fn, "fn", None)
        if real is not None:
            if real is graph_break:
                raise Unsupported("sapwood.graph_break()")
            if is_torch_graph_break(real):
                raise Unsupported("torch._dynamo.graph_break()")
            if is_disabled(real) or is_disallowed(real):
                said = disabled_reason(real)
                why = (
                    f"excluded from compiling by {said}" if said else "which sapwood must not trace"
                )
                raise Unsupported(f"a call to {real.__qualname__}, {why}")
            if is_allowed(real):
                return self.graph.call_function(self, real, args, kwargs)  # type: ignore[no-any-return]
            if (
                real is torch_functions.AUTOGRAD_FUNCTION_APPLY
                and args
                and isinstance(args[0], ClassValue)
            ):
                return torch_functions.call_autograd_function(self, args[0].cls, args[1:], kwargs)
        code = fn.code
        frames = inspects_frames(code)
        if frames is not None:
            # one that reads its callers would see generated code calling it at a graph break
            callers = reads_caller_frames(code) is not None
            exc = Unsupported(
                f"calling {code.co_qualname}, which reads frames, tracebacks or reference counts ({frames!r})",
                hint="The calling function runs eagerly as a whole, in the frames Python gives it."
                if callers
                else "",
            )
            exc.frame_bound = callers
            raise exc
        if code.co_flags & (
            inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
        ):
            raise Unsupported(f"calling the coroutine {code.co_qualname}")
        overrun = _budget.overrun_reason(code)
        if overrun is not None:
            raise Unsupported(f"a call of {code.co_qualname}, not traced again: {overrun}")
        parent = self.frames[-1] if self.frames else None
        if parent is not None and parent.depth >= _budget.MAX_INLINE_DEPTH:
            raise _budget.too_deep(parent, code)
        if not kwargs:
            ran = run_pure_comprehension(self, fn, args)
            if ran is not None:
                return ran
        fast = bind_arguments(
            code,
            fn.name,
            args,
            kwargs,
            fn.defaults(self),
            fn.kwdefaults(self),
            lambda: self._qualname(fn),
        )
        cells: dict[str, Value] = dict(zip(code.co_freevars, fn.cells(self)))
        frame = SymbolicFrame(self, code, fn.f_globals, fn.globals_source, fast, cells, parent)
        if code.co_flags & inspect.CO_GENERATOR:
            frame.is_generator = True
            self.resume(frame)  # runs the prologue up to RETURN_GENERATOR
            generator = GeneratorValue(frame)
            generator.names = _generator_names(fn, code)
            real = getattr(fn, "fn", None)
            if code in MODULE_GENERATOR_CODES and real is not None and real.__code__ is code:
                order = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
                generator.replay = (real, [fast[name] for name in order], self.side_effects)
            return generator
        return self.run_frame(frame)

    def run_frame(self, frame: SymbolicFrame) -> Value:
        self.frames.append(frame)
        try:
            return frame.run()
        finally:
            self.frames.pop()

    def resume(self, frame: FrameState[Value]) -> tuple[bool, Value]:
        """Run a generator frame to its next suspension: ``(True, yielded value)``, or
        ``(False, return value)`` once it returned."""
        assert isinstance(frame, SymbolicFrame)
        self.frames.append(frame)
        try:
            return False, frame.run()
        except FrameSuspend as suspended:
            return True, suspended.value
        finally:
            self.frames.pop()

    # -- protocol helpers --------------------------------------------------------------------
    def lookup(self, obj: Value, name: str) -> Value:
        """``obj.name``; raises ``_AttributeMissing`` where Python raises AttributeError
        (the model's own, or one the traced code raised, e.g. in a ``__getattr__``)."""
        if name == "__class__":
            # the type of every value from the inputs is guarded when it is wrapped
            return self.wrap_trusted(obj.python_type())
        try:
            return obj.getattr(self, name)
        except TracedException as exc:
            value = exception_value(exc)
            if isinstance(value, ExceptionValue) and issubclass(value.cls, AttributeError):
                raise attribute_missing(obj.describe(), name) from exc
            raise

    def getattr(self, obj: Value, name: str) -> Value:
        try:
            return obj.getattr(self, name) if name != "__class__" else self.lookup(obj, name)
        except _AttributeMissing as exc:
            raise python_error(AttributeError, _no_attribute(obj, name)) from exc

    def getitem(self, container: Value, key: Value) -> Value:
        if type(container) is BuiltinValue and isinstance(container.fn, type):
            return class_subscript(self, container.fn, key)  # ``list[int]``
        if type(container) is ObjectValue:  # ``List[Tensor]``: a type hint, made now
            hint = hint_subscription(self, container, container.obj, key)
            if hint is not None:
                return hint
        return container.getitem(self, key)

    def iterate(self, value: Value) -> Value:
        return value.iterate(self)

    def unpack(self, value: Value) -> list[Value]:
        return value.unpack(self)

    def length(self, value: Value) -> int:
        return value.length(self)

    def as_mapping(self, value: Value) -> DictValue:
        if isinstance(value, DictValue):
            return value
        keys_fn = None
        with contextlib.suppress(Unsupported):
            keys_fn = value.getattr(self, "keys")
        if keys_fn is None:
            raise Unsupported(f"{value.describe()} used as a mapping")
        out = DictValue({})
        for key in self.unpack(self.call(keys_fn, [], {})):
            out.setitem(self, key, self.getitem(value, key))
        return out

    def enter_context(self, manager: Value) -> tuple[Value, Value]:
        enter = getattr(manager, "enter", None)
        if enter is None and isinstance(manager, (ObjectValue, NewObjectValue)):
            # a user context manager: its __enter__ and __exit__ are inlined
            entered_value = self.call(self.getattr(manager, "__enter__"), [], {})
            return self.getattr(manager, "__exit__"), entered_value
        if enter is None:
            raise Unsupported(
                f"a with block over {manager.describe()}",
                hint="Only torch.no_grad/enable_grad/set_grad_enabled/autocast are supported.",
            )
        entered = enter(self)
        self.open_contexts.append(manager)
        return ContextExitValue(manager), entered

    def exit_context(self, manager: Value) -> None:
        if not self.open_contexts or self.open_contexts[-1] is not manager:
            raise Unsupported("leaving with blocks out of order")
        self.open_contexts.pop()
        manager.exit(self)  # type: ignore[attr-defined]

    def truth(self, value: Value) -> bool:
        return value.truth(self)

    def equal(self, a: Value, b: Value) -> bool:
        """``a == b`` as ``in``, ``list.index`` and ``list.count`` compute it (identity first)."""
        if a is b:
            return True
        if a.is_constant() and b.is_constant():
            return bool(a.as_constant() == b.as_constant())
        if isinstance(a, TensorValue) or isinstance(b, TensorValue):
            raise Unsupported(
                "comparing a tensor with == inside 'in' or list.index (data-dependent)"
            )
        if _plain_user_object(a) or _plain_user_object(b):
            # the object's own __eq__ (inlined), reflected as Python does; a builtin operand's
            # __eq__ gives NotImplemented for it
            return self.truth(operators.binary(self, operator.eq, a, b))
        for v in (a, b):
            if (
                getattr(v.python_type(), "__eq__", object.__eq__) is not object.__eq__
                and not v.is_constant()
            ):
                raise Unsupported(f"== on {v.describe()}, whose class defines __eq__")
        ka, kb = self.identity_key(a), self.identity_key(b)
        same = same_input_object(self, a, b, ka, kb)
        return bool(ka == kb) if same is None else same

    def identity_key(self, value: Value) -> Any:
        """A key equal for two values exactly when they are the same Python object, or None."""
        obj = self._object(value)
        if obj is not None:
            return ("__object__", id(obj))
        return ("__value__", id(value))

    def identity_guarded(self, value: Value) -> bool:
        """Whether ``value`` is a held object (guarded by identity: ``ID_MATCH``): every
        source of a kind that is not one value per object is guarded so when wrapped."""
        obj = self._object(value)
        return obj is not None and self.held.get(id(obj)) is obj

    def keyed_by_identity(self, value: Value) -> None:
        """``value``, from the inputs, was used as a key by its identity (a dict key, a set
        member): the entry then requires the inputs of its class to be distinct objects."""
        obj = self._object(value)
        if obj is not None and value.source is not None:
            self.keyed_types.add(type(obj))

    def _object(self, value: Value) -> Any:
        """The object a value from the inputs stands for (None for one made in the trace)."""
        obj = getattr(value, "obj", None)
        if obj is None:
            obj = getattr(value, "module", None)
        if obj is None and value.source is not None:
            if isinstance(value, _ID_GUARDED):
                obj = value.fn  # a function from the inputs: its identity is guarded
            else:
                obj = self.object_of.get(id(value))
        return obj

    def pin_identity(self, value: Value) -> None:
        """Guard that ``value``'s source holds this very object (an answer that depends on
        which object it is, not only on whether it is another input's: ``id()`` as a key)."""
        obj = self._object(value)
        if obj is not None and value.source is not None:
            self.hold(obj)
            self.guard(GuardKind.ID_MATCH, value.source, id(obj))

    def location(self) -> str | None:
        return self.frames[-1].location() if self.frames else None

    def stack_trace(self) -> str | None:
        if not self.frames:
            return None
        key = tuple((frame.code, frame.line()) for frame in self.frames)
        trace = self._traces.get(key)
        if trace is None:
            trace = self._traces[key] = format_user_stack(key)
        return trace

    # -- the model of Python and torch (what values ask of it) ------------------------------
    def call_builtin(self, fn: Value, args: list[Value], kwargs: dict[str, Value]) -> Value:
        assert isinstance(fn, BuiltinValue)
        return builtins_model.call_builtin(self, fn, args, kwargs)

    def call_torch_function(self, fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
        return torch_functions.call_torch_function(self, fn, args, kwargs)

    def construct(self, cls: Value, args: list[Value], kwargs: dict[str, Value]) -> Value:
        assert isinstance(cls, ClassValue)
        return construct(self, cls, args, kwargs)

    def binary_operation(self, fn: Any, a: Value, b: Value) -> Value:
        return operators.binary(self, fn, a, b)

    def unary_operation(self, fn: Any, a: Value) -> Value:
        return operators.unary(self, fn, a)

    def record_attr_write(self, target: Value, name: str, value: Value) -> None:
        """An attribute write on an object from the inputs, to replay after the graph (an
        exception's chaining field: with what its setter sets besides)."""
        writes = [(name, value)]
        if name in CHAINING_FIELDS and issubclass(target.python_type(), BaseException):
            writes = chaining_writes(name, value)
        real = self.graph.input_object(target) if isinstance(target, TensorValue) else None
        for field, item in writes:
            self.side_effects.store_attr(target, field, item, real)

    def plain_setattr(self, cls: type) -> bool:
        """Whether ``cls``'s ``__setattr__``, not object's, is a plain store all the same:
        BaseException's (the generic one)."""
        return cls.__setattr__ is BaseException.__setattr__


def _no_attribute(obj: Value, name: str) -> str:
    """Python's message for a missing attribute."""
    try:
        cls = obj.python_type()
    except Unsupported:
        return f"{obj.describe()} has no attribute {name!r}"
    if isinstance(obj, PyModuleValue):
        return f"module {obj.module.__name__!r} has no attribute {name!r}"
    if isinstance(obj, ClassValue):
        return f"type object {obj.cls.__name__!r} has no attribute {name!r}"
    return f"{cls.__name__!r} object has no attribute {name!r}"


def bind_arguments(
    code: types.CodeType,
    name: str,
    args: list[Value],
    kwargs: dict[str, Value],
    defaults: tuple[Value, ...],
    kwdefaults: dict[str, Value],
    qualname: Callable[[], str | None] | None = None,
) -> dict[str, Value]:
    """Fast locals of a call of ``code`` with ``args``/``kwargs``, as Python would bind them;
    arguments that do not fit raise CPython's ``TypeError`` in the traced program."""

    def _unfit(reason: str) -> Unsupported:
        known = qualname() if qualname is not None else None
        return binding_error(code, len(args), kwargs, len(defaults), kwdefaults, known, reason)

    argc = code.co_argcount
    posonly = code.co_posonlyargcount
    kwonly = code.co_kwonlyargcount
    names = code.co_varnames
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    bound: dict[str, Value] = {}
    for i, value in enumerate(args[:argc]):
        bound[names[i]] = value
    extra = args[argc:]
    if extra and not has_varargs:
        raise _unfit(f"calling {name}() with too many positional arguments (TypeError)")
    index = argc + kwonly
    if has_varargs:
        bound[names[index]] = TupleValue(list(extra))
        index += 1
    varkw: list[tuple[Value, Value]] = []
    keywordable = names[posonly : argc + kwonly]
    for key, value in kwargs.items():
        if key in keywordable:
            if key in bound:
                raise _unfit(f"{name}() got multiple values for argument {key!r} (TypeError)")
            bound[key] = value
        elif has_varkw:
            varkw.append((ConstantValue(key), value))
        else:
            raise _unfit(f"{name}() got an unexpected keyword argument {key!r} (TypeError)")
    if has_varkw:
        out = DictValue({})
        for k, v in varkw:
            out.entries[k.as_constant()] = (k, v)
        bound[names[index]] = out
    first_default = argc - len(defaults)
    for i in range(argc):
        if names[i] not in bound:
            if i >= first_default:
                bound[names[i]] = defaults[i - first_default]
            else:
                raise _unfit(f"{name}() missing argument {names[i]!r} (TypeError)")
    for i in range(argc, argc + kwonly):
        if names[i] not in bound:
            if names[i] in kwdefaults:
                bound[names[i]] = kwdefaults[names[i]]
            else:
                raise _unfit(f"{name}() missing keyword argument {names[i]!r} (TypeError)")
    return bound


def root_sources(code: types.CodeType) -> list[tuple[str, LocalSource]]:
    """The parameters of ``code`` in binding order, with their sources."""
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return [(n, LocalSource(n)) for n in code.co_varnames[:count]]


def _plain_user_object(value: Value) -> bool:
    """A user object whose class subclasses no builtin type but object: ``==`` with it is
    decided by its own (inlined) methods, or by identity."""
    if not isinstance(value, (ObjectValue, NewObjectValue)):
        return False
    return all(k is object or k.__module__ != "builtins" for k in value.python_type().__mro__)


def _generator_names(fn: Value, code: types.CodeType) -> tuple[str, str] | None:
    """The ``__name__`` and ``__qualname__`` a generator of ``fn`` has (its function's at the
    call); None where the program assigned them in the trace (not known as strings here)."""
    real = getattr(fn, "fn", None)
    if isinstance(real, types.FunctionType):
        return real.__name__, real.__qualname__
    fields = getattr(fn, "fields", {})
    if "__name__" in fields or "__qualname__" in fields:
        return None
    return code.co_name, code.co_qualname
