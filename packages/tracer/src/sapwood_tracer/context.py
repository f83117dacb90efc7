"""What the value model and the model of Python may ask of the running trace.

The interpreter's trace session implements these protocols; values
(:mod:`sapwood_tracer.values`), the models of builtins, operators and torch functions
(:mod:`sapwood_tracer.pymodel`) and the frame name only them, so none of them imports the
interpreter. Everything a value can make happen outside itself goes through here:

* **emit a node** — :class:`GraphRecorder` (``tx.graph``): torch calls become graph nodes,
  and their fake results decide the result's value kind;
* **add a guard** — :meth:`TraceContext.guard` and friends: facts the trace relied on, checked
  on every later call before the compiled code runs;
* **wrap an outside object** — :meth:`TraceContext.wrap`: a real object read through a
  source becomes a value, with the guards that make using it sound;
* **inline a call** — :meth:`TraceContext.call` / :meth:`TraceContext.inline`: user
  functions run as child frames of the same trace, never for real;
* **record a side effect** — :class:`EffectLog` (``tx.side_effects``): writes to objects that
  existed before the call, replayed after the graph ran;
* **ask the Python model** — :meth:`TraceContext.call_builtin`, ``call_torch_function``,
  ``construct``, ``binary_operation``, ``unary_operation``: how Python and torch behave on
  values, modelled above the value model (:mod:`sapwood_tracer.pymodel`).

The protocols are generic in the value type ``V`` so this module, the lowest of the tracer's
layers but the guards, names no value class: the value model spells the context it receives
``Context`` (``TraceContext[Value]``, see :mod:`sapwood_tracer.values.base`).
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from sapwood_graph import GuardKind, Source

__all__ = ["EffectLog", "FrameState", "GraphRecorder", "TraceContext"]

V = TypeVar("V")


class GraphRecorder(Protocol[V]):
    """The graph being recorded (the interpreter's graph bridge)."""

    def call_function(self, tx: Any, fn: Any, args: list[V], kwargs: dict[str, V]) -> V:
        """Record ``fn(*args, **kwargs)`` as a node; the value of its (fake) result."""
        ...

    def call_method(self, tx: Any, name: str, args: list[V], kwargs: dict[str, V]) -> V:
        """Record ``args[0].name(*args[1:], **kwargs)`` as a node."""
        ...

    def record_state_call(self, tx: Any, fn: Any, args: tuple[Any, ...]) -> Any:
        """Record a call that switches global torch state (grad mode, autocast); running it
        on the fake values switches the state now, too. Returns its proxy."""
        ...

    def view_leaf(self, tx: Any, value: V) -> None:
        """Make ``value``, a view of a graph input that does not require grad, the leaf that
        requires grad which ``value.requires_grad = True`` makes eagerly (a graph input the
        entry makes); refused (``Unsupported``) where that would not be exact."""
        ...

    def symint_input(self, tx: Any, value: int, source: Source) -> V:
        """A graph input for the int at ``source``, traced as a symbol (``value``: its
        example)."""
        ...

    def getitem_proxy(self, proxy: Any, index: int) -> Any:
        """A proxy for item ``index`` of a node with several outputs."""
        ...

    def input_object(self, value: V) -> Any | None:
        """The tensor object a graph input ``value`` was made for (None for other values)."""
        ...

    def input_of(self, value: V) -> V | None:
        """The graph input ``value`` is the very object of (itself, or an input an in-place
        operation returned), or None."""
        ...

    def symbol_proxy(self, expr: Any) -> Any | None:
        """The graph input bound to the size symbol ``expr``, if the graph has one."""
        ...

    def fake_mode(self) -> Any:
        """The graph's fake tensor mode (for metadata questions on fake values)."""
        ...

    def subgraph(self, name: str) -> contextlib.AbstractContextManager[Any]:
        """Record into a child graph while the block runs (the body of a higher-order
        operation; values of enclosing graphs used in it are lifted). Yields the child."""
        ...

    def call_subgraph(self, tx: Any, op: Any, body: Any, kwargs: dict[str, Any]) -> V:
        """Record ``op(body, *lifted, **kwargs)`` in the graph that opened ``body`` (closed,
        its output a tuple of proxies); the value of the result (one item per output)."""
        ...

    def subgraph_attribute(self, name: str, graph_module: Any) -> Any:
        """A child's graph installed on the current graph: the proxy that reads it."""
        ...

    def call_operation(self, tx: Any, op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> V:
        """Record ``op(*args, **kwargs)`` (proxies and constants) in the current graph."""
        ...


class EffectLog(Protocol[V]):
    """Side effects on objects that existed before the call, replayed after the graph."""

    def mutate_container(self, container: V) -> None:
        """A list or dict from the inputs changed: its final contents are written back."""
        ...

    def store_cell(self, cell: V) -> None:
        """A real closure cell was assigned (``nonlocal``): its last value is written back."""
        ...

    #: how many effects the trace recorded so far (a step that recorded none can be undone)
    changes: int

    def mark(self) -> tuple[int, ...]:
        """Where the record stands now."""
        ...

    def pending_writes(self) -> dict[tuple[int, str], V]:
        """A copy of the attribute values pending per (object id, name)."""
        ...

    def restored_since(self, mark: tuple[int, ...], pending: dict[tuple[int, str], V]) -> bool:
        """Whether all recorded since ``mark`` are attribute writes putting back what was
        there (``pending``: :meth:`pending_writes` at ``mark``)."""
        ...

    def written_values(self) -> list[V]:
        """Every value the trace wrote so far into something that existed before it."""
        ...

    def wrote_to(self, obj: Any) -> bool:
        """Whether the trace assigned any attribute of ``obj``."""
        ...

    def pending_attr(self, obj: Any, name: str) -> V | None:
        """The value an attribute write of this trace gave ``obj.name``, if any."""
        ...

    def make_again(self, value: V) -> None:
        """``value`` was made by the trace and making it is itself an effect (a hook handle
        takes its id from a counter): the entry makes it again, in this order, before the
        writes are replayed."""
        ...

    #: the names of the class attributes the trace assigned (on any class)
    class_attr_names: set[str]

    def store_global(self, f_globals: dict[str, Any], name: str, value: V | None) -> None:
        """A global was assigned (``None``: deleted)."""
        ...

    def pending_global(self, f_globals: dict[str, Any], name: str) -> tuple[bool, V | None]:
        """``(True, value)`` if the trace assigned the global (value ``None``: deleted)."""
        ...

    #: the models of real objects' states, by the object's id (see :meth:`track_state`)
    object_states: dict[int, Any]

    def state_of(self, obj: Any) -> Any:
        """The trace's model of the real object ``obj``'s state (a random generator's, ...),
        if it has one yet."""
        ...

    def track_state(self, obj: Any, state: Any) -> None:
        """The trace models ``obj``'s state from now on: ``state.replay()`` writes it back."""
        ...


class FrameState(Protocol[V]):
    """A symbolic frame as values see it (``super()`` reads its first argument; a generator
    holds its suspended frame)."""

    code: types.CodeType
    #: the globals the frame's code runs with
    f_globals: dict[str, Any]
    locals: dict[str, V]
    cells: dict[str, V]

    def push(self, value: V) -> None: ...


class TraceContext(Protocol[V]):
    """One running trace, as values, the Python model and the frames see it."""

    #: whether a construct that cannot be captured may become a graph break
    breaks_allowed: bool
    #: instructions this trace may still run before it is refused (runaway loops)
    budget: int
    #: the exception being handled at the running level (a generator runs at a level of its
    #: own): an exception value of the trace, the caller's unknown one (``OUTER_EXCEPTION``),
    #: or None
    handled: V | None
    #: the levels below the running one, innermost last
    enclosing_handled: list[V | None]
    #: whether tensor subclasses' ``__torch_function__`` runs at this point of the trace
    #: (None until first asked; see ``values.contexts.subclass_functions_enabled``)
    subclass_functions: bool | None

    @property
    def graph(self) -> GraphRecorder[V]: ...

    @property
    def side_effects(self) -> EffectLog[V]: ...

    @property
    def f_globals(self) -> dict[str, Any]:
        """The root function's globals (its globals are read through ``G`` in guards)."""
        ...

    @property
    def frames(self) -> Sequence[FrameState[V]]:
        """The active frames, innermost last."""
        ...

    @property
    def member_stores(self) -> dict[Source, str]:
        """Module attribute sources read from a module's registry dict (``_parameters``...)."""
        ...

    @property
    def object_of(self) -> dict[int, Any]:
        """The object of the inputs each value was made of, by the value's id."""
        ...

    @property
    def loose_state(self) -> list[V]:
        """Grad-mode switches made by a call outside a ``with`` block, still in force."""
        ...

    # -- guards --------------------------------------------------------------------------
    def guard(self, kind: GuardKind, source: Source, expected: Any) -> None: ...

    def guard_false(self, source: Source) -> None: ...

    def topmost_handled(self) -> V | None:
        """The exception ``sys.exc_info()`` names (the innermost level's that is not None)."""
        ...

    def caller_handles_nothing(self) -> bool:
        """Whether the caller handles no exception (``OUTER_EXCEPTION`` is None); guarded."""
        ...

    def guard_len(self, source: Source, length: int) -> None: ...

    def hold(self, obj: Any) -> None:
        """Keep ``obj`` alive as long as the cache entry (its identity is guarded)."""
        ...

    # -- values from outside the trace ----------------------------------------------------
    def wrap(self, obj: Any, source: Source, guard_identity_of: Any = None) -> V:
        """``obj``, read through ``source``, as a value, with the guards that make it sound."""
        ...

    def known(self, obj: Any) -> V | None:
        """The value the trace already made of ``obj``, an object of the inputs (so what the
        trace changed in it shows), or None where it has not read the object yet."""
        ...

    def wrap_trusted(self, obj: Any) -> V:
        """A value for ``obj`` with no source (code constants, library attributes)."""
        ...

    def constant_or_wrap(self, obj: Any) -> V: ...

    def real_cell(self, cell: types.CellType, source: Source) -> V:
        """The value of a closure cell that existed before the trace (one per cell)."""
        ...

    # -- calls ----------------------------------------------------------------------------
    def call(self, fn: V, args: list[V], kwargs: dict[str, V]) -> V: ...

    def inline(self, fn: V, args: list[V], kwargs: dict[str, V]) -> V:
        """Run a Python function's bytecode in a child frame of this trace."""
        ...

    def resume(self, frame: FrameState[V]) -> tuple[bool, V]:
        """Run a suspended generator frame to its next ``yield`` (``(True, value)``) or to
        its return (``(False, value)``)."""
        ...

    # -- Python's protocols on values ----------------------------------------------------
    def lookup(self, obj: V, name: str) -> V:
        """``obj.name``, raising the tracer's AttributeError where Python raises one."""
        ...

    def getattr(self, obj: V, name: str) -> V: ...

    def getitem(self, container: V, key: V) -> V: ...

    def iterate(self, value: V) -> V: ...

    def unpack(self, value: V) -> list[V]: ...

    def length(self, value: V) -> int: ...

    def truth(self, value: V) -> bool: ...

    def equal(self, a: V, b: V) -> bool:
        """``a == b`` as ``in`` and ``list.index`` compute it (identity first)."""
        ...

    def identity_key(self, value: V) -> Any:
        """A key equal for two values exactly when they are the same Python object."""
        ...

    def pin_identity(self, value: V) -> None:
        """Guard that ``value``'s source holds this very object."""
        ...

    def identity_guarded(self, value: V) -> bool:
        """Whether the guards fix which object ``value`` is (an ``ID_MATCH`` on it)."""
        ...

    def keyed_by_identity(self, value: V) -> None:
        """``value`` was used as a key by its identity: inputs of its class must stay
        distinct objects for the trace to hold."""
        ...

    def as_mapping(self, value: V) -> Any:
        """``value`` as a dict value (for ``**kwargs``)."""
        ...

    def enter_context(self, manager: V) -> tuple[V, V]: ...

    def exit_context(self, manager: V) -> None: ...

    def record_attr_write(self, target: V, name: str, value: V) -> None:
        """An attribute write on an object from the inputs (a side effect to replay)."""
        ...

    def plain_setattr(self, cls: type) -> bool: ...

    def location(self) -> str | None:
        """``file:line`` of the instruction running in the innermost frame."""
        ...

    def stack_trace(self) -> str | None:
        """The user's frames being traced, outermost first, as a traceback prints them."""
        ...

    # -- the model of Python and torch -----------------------------------------------------
    def call_builtin(self, fn: V, args: list[V], kwargs: dict[str, V]) -> V:
        """A call of a builtin or standard-library callable, as the model of Python does it."""
        ...

    def call_torch_function(self, fn: Any, args: list[V], kwargs: dict[str, V]) -> V:
        """A call of a torch callable: a node, a folded metadata answer, or refused."""
        ...

    def construct(self, cls: V, args: list[V], kwargs: dict[str, V]) -> V:
        """Calling a class: a new object, folded constant or named tuple."""
        ...

    def binary_operation(self, fn: Any, a: V, b: V) -> V:
        """``fn(a, b)`` for an operator function of :mod:`operator`, as Python dispatches it."""
        ...

    def unary_operation(self, fn: Any, a: V) -> V: ...
