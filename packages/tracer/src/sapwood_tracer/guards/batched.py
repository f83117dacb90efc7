"""Guards on the items of one dict, checked together with one read of the dict.

A model with many submodules records, per module, a dozen guards that each read one item
of one dict: the module's instance dict (its hook dicts empty, ``stride == (1, 1)``,
``eps == 1e-05``, ``training is False``), its ``_modules`` registry (each child the traced
object) or its ``_parameters`` (``bias is None``). :mod:`.fast_path` would emit each as its
own ``if`` with its own subscript, ``type()`` call and comparison; here the guards reading
``D[key]`` for the same dict ``D`` become one :class:`DictBatch`, emitted as::

    v1, v2, v3, v4, v5, v6 = k_items(D)           # operator.itemgetter(*keys)
    if v1 or v2 or v3 or v4 or v5 is not k_stride or v6 is not k_child or type(v6) is not k_cls:
        <the members' own checks, one by one>

Invariants:

* **Passing the batch implies passing every member.** A hook dict is tested for truth, as
  its own check does. Every other value must be a given object, by identity: the object a
  guard names (a child module, a function, ``None``, a bool), or for a constant the very
  object the module held at trace time, which can only be found again if it still is
  there, and an object of an immutable type equal to the constant (its type and value
  were checked when the batch was planned) stays so. Where the object's class could be
  reassigned, the class is checked too.
* **Failing the batch decides nothing by itself.** A batch is stricter than its members
  (an attribute set again to an equal but new tuple fails it; so does a module's class
  reassigned where only its identity was guarded), so a failed batch runs the members' own
  checks, which return the first failing guard's ``Miss`` or fall through when all pass.
* **A batch runs where its first member ran.** Every member reads ``D[key]``, so every
  member's prefix is ``D``'s, already checked there; the other members only move earlier.
* A missing key raises in ``itemgetter``, as the member's own subscript would: the entry's
  exception handler asks the locator for the guard.
"""

from __future__ import annotations

import operator
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sapwood_graph import AttrSource, Guard, GuardKind, ItemSource, Source

from .emitter import Emitter, _same_constant
from .sources import HOOK_ATTRS, ModuleHooksSource

__all__ = ["DictBatch", "plan_dict_batches"]

#: Py_TPFLAGS_IMMUTABLETYPE: instances of such a type cannot have ``__class__`` reassigned.
_IMMUTABLE_TYPE = 1 << 8


def _class_is_fixed(obj: Any) -> bool:
    """Whether ``obj``'s class cannot be reassigned (an instance of an immutable type)."""
    return bool(type(obj).__flags__ & _IMMUTABLE_TYPE) and not isinstance(obj, types.ModuleType)


@dataclass(frozen=True)
class _Item:
    """One value of the batch: ``D[key]`` must be falsy (``obj`` is None and ``falsy``), or
    be ``obj`` itself (and, where ``cls`` is set, still of the class ``cls``)."""

    key: Any
    obj: Any = None
    cls: type | None = None
    falsy: bool = False


@dataclass
class DictBatch:
    """The member guards of one dict ``D``: the values to read and what each must be."""

    dict_source: Source
    #: guard indices, in the order their own checks run on a failed batch
    members: list[int] = field(default_factory=list)
    items: list[_Item] = field(default_factory=list)

    def emit(self, em: Emitter, indent: str, individual: Callable[[int], None]) -> None:
        """Append the batch's lines to ``em``; ``individual(index)`` appends a member's own
        check, one level deeper."""
        base = em.source(self.dict_source, indent)
        getter = em.const(operator.itemgetter(*(item.key for item in self.items)))
        names = [em.local() for _ in self.items]
        em.lines.append(f"{indent}{', '.join(names)} = {getter}({base})")
        tests = []
        for name, item in zip(names, self.items):
            if item.falsy:
                tests.append(name)
                continue
            tests.append(f"{name} is not {em.const(item.obj)}")
            if item.cls is not None:
                tests.append(f"type({name}) is not {em.const(item.cls)}")
        em.lines.append(f"{indent}if {' or '.join(tests)}:")
        # the members' own reads stay inside the branch: no later line may use a local that
        # only a failed batch assigned
        known = dict(em._by_source)
        for index in self.members:
            individual(index)
        em._by_source = known


def _traced_constant(value: Any, expected: Any) -> bool:
    """Whether ``value`` (the object read at trace time) passes a constant guard on
    ``expected``, so that finding that very object again passes it too."""
    if type(value) is not type(expected):
        return False
    if isinstance(value, (int, str, bytes, float, complex, type(None))):
        return bool(_same_constant(value, expected))
    if type(value) is tuple:
        return all(_traced_constant(v, e) for v, e in zip(value, expected)) and len(value) == len(
            expected
        )
    return False


def _dict_item(em: Emitter, source: Source) -> tuple[Source, Any] | None:
    """``(D, key)`` where the emitter reads ``source`` as ``D[key]``, else ``None``."""
    if isinstance(source, ItemSource) and source.base is not None:
        return source.base, source.index
    if isinstance(source, AttrSource) and source.attr != "__dict__" and source.base is not None:
        readable = em.instance_attrs.get(source.base)
        store = em.member_stores.get(source)
        if readable is None or (store or source.attr) not in readable:
            return None
        return AttrSource(source.base, store or "__dict__"), source.attr
    return None


def _items(
    em: Emitter, guard: Guard, implied: set[int], index: int, modules: dict[Source, Any]
) -> tuple[Source, list[_Item]] | None:
    """The dict a guard reads and its values in a batch, or ``None`` where it stays alone."""
    source, expected = guard.source, guard.expected
    if source is None or index in implied:
        return None
    if isinstance(source, ModuleHooksSource):
        module = modules.get(source.base) if source.base is not None else None
        names = em.instance_attrs.get(source.base) if source.base is not None else None
        if expected is not False or module is None or names is None:
            return None
        if not names.issuperset(HOOK_ATTRS):
            return None
        return AttrSource(source.base, "__dict__"), [  # type: ignore[arg-type]
            _Item(name, falsy=True) for name in HOOK_ATTRS
        ]
    place = _dict_item(em, source)
    if place is None:
        return None
    dict_source, key = place
    if guard.kind is GuardKind.ID_MATCH:
        if expected not in em.held:
            return None
        obj = em.held[expected]  # type: ignore[index]
        fixed = _class_is_fixed(obj)
        return dict_source, [_Item(key, obj, None if fixed else type(obj))]
    if guard.kind is not GuardKind.CONSTANT_MATCH:
        return None
    if expected is None or type(expected) is bool:
        return dict_source, [_Item(key, expected)]
    # a constant of a module attribute: the object the module held at trace time
    owner = dict_source.base if isinstance(dict_source, AttrSource) else None
    module = modules.get(owner) if owner is not None else None
    if module is None or getattr(dict_source, "attr", None) != "__dict__":
        return None
    traced = module.__dict__.get(key, _MISSING)
    if not _traced_constant(traced, expected):
        return None
    return dict_source, [_Item(key, traced)]


_MISSING = object()


def plan_dict_batches(
    em: Emitter,
    guards: list[Guard],
    step: list[int],
    implied: set[int],
    modules: dict[Source, Any],
) -> tuple[dict[int, DictBatch], set[int]]:
    """The batches of one run of guards (``modules``: module sources and the traced modules):
    by the index of each batch's first member, and the indices a batch checks (skipped where
    they come)."""
    batches: dict[Source, DictBatch] = {}
    first: dict[Source, int] = {}
    for index in step:
        found = _items(em, guards[index], implied, index, modules)
        if found is None:
            continue
        dict_source, items = found
        batch = batches.setdefault(dict_source, DictBatch(dict_source))
        first.setdefault(dict_source, index)
        batch.members.append(index)
        batch.items.extend(items)
    by_first: dict[int, DictBatch] = {}
    absorbed: set[int] = set()
    for dict_source, batch in batches.items():
        if len(batch.items) < 2:  # itemgetter of one key returns the item, not a tuple
            continue
        by_first[first[dict_source]] = batch
        absorbed.update(batch.members)
    return by_first, absorbed
