"""The guard check run on every call of a cache entry, as fast straight-line Python.

:func:`emit_guards` turns a cache entry's guard records into lines of the generated
entry function (the text keeps :mod:`.emitter`'s invariant: generated names, integer
literals and fixed keywords only). The records stay the specification; the lines are an
equivalent check that does less work per call:

* **Implied guards are not emitted.** A ``TYPE_MATCH`` is left out where another check of
  the same source already fixes the type: an identity check (``v is k``) of an object whose
  class cannot be reassigned (an instance of an immutable type other than a module), or the
  source's constant check, which is then emitted type-exact (``type(v) is int and v == 3``).
* **Modules are read through their instance dict.** ``nn.Module`` defines ``__getattr__``,
  which sends every ``module.attr`` down CPython's slow attribute path. For a module guarded
  by identity, attributes are read as ``module.__dict__[name]`` (parameters, buffers and
  submodules from ``__dict__['_parameters']`` and so on). That is what attribute access
  returns as long as the module's class is still the traced class (checked with the
  module's identity), that class's MRO is the same tuple (checked once per class), and no
  class in the MRO defines ``name`` or ``__getattribute__`` (one ``isdisjoint`` per class
  dict per call). A name some class defined at trace time keeps ``getattr``.
* **Guards on an unchanged dict are skipped.** The guards on entries of one dict (a module's
  instance dict, a module's globals) are checked only when the dict's version tag differs
  from the one they last passed with, those on a function's defaults only when its
  ``__defaults__`` is not the very tuple traced (see :mod:`.versions`).
* **A class's missing names are checked together.** Guards that a name is not in a class's
  own dict (``(name in <cls>.__dict__) == False``: kept by attribute lookups that went past
  the class) become one ``isdisjoint`` per class, with the module classes' names.
* **Likely failures first.** Guards on the arguments (not reached through a module) and
  the arguments' tensors run first, then torch's global state, then the rest in recorded
  order; module parameters and buffers (one C++ batch check) and the no-aliasing check of
  the tensor inputs come last. A source is still read only after the guards on the sources
  it is read from (a chain never moves before its prefix).
* **No bookkeeping on the hot path.** A failed check returns its guard's ``Miss``. An
  exception, or a failed batch or class check, calls a *locator*: the guards checked one by
  one in recorded order (built on first use), which returns the ``Miss`` of the first guard
  that fails, or ``Miss(-1)`` ("guard evaluation") if none does.

What stays assumed, as for any attribute read the trace relied on: a class's ``__dict__``
descriptor is not replaced after compiling.
"""

from __future__ import annotations

import math
import operator
import types
import weakref
from typing import Any

import torch

from sapwood_graph import (
    AttrSource,
    Guard,
    GuardKind,
    LocalSource,
    Source,
)

from .checks import guard_check
from .emitter import (
    GATE,
    READ_FOR,
    Emitter,
    Miss,
    _batch_tensor_checker,
    _has_float,
    _is_static_spec,
    address,
)
from .sources import (
    ContainsSource,
    DistinctIdsSource,
    GlobalStateSource,
    HasAttrSource,
    HeldObjectSource,
    ModuleHooksSource,
    WeakHandle,
    read_from,
    strong,
)
from .versions import FRAME_GLOBALS, Defaults, dict_version, plan_gates

__all__ = ["HOOK_ATTRS", "emit_guards"]

#: Py_TPFLAGS_IMMUTABLETYPE: instances of such a type cannot have ``__class__`` reassigned
#: (modules excepted: CPython lets a module switch to a ModuleType subclass).
_IMMUTABLE_TYPE = 1 << 8

#: The hook dicts a ``ModuleHooksSource`` is about.
HOOK_ATTRS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")

#: Sources whose value is always a bool: ``guard == False`` is emitted as ``if expr:``.
_BOOL_SOURCES = (ContainsSource, HasAttrSource, ModuleHooksSource)

_INDENT = " " * 12
_NO_GUARD_FAILED = Miss(-1)


def _class_is_fixed(obj: Any) -> bool:
    return bool(type(obj).__flags__ & _IMMUTABLE_TYPE) and not isinstance(obj, types.ModuleType)


def _every_source(sources: list[Source]) -> list[Source]:
    """``sources`` and every source they are read from, each once."""
    seen: set[Source] = set()
    out: list[Source] = []
    todo = list(sources)
    while todo:
        s: Source | None = todo.pop()
        while s is not None and s not in seen:  # a source seen had its bases walked too
            seen.add(s)
            out.append(s)
            if isinstance(s, DistinctIdsSource):
                todo.extend(s.sources)
            s = s.base
    return out


def _guard_sources(guard: Guard) -> list[Source]:
    found = [] if guard.source is None else [guard.source]
    if guard.kind is GuardKind.ALIAS_MATCH and isinstance(guard.expected, Source):
        found.append(guard.expected)
    found.extend(source for _, source in guard.symbols)
    return found


def _dict_readable_names(
    module: torch.nn.Module, defined_by_class: dict[type, frozenset[str]]
) -> frozenset[str] | None:
    """Names of ``module.__dict__`` that attribute access finds there (no class in the MRO
    defines them), or ``None`` where the module's attributes must go through ``getattr``."""
    cls = type(module)
    if cls.__getattribute__ is not object.__getattribute__:
        return None
    inst = object.__getattribute__(module, "__dict__")
    if type(inst) is not dict:
        return None
    defined = defined_by_class.get(cls)
    if defined is None:
        defined = frozenset(name for klass in cls.__mro__ for name in klass.__dict__)
        defined_by_class[cls] = defined
    return frozenset(name for name in inst if type(name) is str and name not in defined)


def _class_dict_lacks(guard: Guard) -> type | None:
    """The class of a guard ``(name in <class>.__dict__) == False``, else None."""
    source = guard.source
    if not (
        guard.kind is GuardKind.CONSTANT_MATCH
        and guard.expected is False
        and isinstance(source, ContainsSource)
        and isinstance(source.of, AttrSource)
        and source.of.attr == "__dict__"
        and isinstance(source.of.base, HeldObjectSource)
    ):
        return None
    klass = strong(source.of.base.held)
    if not isinstance(klass, type) or any(
        "__dict__" in vars(meta) for meta in type(klass).__mro__ if meta is not type
    ):
        return None  # (a metaclass could define what the class's ``__dict__`` is)
    return klass


class _Locator:
    """Finds the guard a rejected call failed: the guards one by one, in recorded order.

    Built on first use (most entries never miss by exception), from a blank emitter over
    the same frame.
    """

    __slots__ = ("_em", "_fn", "_guards")

    def __init__(self, em: Emitter, guards: list[Guard]) -> None:
        self._em: Emitter | None = em
        self._guards = guards
        self._fn: Any = None

    def __call__(self, L: tuple[Any, ...], C: Any, G: Any) -> Miss:
        fn = self._fn
        if fn is None:
            assert self._em is not None
            try:
                fn = _build_locator(self._em, self._guards)
            except Exception:  # a guard only the fast check can express: no index to give
                fn = _no_index
            self._fn = fn
            self._em = None
        result: Miss = fn(L, C, G)
        return result


def _no_index(L: Any, C: Any, G: Any) -> Miss:
    return _NO_GUARD_FAILED


def _build_locator(em: Emitter, guards: list[Guard]) -> Any:
    misses = em.const(tuple(Miss(i) for i in range(max(len(guards), 1))))
    indent = "        "
    em.lines = ["    g = 0", "    try:"]
    for index, guard in enumerate(guards):
        em.lines.append(f"{indent}g = {index}")
        check = guard_check(em, guard, indent)
        em.lines.append(f"{indent}if not ({check}):")
        em.lines.append(f"{indent}    return {misses}[{index}]")
    em.lines += [
        f"{indent}pass",
        "    except Exception:",
        f"{indent}return {misses}[g]",
        f"    return {em.const(_NO_GUARD_FAILED)}",
    ]
    return em.build("sapwood_guard_locator", list(em.lines))


class _Plan:
    """What to emit for one guard list: which guards are implied, how modules are read, in
    what order the rest runs."""

    def __init__(self, em: Emitter, guards: list[Guard], examples: dict[Source, Any]) -> None:
        self.guards = guards
        identity: dict[Source, Any] = {}
        constants: dict[Source, int] = {}
        for index, guard in enumerate(guards):
            source = guard.source
            if source is None:
                continue
            if guard.kind is GuardKind.ID_MATCH and guard.expected in em.held:
                identity[source] = strong(em.held[guard.expected])  # type: ignore[index]
            elif guard.kind is GuardKind.CONSTANT_MATCH:
                constants.setdefault(source, index)
                if guard.expected is None or isinstance(guard.expected, bool):
                    identity.setdefault(source, guard.expected)
        #: objects guarded by identity (or constants), by source
        self.identity = identity
        self.modules = {s: m for s, m in identity.items() if isinstance(m, torch.nn.Module)}
        for guard in guards:
            # a module guarded by its class: read like one guarded by identity (the class
            # check is what the reads through ``__dict__`` rely on)
            module = em.module_examples.get(guard.source)  # type: ignore[arg-type]
            if (
                guard.kind is GuardKind.TYPE_MATCH
                and module is not None
                and type(module) is guard.expected
            ):
                self.modules.setdefault(guard.source, module)  # type: ignore[index]
        self.implied: set[int] = set()
        self.exact: set[int] = set()  # constant checks emitted with their type
        for index, guard in enumerate(guards):
            if guard.kind is not GuardKind.TYPE_MATCH or guard.source is None:
                continue
            source = guard.source
            if source in identity:
                obj = identity[source]
                if type(obj) is guard.expected and _class_is_fixed(obj):
                    self.implied.add(index)
                    continue
            constant = constants.get(source)
            if constant is not None and type(guards[constant].expected) is guard.expected:
                self.implied.add(index)
                self.exact.add(constant)
        self._plan_module_reads(em, guards, examples)
        self._plan_order(guards, examples)

    def _plan_module_reads(
        self, em: Emitter, guards: list[Guard], examples: dict[Source, Any]
    ) -> None:
        defined: dict[type, frozenset[str]] = {}
        readable = {s: _dict_readable_names(m, defined) for s, m in self.modules.items()}
        used: dict[Source, set[str]] = {}
        chains = [s for g in guards for s in _guard_sources(g)] + list(examples)
        for source in _every_source(chains):
            base = source.base
            names = readable.get(base) if base is not None else None
            if names is None:
                continue
            if isinstance(source, AttrSource) and source.attr != "__dict__":
                name = em.member_stores.get(source, source.attr)
                if name in names:
                    used.setdefault(base, set()).add(name)  # type: ignore[arg-type]
            elif isinstance(source, ModuleHooksSource) and names.issuperset(HOOK_ATTRS):
                used.setdefault(base, set()).update(HOOK_ATTRS)  # type: ignore[arg-type]
        #: module source -> its class, for modules read through their dict
        self.dict_modules: dict[Source, type] = {}
        by_class: dict[type, set[str]] = {}
        for source, names_used in used.items():
            em.instance_attrs[source] = frozenset(names_used)
            cls = type(self.modules[source])
            self.dict_modules[source] = cls
            by_class.setdefault(cls, set()).update(names_used)
        #: (class, its MRO) pairs, and (class in an MRO, names no class may define)
        self.mros = [(cls, cls.__mro__) for cls in by_class]
        undefined: dict[type, set[str]] = {}
        for cls, names_used in by_class.items():
            for klass in cls.__mro__:
                if not klass.__flags__ & _IMMUTABLE_TYPE:
                    undefined.setdefault(klass, {"__getattribute__"}).update(names_used)
        for index, guard in enumerate(guards):
            klass = _class_dict_lacks(guard)
            if klass is not None:
                self.implied.add(index)  # (checked with the class's other names, below)
                undefined.setdefault(klass, set()).add(guard.source.key)  # type: ignore[union-attr]
        self.undefined = [(klass, frozenset(names)) for klass, names in undefined.items()]

    def _plan_order(self, guards: list[Guard], examples: dict[Source, Any]) -> None:
        args: list[int] = []
        arg_tensors: list[int] = []
        state: list[int] = []
        rest: list[int] = []
        module_tensors: list[int] = []
        last: list[int] = []
        for index, guard in enumerate(guards):
            if index in self.implied:
                continue
            source = guard.source
            if source is None:
                rest.append(index)
                continue
            argument = isinstance(source.root, LocalSource) and not read_from(source, self.modules)
            if isinstance(source, DistinctIdsSource):
                last.append(index)
            elif isinstance(source, GlobalStateSource):
                state.append(index)
            elif (
                guard.kind is GuardKind.TENSOR_MATCH
                and source in examples
                and _is_static_spec(guard.expected)
            ):
                (arg_tensors if argument else module_tensors).append(index)
            elif argument:
                args.append(index)
            else:
                rest.append(index)
        self.order: list[list[int] | tuple[str, list[int]]] = [
            args,
            ("batch", arg_tensors),
            state,
            rest,
            ("batch", module_tensors),
            last,
        ]


def emit_guards(
    em: Emitter,
    guards: list[Guard],
    examples: dict[Source, torch.Tensor],
    fail: str,
) -> list[str]:
    """Lines (indent 8, inside the caller's ``try:``) accepting exactly the calls that pass
    ``guards``; a rejected call returns a ``Miss`` (``{fail}[index]`` or the locator's)."""
    plan = _Plan(em, guards, examples)
    locate = f"return {em.const(_Locator(em.blank(), guards))}(L, C, G)"
    em.lines.append("        try:")
    for cls, mro in plan.mros:
        em.lines.append(f"{_INDENT}if {em.const(cls)}.__mro__ is not {em.const(mro)}:")
        em.lines.append(f"{_INDENT}    {locate}")
    for klass, names in plan.undefined:
        # a live view of the class's own dict (a class keeps its dict for life)
        keys = em.const(klass.__dict__.keys())
        em.lines.append(f"{_INDENT}if not {keys}.isdisjoint({em.const(names)}):")
        em.lines.append(f"{_INDENT}    {locate}")
    gates = plan_gates(em, plan, guards)
    moved = {i for _, indices in gates.values() for i in indices}
    slots = {first: slot for slot, first in enumerate(gates)}
    tags = em.const([-1] * len(gates))  # (per slot: the dict's tag when its checks last passed)
    for step in plan.order:
        if isinstance(step, tuple):
            _emit_batch(em, [guards[i] for i in step[1]], step[1], examples, fail, locate)
            continue
        for index in step:
            gate = gates.get(index)
            if gate is not None:
                _emit_gate(em, plan, guards, gate, tags, slots[index], fail)
                continue
            if index in moved:
                continue
            if _emit_distinct_ids(em, plan, guards[index], index, examples, fail):
                continue
            condition = _failure(em, plan, guards[index], index)
            em.lines.append(f"{_INDENT}if {condition}:")
            em.lines.append(f"{_INDENT}    return {fail}[{index}]")
    em.lines += [f"{_INDENT}pass", "        except Exception:", f"{_INDENT}{locate}"]
    lines = em.lines
    em.lines = []
    return lines


def _emit_gate(
    em: Emitter,
    plan: _Plan,
    guards: list[Guard],
    gate: tuple[Source | Defaults, list[int]],
    tags: str,
    slot: int,
    fail: str,
) -> None:
    """The checks of one dict's guards, run when its tag is not the one they last passed
    with. The values they look at are read before the block, on every call: the entry's
    result and the writes it replays read them too, and must see them as they were before
    the graph ran (a replayed write may change them); anything else first read inside the
    block is read again by later lines."""
    container, indices = gate
    tag = em.temp()  # (names the block for the markers, too)
    first_read = len(em.lines)
    for index in indices:
        source = guards[index].source
        if not isinstance(source, ContainsSource):
            em.source(source, _INDENT)  # type: ignore[arg-type]
    # (a read no later line uses is moved into the block when the entry is built)
    em.lines[first_read:] = [f"{line}{READ_FOR}{tag}" for line in em.lines[first_read:]]
    if isinstance(container, Defaults):
        traced = plan.identity[container.of].__defaults__
        defaults = em.source(AttrSource(container.of, "__defaults__"), _INDENT)
        em.lines.append(f"{_INDENT}if {defaults} is not {em.const(traced)}:{GATE}{tag}")
    else:
        table = "G" if container is FRAME_GLOBALS else em.source(container, _INDENT)
        em.lines.append(f"{_INDENT}{tag} = {em.const(dict_version)}({table})")
        em.lines.append(f"{_INDENT}if {tag} != {tags}[{slot}]:{GATE}{tag}")
    known = em.reads()
    start = len(em.lines)
    for index in indices:
        condition = _failure(em, plan, guards[index], index)
        em.lines.append(f"{_INDENT}if {condition}:")
        em.lines.append(f"{_INDENT}    return {fail}[{index}]")
    em.lines[start:] = ["    " + line for line in em.lines[start:]]
    if not isinstance(container, Defaults):
        em.lines.append(f"{_INDENT}    {tags}[{slot}] = {tag}")
    em.forget_reads_since(known)


def _emit_batch(
    em: Emitter,
    batch: list[Guard],
    indices: list[int],
    examples: dict[Source, torch.Tensor],
    fail: str,
    locate: str,
) -> None:
    if not batch:
        return
    checker = _batch_tensor_checker([examples[g.source] for g in batch])  # type: ignore[index]
    if checker is None:
        for index, guard in zip(indices, batch):
            em.lines.append(f"{_INDENT}if not ({guard_check(em, guard, _INDENT)}):")
            em.lines.append(f"{_INDENT}    return {fail}[{index}]")
        return
    values = ", ".join(em.source(g.source, _INDENT) for g in batch)  # type: ignore[arg-type]
    em.lines.append(f"{_INDENT}if not {em.const(checker)}.check({values}):")
    em.lines.append(f"{_INDENT}    {locate}")


def _emit_distinct_ids(
    em: Emitter,
    plan: _Plan,
    guard: Guard,
    index: int,
    examples: dict[Source, torch.Tensor],
    fail: str,
) -> bool:
    """The no-aliasing check of the tensor inputs, with a fast path for module tensors.

    Parameters and buffers are usually the very objects traced: when each is the tensor its
    weak reference from the trace gives (those were pairwise distinct), they are pairwise
    distinct, and only the other inputs need checking (against each other and against the
    traced addresses). Otherwise every input is checked, as the guard says. Returns False where the
    generic check applies.
    """
    source = guard.source
    if not (
        isinstance(source, DistinctIdsSource)
        and guard.kind is GuardKind.CONSTANT_MATCH
        and guard.expected == len(source.sources)
        and all(s in examples for s in source.sources)
    ):
        return False
    fixed = [s for s in source.sources if read_from(s, plan.modules)]
    if len(fixed) < 2:
        return False
    fixed_set = set(fixed)
    free = [s for s in source.sources if s not in fixed_set]
    traced = tuple(id(examples[s]) for s in fixed)
    if len(set(traced)) != len(traced):
        return False
    refs = tuple(weakref.ref(examples[s]) for s in fixed)
    values = [em.source(s, _INDENT) for s in source.sources]
    fixed_values = ", ".join(em.source(s, _INDENT) for s in fixed)
    every = ", ".join(f"_address({v})" for v in values)
    # each fixed tensor is the very one traced (a dead one's reference gives None): compared
    # in C through the weak references, with no ``id()`` per tensor (an audit event each)
    is_same, call = em.const(operator.is_), em.const(operator.call)
    em.lines.append(
        f"{_INDENT}if not all(map({is_same}, ({fixed_values},), map({call}, {em.const(refs)}))):"
    )
    em.lines.append(f"{_INDENT}    if len({{{every}}}) != {len(values)}:")
    em.lines.append(f"{_INDENT}        return {fail}[{index}]")
    if free:
        known = em.const(frozenset(address(examples[s]) for s in fixed))
        free_values = [em.source(s, _INDENT) for s in free]
        tests = [f"_address({v}) in {known}" for v in free_values]
        if len(free_values) > 1:
            ids = ", ".join(f"_address({v})" for v in free_values)
            tests.append(f"len({{{ids}}}) != {len(free_values)}")
        em.lines.append(f"{_INDENT}elif {' or '.join(tests)}:")
        em.lines.append(f"{_INDENT}    return {fail}[{index}]")
    return True


def _failure(em: Emitter, plan: _Plan, guard: Guard, index: int) -> str:
    """A condition true exactly when ``guard`` fails (given the guards emitted earlier)."""
    kind, source, expected = guard.kind, guard.source, guard.expected
    if source is None:
        return f"not ({guard_check(em, guard, _INDENT)})"
    if (
        kind is GuardKind.CONSTANT_MATCH
        and isinstance(expected, bool)
        and isinstance(source, _BOOL_SOURCES)
    ):
        truth = _truth(em, plan, source)
        return truth if expected is False else f"not {truth}"
    if kind is GuardKind.ID_MATCH and source in plan.dict_modules:
        value = em.source(source, _INDENT)
        held = em.held.get(expected)  # type: ignore[call-overload]
        if isinstance(held, WeakHandle):  # (a module the entry must not keep alive)
            em.weak_targets.append(held)
            module = f"{em.const(held.ref)}()"
        else:
            module = em.const(plan.modules[source])
        cls = em.const(plan.dict_modules[source])
        return f"{value} is not {module} or type({value}) is not {cls}"
    if kind is GuardKind.TYPE_MATCH:
        return f"type({em.source(source, _INDENT)}) is not {em.const(expected)}"
    if kind is GuardKind.ALIAS_MATCH and isinstance(expected, Source):
        return f"{em.source(source, _INDENT)} is not {em.source(expected, _INDENT)}"
    if (
        kind is GuardKind.CONSTANT_MATCH
        and isinstance(source, DistinctIdsSource)
        and expected == len(source.sources) <= 3
    ):
        # two or three objects told apart by `is`, without building a set of their ids
        values = [em.source(s, _INDENT) for s in source.sources]
        pairs = [(a, b) for i, a in enumerate(values) for b in values[i + 1 :]]
        return " or ".join(f"{a} is {b}" for a, b in pairs)
    if kind is GuardKind.CONSTANT_MATCH:
        value = em.source(source, _INDENT)
        if expected is None or isinstance(expected, bool):
            return f"{value} is not {em.const(expected)}"
        if type(expected) is float and expected == expected and expected != 0.0:
            # exact for every float but zeros (signed) and nan: those compare bit-wise below
            return f"type({value}) is not {em.const(float)} or {value} != {em.const(expected)}"
        if type(expected) is float and expected == 0.0:
            # a zero (a dropout's p): equal, and of the expected sign, without a call to
            # ``_same_constant`` per check
            sign = em.const(math.copysign(1.0, expected))
            return (
                f"type({value}) is not {em.const(float)} or {value} != 0.0 or "
                f"{em.const(math.copysign)}(1.0, {value}) != {sign}"
            )
        if _has_float(expected):
            return f"not _same_constant({value}, {em.const(expected)})"
        if index in plan.exact:
            kind_name = em.const(type(expected))
            return f"type({value}) is not {kind_name} or {value} != {em.const(expected)}"
        return f"not ({value} == {em.const(expected)})"
    return f"not ({guard_check(em, guard, _INDENT)})"


def _truth(em: Emitter, plan: _Plan, source: Source) -> str:
    """An expression truthy exactly when the bool-valued ``source`` is ``True``."""
    base = source.base
    if isinstance(source, ModuleHooksSource) and base is not None:
        names = em.instance_attrs.get(base)
        if names is not None and names.issuperset(HOOK_ATTRS):
            inst = em.source(AttrSource(base, "__dict__"), _INDENT)
            return "(" + " or ".join(f"{inst}[{em.const(n)}]" for n in HOOK_ATTRS) + ")"
    return em._expression(source, _INDENT)
