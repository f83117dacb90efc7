"""Skipping the checks on a dict while the dict has not changed.

CPython gives every dict a version tag, a number taken from one interpreter-wide counter when
the dict is made and again on each change of its contents, so two dicts never share one and a
dict's tag is the same exactly when its contents are. torch exposes the tag as
``torch._C._dynamo.guards.dict_version``.

Most guards on a module are about entries of its ``__dict__``: a constant attribute
(``eps == 1e-05``, ``training is False``), a function stored on the instance by identity,
``'forward' not in __dict__``. Each of those is a pure function of the dict's contents, as
long as the value it looks at cannot change without the dict changing: a constant of an
immutable type, an object compared by identity, the presence of a key. The fast path groups
such guards by the dict they read, checks them when the dict's tag differs from the tag of
the last call that passed them, and otherwise skips them: one call instead of several checks.

The same holds for a module's globals (the builtins a name must not shadow, the functions
the trace inlined, by identity), and, with the tuple's identity for the tag, for the
defaults of a function guarded by identity: the entry holds the traced ``__defaults__``
tuple, so while the function's is that very tuple, its items are the ones traced.

Where the tag does not follow every change this is unsound, so it is used only where a probe
at import time shows that it does. On CPython 3.13 an instance's attributes stay in the
object (inline values) even once its ``__dict__`` exists, and storing one does not change the
dict's tag: the probe of instance dicts fails there, and the guards on a module's attributes
are checked on every call as before (those on plain dicts, such as a module's globals, are
still grouped).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any

from sapwood_graph import (
    AttrSource,
    DefaultArgSource,
    GlobalSource,
    Guard,
    GuardKind,
    ItemSource,
    Source,
)

from .emitter import Emitter
from .sources import ContainsSource, HeldObjectSource

__all__ = [
    "FRAME_GLOBALS",
    "Defaults",
    "dict_version",
    "gateable",
    "instance_dicts_tagged",
    "plan_gates",
]


class _Probe:
    pass


def _store(obj: _Probe, value: int) -> None:
    obj.value = value  # (a plain STORE_ATTR, which the interpreter specialises when warm)


def _tags_follow(version: Callable[[Any], int], table: dict[str, Any], writes: Any) -> bool:
    """Whether each of ``writes`` (called warm enough for the interpreter's specialised
    stores) changes the tag of ``table``."""
    for write in writes:
        for i in range(64):
            before = version(table)
            write(i)
            if version(table) == before:
                return False
    return True


def _probe() -> tuple[Callable[[Any], int] | None, bool]:
    """torch's ``dict_version`` where the tags of plain dicts follow every change and no two
    dicts share one (else ``None``), and whether the tags of instance dicts follow every
    attribute store too."""
    try:
        from torch._C._dynamo.guards import dict_version as version
    except Exception:  # a torch without it
        return None, False
    try:
        plain: dict[str, Any] = {}
        if not _tags_follow(
            version,
            plain,
            (lambda v: plain.__setitem__("value", v), lambda v: plain.update(value=v)),
        ):
            return None, False
        tags = [version({}) for _ in range(8)] + [version(plain), version(_Probe().__dict__)]
        if len(set(tags)) != len(tags):
            return None, False
        obj = _Probe()
        obj.value = -1
        instance = obj.__dict__
        stores = (
            lambda v: _store(obj, v),
            lambda v: setattr(obj, "value", v),
            lambda v: object.__setattr__(obj, "value", v),
            lambda v: instance.__setitem__("value", v),
        )
        return version, _tags_follow(version, instance, stores)
    except Exception:
        return None, False


#: the version tag of a plain dict (``None`` where this interpreter's tags cannot be relied
#: on), and whether an instance dict's tag follows the instance's attribute stores as well
dict_version, instance_dicts_tagged = _probe()

_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: no ``__class__`` assignment
_PRIMITIVES = (type(None), bool, int, float, complex, str, bytes)


def _primitive(value: Any) -> bool:
    """A value that no operation can change (nested tuples of primitives included)."""
    if type(value) in _PRIMITIVES:
        return True
    return type(value) is tuple and all(_primitive(v) for v in value)


def gateable(guard: Guard) -> bool:
    """Whether ``guard``, on a value read from a dict (or on the dict's keys), holds as long
    as the dict's contents are the same."""
    if guard.kind is GuardKind.ID_MATCH:
        return True
    if guard.kind is GuardKind.CONSTANT_MATCH:
        return _primitive(guard.expected)
    if guard.kind is GuardKind.TYPE_MATCH:
        kind = guard.expected
        # (a Python module may switch to a ModuleType subclass: never fixed)
        return (
            isinstance(kind, type)
            and bool(kind.__flags__ & _IMMUTABLE_TYPE)
            and not issubclass(kind, types.ModuleType)
        )
    return False


@dataclasses.dataclass(frozen=True)
class Defaults:
    """The ``__defaults__`` of the function at ``of`` (guarded by identity), as what the
    guards on its defaults read: a tuple, so while it is the very tuple traced (the entry
    holds it, and dies with the function), so are its items."""

    of: Source


#: stands for the compiled function's own globals (``G``) as the dict a guard reads
FRAME_GLOBALS = HeldObjectSource(0, "the function's globals", None)


def _container(em: Emitter, plan: Any, guard: Guard) -> Source | Defaults | None:
    """The dict whose entry, or key, ``guard`` looks at, where the fast path knows it: a
    module's globals (the function's own too), or the dict of a module read through its
    ``__dict__`` (its instance dict, or the registry of its parameters, buffers or
    submodules)."""
    source = guard.source
    if isinstance(source, DefaultArgSource) and isinstance(source.index, int):
        fn = plan.identity.get(source.of)
        defaults = fn.__defaults__ if isinstance(fn, types.FunctionType) else None
        # (held by the entry: only where holding it keeps nothing else alive)
        if defaults is not None and all(_primitive(v) for v in defaults):
            return Defaults(source.of)
        return None
    if dict_version is None:
        return None
    if isinstance(source, GlobalSource):
        return FRAME_GLOBALS
    if isinstance(source, (ContainsSource, ItemSource)):
        of = source.base
        if isinstance(of, HeldObjectSource) and type(of.held) is dict:  # (a module's globals)
            return of
        if (
            isinstance(of, AttrSource)
            and of.attr == "__dict__"
            and of.base in plan.dict_modules
            and isinstance(source, ContainsSource)
            and instance_dicts_tagged
        ):
            return of
        return None
    if not isinstance(source, AttrSource) or source.base not in plan.dict_modules:
        return None
    base = source.base
    names = em.instance_attrs.get(base, frozenset())
    store = em.member_stores.get(source)
    if (store or source.attr) not in names:
        return None
    if store is None:
        return AttrSource(base, "__dict__") if instance_dicts_tagged else None
    table = object.__getattribute__(plan.modules[base], "__dict__").get(store)
    return AttrSource(base, store) if type(table) is dict else None


def plan_gates(
    em: Emitter, plan: Any, guards: list[Guard]
) -> dict[int, tuple[Source | Defaults, list[int]]]:
    """The guards checked only when their dict changed (see :mod:`.versions`), grouped by
    that dict, under the first of them in the order (a dict with one such guard is left
    alone: its tag costs as much as the check)."""
    groups: dict[Source | Defaults, list[int]] = {}
    for step in plan.order:
        if isinstance(step, tuple):
            continue
        for index in step:
            guard = guards[index]
            container = _container(em, plan, guard) if gateable(guard) else None
            if container is not None:
                groups.setdefault(container, []).append(index)
    return {indices[0]: (c, indices) for c, indices in groups.items() if len(indices) > 1}
