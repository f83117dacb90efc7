"""The recompile policy of dynamic shapes: which sizes the next trace makes symbolic after a
cache miss (a :class:`~sapwood_tracer.interpreter.shape_plan.ShapePlan`).

The policy, as users of ``torch.compile`` know it:

* ``dynamic=None`` (the default): the first trace is static. On a later miss, every cache
  entry of the code whose guards fail *only on sizes* is compared with the call: the dims
  (and int arguments) that differ, plus those already symbolic in that entry, are traced
  symbolically. Usually that is one extra compile, after which the sizes vary freely.
* ``dynamic=True``: every dim of every eligible tensor, and every eligible int, is symbolic
  from the first trace. ``dynamic=False``: never (the automatic policy is off).
* :func:`mark_dynamic` / :func:`mark_static` (stored on the tensor object) override the
  above per dim, whatever ``dynamic`` says.

Which inputs are eligible, and why a plan is always sound, is said in
:mod:`~sapwood_tracer.interpreter.shape_plan`.

Invariant: "fails only on sizes" is decided by generated code (a *probe* per cache entry, built once
  with :mod:`sapwood_tracer.guards.emitter`): the entry's guards with tensor sizes/strides, int argument values
  and ShapeEnv guards left out. The probe returns the tensors and ints to compare.
"""

from __future__ import annotations

import dataclasses
import types
import weakref
from typing import TYPE_CHECKING, Any

from sapwood_graph import Guard, GuardKind, Source, TensorSpec

from ..guards.emitter import Emitter, Miss
from ..guards.fast_path import emit_guards
from ..interpreter.shape_plan import ShapePlan, is_argument_source

if TYPE_CHECKING:
    from .cache import CacheEntry

__all__ = ["plan_after_miss"]

# ----------------------------------------------------------------------- the miss policy


@dataclasses.dataclass(frozen=True)
class _Site:
    """A size-bearing input of an entry: a tensor (its spec) or an int (its value, or
    ``None`` where the entry already has it symbolic)."""

    source: Source
    spec: TensorSpec | None
    value: int | None


@dataclasses.dataclass(frozen=True, eq=False)
class _Probe:
    fn: Any
    sites: tuple[_Site, ...]


_probes: weakref.WeakKeyDictionary[CacheEntry, _Probe] = weakref.WeakKeyDictionary()


def plan_after_miss(
    code: types.CodeType,
    entries: list[CacheEntry],
    args: tuple[Any, ...],
    closure: tuple[types.CellType, ...],
    f_globals: dict[str, Any],
    mode: bool | None,
) -> ShapePlan:
    """The plan for tracing a call that matched none of ``entries``."""
    if mode is not None:
        return ShapePlan(mode)
    dims: dict[Source, set[int]] = {}
    ints: set[Source] = set()
    for entry in entries:
        probe = _probes.get(entry)
        if probe is None:
            probe = _probes[entry] = _build_probe(code, entry)
        if probe.fn is None:
            continue
        try:
            values = probe.fn(args, closure, f_globals)
        except Exception:  # reading a site failed: not a sizes-only difference
            continue
        if type(values) is Miss:
            continue  # it differs in more than sizes
        for site, value in zip(probe.sites, values):
            if site.spec is not None:
                varying = {
                    d
                    for d, size in enumerate(site.spec.shape)
                    if size is None or size != value.size(d)
                }
                if varying:
                    dims.setdefault(site.source, set()).update(varying)
            elif site.value is None or site.value != value:
                ints.add(site.source)
    return ShapePlan(None, {s: frozenset(d) for s, d in dims.items()}, frozenset(ints))


def _is_int_constant(guard: Guard) -> bool:
    return (
        guard.kind is GuardKind.CONSTANT_MATCH
        and type(guard.expected) is int
        and guard.source is not None
        and is_argument_source(guard.source)
    )


def _build_probe(code: types.CodeType, entry: CacheEntry) -> _Probe:
    """Generated code: ``entry``'s guards without sizes; returns the sites' values or a Miss."""
    constant_ints = {g.source for g in entry.guards if _is_int_constant(g)}
    relaxed: list[Guard] = []
    sites: list[_Site] = []
    for guard in entry.guards:
        source = guard.source
        if guard.kind is GuardKind.SHAPE:
            continue
        if _is_int_constant(guard):
            assert source is not None
            sites.append(_Site(source, None, int(guard.expected)))  # type: ignore[call-overload]
            continue
        if source is not None and is_argument_source(source):
            if guard.kind is GuardKind.TENSOR_MATCH and isinstance(guard.expected, TensorSpec):
                spec = guard.expected
                free = dataclasses.replace(
                    spec, shape=(None,) * len(spec.shape), stride=(None,) * len(spec.stride)
                )
                relaxed.append(Guard(guard.kind, source, free))
                sites.append(_Site(source, spec, None))
                continue
            if (
                guard.kind is GuardKind.TYPE_MATCH
                and guard.expected is int
                and source not in constant_ints
            ):
                sites.append(_Site(source, None, None))  # an int the entry has symbolic
        relaxed.append(guard)
    if not sites:
        return _Probe(None, ())
    em = Emitter(code, entry.held)
    misses = em.const(tuple(Miss(i) for i in range(max(len(relaxed), 1))))
    try:
        guard_lines = emit_guards(em, relaxed, {}, misses)
    except Exception:  # a guard the probe cannot express: this entry never counts as sizes-only
        return _Probe(None, ())
    em.lines = ["    g = 0", "    try:", *guard_lines, "        pass", "    except Exception:"]
    em.lines.append(f"        return {misses}[g]")
    values = [em.source(site.source, "    ") for site in sites]
    em.lines.append(f"    return ({', '.join(values)},)")
    return _Probe(em.build("sapwood_size_probe", list(em.lines)), tuple(sites))
