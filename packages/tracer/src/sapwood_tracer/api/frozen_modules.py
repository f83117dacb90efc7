"""``guards="inputs"``: the opt-in for serving a model declared frozen.

By default an entry checks, on every call, everything the trace relied on, the module tree
included: each submodule's class, hooks and attributes, each parameter's and buffer's
object, dtype, shape and strides. For a large model that is tens of microseconds per call,
which token-by-token decoding pays at every token.

With ``compile(..., guards="inputs")`` (``sapwood.compile(..., options={"guards":
"inputs"})``) the user declares each ``nn.Module`` passed to the compiled function (``self``
of a compiled module included) frozen for the life of the compile: after the first call,
nothing changes its Python state -- no attribute, submodule, parameter or buffer is set,
added or deleted, no hook is added or removed, no parameter or buffer changes its dtype,
shape, strides, device or ``requires_grad`` (``.data =``, ``resize_``,
``requires_grad_``). Tensor *values* may change in place (``copy_`` of new weights, a
static cache written by the graph). An entry then checks instead:

* that the module passed is the very object it was traced with (an identity check; the
  entry dies with the module);
* every argument that is not a module, global and torch state, class attributes (a method
  patched on the class) and torch's global module hooks, as always.

Its parameters and buffers are passed to the graph as the objects found when tracing. A
change the declaration excludes is not seen: the compiled code goes on with the module as
it was traced. Not applied, with the reason in ``explain()`` and the entry
(:attr:`~sapwood_tracer.api.cache.CacheEntry.guard_mode`), where the trace itself changes
the module's Python state (the next call would depend on it), or where the function has a
graph break.
"""

from __future__ import annotations

from typing import Any

import torch

from sapwood_graph import Guard, GuardKind, Source

from ..guards.sources import DistinctIdsSource, WeakHandle, read_from

__all__ = ["GUARD_MODES", "freeze_module_guards"]

#: the values of ``compile(guards=...)``
GUARD_MODES = ("all", "inputs")


def _within(source: Source | None, roots: dict[Source, Any]) -> bool:
    """Whether ``source`` is one of ``roots`` or is read from one."""
    return source is not None and (source in roots or read_from(source, roots))


def freeze_module_guards(
    params: list[tuple[str, Source]],
    args: tuple[Any, ...],
    guards: list[Guard],
    writes: list[Any],
    effects: Any,
    held: dict[int, Any],
) -> tuple[list[Guard], dict[Source, Any] | None, str]:
    """The guards of an entry whose module arguments are declared frozen, the roots (each
    module argument's source and the module), and the entry's guard mode in words; or the
    guards unchanged, None, and why the declaration was not applied."""
    roots = {
        source: arg for (_, source), arg in zip(params, args) if isinstance(arg, torch.nn.Module)
    }
    if not roots:
        return guards, None, "all (guards='inputs' asked, but no argument is an nn.Module)"
    changed = [w for w in writes if _within(w.source, roots)]
    changed += [c for c in effects.containers.values() if _within(c.source, roots)]
    changed += [t for t, _, _ in effects.set_ops if _within(t.source, roots)]
    changed += [s for s in effects.object_states.values() if _within(s.source, roots)]
    if changed:
        return (
            guards,
            None,
            (
                "all (guards='inputs' asked, but the function changes the module's Python state, "
                "which the next call would read)"
            ),
        )
    kept: list[Guard] = []
    for guard in guards:
        if isinstance(guard.source, DistinctIdsSource) or guard.kind is GuardKind.SHAPE:
            kept.append(guard)  # (arguments against parameters: still checked)
            continue
        inside = _within(guard.source, roots)
        if guard.kind is GuardKind.ALIAS_MATCH and isinstance(guard.expected, Source):
            inside = inside and _within(guard.expected, roots)
        if not inside:
            kept.append(guard)
    for source, module in roots.items():
        held[id(module)] = WeakHandle(module)  # (the entry dies with the module)
        kept.insert(0, Guard(GuardKind.ID_MATCH, source, id(module)))
    names = ", ".join(str(s) for s in roots)
    return kept, roots, f"inputs (the module {names} declared frozen: identity checked only)"
