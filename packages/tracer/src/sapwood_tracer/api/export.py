"""``export``: a whole-graph capture by sapwood, handed to ``torch.export`` for what comes
after (functionalisation, ATen decomposition, the program's signature).

1. The module's ``forward`` is traced once by sapwood with ``fullgraph`` (nothing runs for
   real): any construct that would be a graph break raises :class:`Unsupported`, naming the
   user's line. Dims that ``dynamic_shapes`` may make dynamic are traced symbolically, so the
   graph holds no size the spec lets vary.
2. ``torch.export.export(..., strict=False)`` then traces the module with its ``forward``
   replaced by a function that reads each graph input from where sapwood found it (the
   call's arguments, the module's parameters and buffers) and runs sapwood's graph: torch.export
   sees the parameters and buffers as its own, and sapwood's graph as the computation.

What torch.export gives follows: the program's signature (parameters, buffers, user inputs
and outputs, buffer mutations such as BatchNorm's running statistics), range constraints,
``ep.module()``, ``torch.export.save``/``load``. Guards on Python state are not part of an
exported program (as with torch.export).

Refused (:class:`Unsupported`): a result that is not made of tensors computed by the graph,
constants, and tuples, lists and dicts of them; a forward that changes Python state (sets an
attribute, a global, changes a list or dict it was given: the program could not do it);
``strict=False`` (that is torch.export's own tracer: call it directly).
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping
from typing import Any

import torch

from sapwood_graph import Guard, GuardKind

from ..errors import Unsupported
from ..interpreter.session import root_sources
from ..interpreter.shape_plan import ShapePlan
from .binding import binder
from .capture import capture
from .entry import _load_torch_compiler_modules

__all__ = ["export"]

_NONE = object()


def export(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None = None,
    *,
    dynamic_shapes: Any = None,
    strict: bool = True,
) -> Any:
    """Capture ``model`` (an ``nn.Module``) with sapwood as one graph and return torch's
    ``ExportedProgram`` of it; ``dynamic_shapes`` is torch.export's spec."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"export takes an nn.Module, not {type(model).__name__}")
    if not isinstance(args, tuple):
        raise TypeError(f"export's args must be a tuple, not {type(args).__name__}")
    if not strict:
        raise NotImplementedError(
            "sapwood.export(strict=False): that is torch.export's own tracer; call "
            "torch.export.export(model, args, strict=False) directly"
        )
    kwargs = dict(kwargs or {})
    _load_torch_compiler_modules()
    bound_forward = model.forward  # (an instance's own forward, if it has one, is followed)
    forward = getattr(bound_forward, "__func__", None)
    if getattr(bound_forward, "__self__", None) is not model or not isinstance(
        forward, types.FunctionType
    ):
        raise TypeError(f"{type(model).__qualname__}.forward is not a Python method")
    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        graphs.append(gm)
        return gm.forward

    bound = binder(forward)((model, *args), kwargs)
    plan = ShapePlan(True) if dynamic_shapes is not None else ShapePlan(False)
    entry = capture(
        forward.__code__,
        forward.__globals__,
        forward.__closure__ or (),
        bound,
        keep,
        fullgraph=True,
        shape_plan=plan,
        describe_result=True,
    )
    if entry.output_tree is None:
        raise Unsupported(
            f"exporting {type(model).__qualname__}.forward, which {entry.output_problem} "
            "(an exported program only computes tensors, constants and containers of them "
            "from its inputs)"
        )
    gm = graphs[-1] if graphs and entry.has_graph else None
    checks = [g for g in entry.guards if g.kind is GuardKind.SHAPE]
    run = _graph_runner(forward, gm, entry.output_tree, checks)
    own = model.__dict__.get("forward", _NONE)
    model.forward = types.MethodType(run, model)  # (an instance attribute, put back below)
    try:
        return torch.export.export(
            model, args, kwargs or None, dynamic_shapes=dynamic_shapes, strict=False
        )
    finally:
        if own is _NONE:
            del model.forward
        else:
            model.forward = own


def _graph_runner(
    forward: types.FunctionType, gm: torch.fx.GraphModule | None, tree: Any, checks: list[Guard]
) -> Any:
    """The ``forward`` torch.export traces: sapwood's graph on the inputs read from their
    sources, the result rebuilt as the traced ``forward`` returned it. Each shape guard of
    the trace (a branch on a size, a broadcast) becomes a ``torch._check`` there, so the
    program torch.export makes holds it too (a range narrowed, or a runtime assertion)."""
    names = [name for name, _ in root_sources(forward.__code__)]
    bind = binder(forward)
    sources = [n.meta["source"] for n in gm.graph.nodes if n.op == "placeholder"] if gm else []

    def run(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        bound = bind((self, *args), kwargs)
        f_locals = dict(zip(names, bound))
        for guard in checks:
            values = {sym: src.resolve(f_locals, forward.__globals__) for sym, src in guard.symbols}
            torch._check(_evaluate(guard.expected, values), lambda g=guard: g.render())
        inputs = [source.resolve(f_locals, forward.__globals__) for source in sources]
        outputs = gm(*inputs) if gm is not None else ()
        return _rebuild(tree, outputs)

    # (torch.export names the inputs of a ``dynamic_shapes`` dict after forward's parameters)
    run.__signature__ = inspect.signature(forward)  # type: ignore[attr-defined]
    return run


def _rebuild(tree: Any, outputs: Any) -> Any:
    kind, payload = tree
    if kind == "out":
        return outputs[payload]
    if kind == "const":
        return payload
    if kind == "tuple":
        return tuple(_rebuild(item, outputs) for item in payload)
    if kind == "list":
        return [_rebuild(item, outputs) for item in payload]
    if kind == "model_output":
        cls, fields = payload
        return cls(**{key: _rebuild(item, outputs) for key, item in fields})
    return {key: _rebuild(item, outputs) for key, item in payload}


def _evaluate(expr: Any, values: dict[Any, Any]) -> Any:
    """A shape guard's sympy expression computed on the sizes (SymInts while exporting)."""
    import operator

    import sympy
    from torch.utils._sympy import functions as torch_sympy

    if isinstance(expr, sympy.Symbol):
        return values[expr]
    if expr in (sympy.true, sympy.false):
        return bool(expr)
    if isinstance(expr, sympy.Integer):
        return int(expr)
    args = [_evaluate(a, values) for a in expr.args]
    relations = {
        sympy.Eq: operator.eq,
        sympy.Ne: operator.ne,
        sympy.Lt: operator.lt,
        sympy.Le: operator.le,
        sympy.Gt: operator.gt,
        sympy.Ge: operator.ge,
    }
    if type(expr) in relations:
        return relations[type(expr)](*args)
    if isinstance(expr, sympy.Add):
        return _fold(operator.add, args)
    if isinstance(expr, sympy.Mul):
        return _fold(operator.mul, args)
    if isinstance(expr, sympy.Pow) and isinstance(expr.exp, sympy.Integer) and expr.exp >= 0:
        return args[0] ** int(expr.exp)
    if isinstance(expr, (torch_sympy.FloorDiv, torch_sympy.CleanDiv)):
        return args[0] // args[1]
    if isinstance(expr, (torch_sympy.PythonMod, torch_sympy.Mod, sympy.Mod)):
        return args[0] % args[1]
    if isinstance(expr, sympy.And):
        return _fold(torch.sym_and, args)
    if isinstance(expr, sympy.Or):
        return _fold(torch.sym_or, args)
    if isinstance(expr, sympy.Not):
        return torch.sym_not(args[0])
    if isinstance(expr, (sympy.Max, torch_sympy.Max)):
        return _fold(torch.sym_max, args)
    if isinstance(expr, (sympy.Min, torch_sympy.Min)):
        return _fold(torch.sym_min, args)
    raise Unsupported(f"exporting a shape guard sapwood cannot restate ({expr})")


def _fold(fn: Any, args: list[Any]) -> Any:
    out = args[0]
    for a in args[1:]:
        out = fn(out, a)
    return out
