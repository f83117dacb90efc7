"""Distinctness of the inputs a trace relied on: the guard that two sources which held two
objects while tracing still hold two.

The builder makes one value per object of the inputs, however many sources reach it (an
alias guard ties the later sources to the first), so a trace made while two sources held
one object is right for every call where they still do. The converse is this module's: a
trace made while they held two objects may depend on that, and is reused only where they
still do. What it can depend on:

* a mutation: the trace changed one object (a list's items, a dict's entries, a set's
  members, an object's or module's attribute) and read the other, whose guarded contents or
  later reads would be those of the one changed where both are one;
* a key by identity: two objects of a class that hashes by identity were two dict keys or
  set members, one where both are one;
* ``is`` (and ``==`` or ``in`` that fall back to it) between two of them: guarded where it is
  answered, pairwise (:func:`~sapwood_tracer.values.identity.guard_distinct`).

Objects of two classes are never one object, and each input's class is guarded exactly, so
only inputs of one class need telling apart. For each class whose objects the trace mutated
or keyed by identity, the inputs of that class the trace read are guarded pairwise distinct
in one check, ``len({id(a), id(b), ...}) == n``. A class nothing was done to adds no guard:
a module tree the trace reads and does not change (parameters, buffers and submodules; the
tensors have their own no-aliasing guard) costs nothing.
"""

from __future__ import annotations

from typing import Any

from sapwood_graph import AttrSource, Guard, GuardKind, Source

from ..errors import Unsupported
from ..guards.sources import DistinctIdsSource, InstanceDictSource
from ..values.base import Value
from ..values.objects import ObjectValue
from .builder import SHARED_VALUES
from .side_effects import SideEffects

__all__ = ["distinctness_guards"]


def distinctness_guards(
    by_object: dict[int, tuple[Any, Value]],
    object_of: dict[int, Any],
    side_effects: SideEffects,
    keyed_types: set[type],
) -> list[Guard]:
    """One guard per class of inputs whose identity the trace relied on (see the module
    docstring); ``by_object`` is the session's table of the values made per object."""
    classes = set(keyed_types)
    changed: list[Any] = [_object(v, object_of) for v in side_effects.containers.values()]
    changed += [_object(target, object_of) for target, _, _ in side_effects.set_ops]
    changed += [write.obj for write in side_effects.writes]
    classes.update(type(obj) for obj in changed if obj is not None)
    # An attribute write changes the object's ``__dict__``, and a dict from the inputs may be
    # that very dict (``vars(obj)`` passed in beside ``obj``): where the trace wrote an
    # attribute or changed a dict, the ``__dict__``s of the objects it wrote, and of the
    # plain objects it read, join the dicts it read. (Not those of modules only read: a dict
    # passed in that is a module's ``__dict__``, changed by the trace while it reads the
    # module's attributes, is not told apart.)
    written = {id(write.obj) for write in side_effects.writes if _has_instance_dict(write.obj)}
    if written:
        classes.add(dict)
    if not classes:
        return []
    groups: dict[type, list[Source]] = {}
    for obj, value in by_object.values():
        cls = type(obj)
        if cls in classes and value.source is not None and isinstance(value, SHARED_VALUES):
            groups.setdefault(cls, []).append(value.source)
    if dict in classes:
        for obj, value in by_object.values():
            if (
                value.source is not None
                and (id(obj) in written or isinstance(value, ObjectValue))
                and _has_instance_dict(obj)
            ):
                # (past a class's own __getattribute__, which must not run here)
                hooked = type(obj).__getattribute__ is not object.__getattribute__
                attributes = object.__getattribute__(obj, "__dict__") if hooked else vars(obj)
                known = by_object.get(id(attributes))
                if known is not None and known[0] is attributes:
                    # the trace took the two for two objects: it cannot stand
                    raise Unsupported(
                        f"a dict that is the __dict__ of {value.describe()}, also passed in, "
                        "changed through one of the two"
                    )
                groups.setdefault(dict, []).append(
                    InstanceDictSource(value.source)
                    if hooked
                    else AttrSource(value.source, "__dict__")
                )
    return [
        Guard(GuardKind.CONSTANT_MATCH, DistinctIdsSource(tuple(sources)), len(sources))
        for sources in groups.values()
        if len(sources) > 1
    ]


def _object(value: Value, object_of: dict[int, Any]) -> Any:
    obj = getattr(value, "obj", None)
    return obj if obj is not None else object_of.get(id(value))


def _has_instance_dict(obj: Any) -> bool:
    return bool(getattr(type(obj), "__dictoffset__", 0))
