"""Which sizes a trace makes symbolic: per-tensor marks, ``compile(dynamic=...)``, and the
automatic policy applied on a cache miss.

The policy, as users of ``torch.compile`` know it:

* ``dynamic=None`` (the default): the first trace is static. On a later miss, every cache
  entry of the code whose guards fail *only on sizes* is compared with the call: the dims
  (and int arguments) that differ, plus those already symbolic in that entry, are traced
  symbolically. Usually that is one extra compile, after which the sizes vary freely.
* ``dynamic=True``: every dim of every eligible tensor, and every eligible int, is symbolic
  from the first trace. ``dynamic=False``: never (the automatic policy is off).
* :func:`mark_dynamic` / :func:`mark_static` (stored on the tensor object) override the
  above per dim, whatever ``dynamic`` says.

Eligible inputs are those reached from the call's arguments through items only (arguments,
and items of the lists, tuples and dicts among them). Module state (parameters, buffers,
ints stored on modules or objects) stays static: it does not change between calls, and a
symbolic hyper-parameter would only cost guards.

Invariants:

* A plan only ever makes more things symbolic than the static trace would; the ShapeEnv
  still specialises what the code needs concrete (0/1 sizes, ``range(n)``, ...) with guards,
  so a plan can never make an entry unsound, only more general.
* "Fails only on sizes" is decided by generated code (a *probe* per cache entry, built once
  with :mod:`._codegen`): the entry's guards with tensor sizes/strides, int argument values
  and ShapeEnv guards left out. The probe returns the tensors and ints to compare.
"""

from __future__ import annotations

import dataclasses
import types
import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch

from sapwood_graph import Guard, GuardKind, ItemSource, LocalSource, Source, TensorSpec

from ..guards.emitter import Emitter, Miss, emit_guards

if TYPE_CHECKING:
    from .capture import CacheEntry

__all__ = ["ShapePlan", "mark_dynamic", "mark_static", "plan_after_miss"]

_DYNAMIC_ATTR = "_sapwood_dynamic_dims"
_STATIC_ATTR = "_sapwood_static_dims"
#: what ``torch._dynamo.mark_dynamic`` stores: honoured too, so marked inputs carry over
_TORCH_DYNAMIC_ATTR = "_dynamo_dynamic_indices"


def _dims(tensor: torch.Tensor, dim: int | Iterable[int], what: str) -> set[int]:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} takes a tensor, not {type(tensor).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    ndim = tensor.dim()
    out = set()
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"{what}: dims are ints, not {type(d).__name__}")
        if not -ndim <= d < ndim:
            raise IndexError(f"{what}: dim {d} is out of range for a {ndim}-d tensor")
        out.add(d % ndim)
    return out


def mark_dynamic(tensor: torch.Tensor, dim: int | Iterable[int]) -> None:
    """Trace ``dim`` (an int or several) of ``tensor`` symbolically whenever it is an input.

    The mark is stored on the tensor object and read when a call traces. A size of 0 or 1
    is still specialised (as torch's ShapeEnv does); use sizes >= 2 for the first call.
    """
    dims = _dims(tensor, dim, "mark_dynamic")
    current = set(getattr(tensor, _DYNAMIC_ATTR, ()))
    setattr(tensor, _DYNAMIC_ATTR, frozenset(current | dims))
    static = set(getattr(tensor, _STATIC_ATTR, ())) - dims
    setattr(tensor, _STATIC_ATTR, frozenset(static))


def mark_static(tensor: torch.Tensor, dim: int | Iterable[int]) -> None:
    """Keep ``dim`` of ``tensor`` static (its size guarded exactly), even with
    ``compile(dynamic=True)`` or after sizes varied."""
    dims = _dims(tensor, dim, "mark_static")
    current = set(getattr(tensor, _STATIC_ATTR, ()))
    setattr(tensor, _STATIC_ATTR, frozenset(current | dims))
    dynamic = set(getattr(tensor, _DYNAMIC_ATTR, ())) - dims
    setattr(tensor, _DYNAMIC_ATTR, frozenset(dynamic))


def _marked(tensor: torch.Tensor, attr: str) -> set[int]:
    ndim = tensor.dim()
    return {d % ndim for d in getattr(tensor, attr, ()) if ndim and -ndim <= d < ndim}


def is_argument_source(source: Source) -> bool:
    """Reached from the call's arguments through items only (``L['x']``, ``L['xs'][0]``)."""
    while isinstance(source, ItemSource):
        source = source.base  # type: ignore[assignment]
    return isinstance(source, LocalSource)


@dataclasses.dataclass(frozen=True)
class ShapePlan:
    """What one trace makes symbolic (read by the graph bridge and the builder)."""

    #: ``compile(dynamic=...)``.
    mode: bool | None = None
    #: Dims seen to vary, per tensor source (the automatic policy).
    dims: Mapping[Source, frozenset[int]] = dataclasses.field(default_factory=dict)
    #: Int sources seen to vary (the automatic policy).
    ints: frozenset[Source] = frozenset()

    def tensor_dims(self, source: Source, tensor: torch.Tensor) -> frozenset[int]:
        ndim = tensor.dim()
        if ndim == 0:
            return frozenset()
        dims: set[int] = set()
        if is_argument_source(source) and not isinstance(tensor, torch.nn.Parameter):
            if self.mode is True:
                dims = set(range(ndim))
            elif self.mode is None:
                dims = set(self.dims.get(source, ()))
        dims |= _marked(tensor, _DYNAMIC_ATTR) | _marked(tensor, _TORCH_DYNAMIC_ATTR)
        dims -= _marked(tensor, _STATIC_ATTR)
        return frozenset(d for d in dims if d < ndim)

    def int_is_symbolic(self, source: Source) -> bool:
        if not is_argument_source(source):
            return False
        return self.mode is True or (self.mode is None and source in self.ints)


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
