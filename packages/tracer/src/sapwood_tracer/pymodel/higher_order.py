"""torch's higher-order idioms in one graph: ``torch.utils.checkpoint.checkpoint`` and
``torch.cond``.

``checkpoint(fn, *args, use_reentrant=False, **kwargs)`` runs ``fn`` without keeping its
activations and runs it again in the backward to get them back. The call is traced as the
body of torch's ``tag_activation_checkpoint`` operation: ``fn`` is traced into a child graph
(the values it reads from outside lifted as inputs), and the operation, which AOT autograd and
Inductor understand (the body's nodes are recomputed in the backward, not saved), is recorded
in the caller's graph. torch.compile captures it the same way.

Eagerly, the backward calls ``fn`` a second time. The capture is exact only where that second
run cannot differ from the first and changes nothing, so a body is refused — the call is a
graph break with its reason, and the checkpoint runs eagerly — when:

* it has an effect outside its own values: a write the trace replays after the graph (an
  attribute — unless the body puts back what was there, as a flag set and reset — a global,
  a container that was passed in), a change to a Python object it can
  reach that the trace made earlier (a list, an object, a closure cell), or an in-place write
  to a tensor it did not make (eagerly the recompute would apply it twice);
* it draws random numbers (dropout with ``p > 0``): ``tag_activation_checkpoint`` leaves
  reproducing them to Inductor's functionalised RNG, which other backends do not have;
* it returns something other than tensors it made, tensors it was given as they are (those
  stay the caller's, as eagerly), and constants: a view of a given tensor, a symbolic size;
* the reentrant variant is asked for (``use_reentrant=True``, or not given: torch 2.x then
  warns and uses it), or a ``context_fn``, ``debug`` or ``determinism_check`` that is not
  the default.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.utils.checkpoint as checkpointing
from torch.utils._python_dispatch import TorchDispatchMode

from ..errors import TracedException, Unsupported
from ..values.base import ConstantValue, Context, Value
from ..values.containers import ListValue, NamedTupleValue, TupleValue
from ..values.symbolic import SymNumberValue
from ..values.tensors import TensorValue
from .builtins import handles

__all__: list[str] = []

#: how many values a body's reachable state may hold before the check gives up (refusing)
_REACHABLE_LIMIT = 20_000


# ------------------------------------------------------------------ checkpoint
@handles(checkpointing.checkpoint)
def _checkpoint(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if not args:
        raise Unsupported("checkpoint() without the function to run (TypeError)")
    fn, operands = args[0], list(args[1:])
    body_kwargs = dict(kwargs)
    reentrant = body_kwargs.pop("use_reentrant", None)
    if reentrant is None or not reentrant.is_constant() or reentrant.as_constant() is not False:
        raise Unsupported(
            "checkpoint() without use_reentrant=False",
            hint="The reentrant variant (torch's default when use_reentrant is not given) runs "
            "eagerly; pass use_reentrant=False to compile the checkpointed function.",
        )
    _checkpoint_option(body_kwargs, "preserve_rng_state", (True, False))
    _checkpoint_option(body_kwargs, "early_stop", (True, False))
    _checkpoint_option(body_kwargs, "debug", (False,))
    _checkpoint_option(body_kwargs, "determinism_check", (checkpointing._DEFAULT_DETERMINISM_MODE,))
    _checkpoint_option(body_kwargs, "context_fn", (checkpointing.noop_context_fn,))
    from torch._higher_order_ops.wrap import tag_activation_checkpoint

    return traced_body(tx, "checkpoint", tag_activation_checkpoint, fn, operands, body_kwargs)


def _checkpoint_option(kwargs: dict[str, Value], name: str, allowed: tuple[Any, ...]) -> None:
    value = kwargs.pop(name, None)
    if value is None:
        return
    if not value.is_constant() or not any(value.as_constant() is a for a in allowed):
        raise Unsupported(f"checkpoint() with {name}={value.describe()}")


# ------------------------------------------------------------------ the body
def traced_body(
    tx: Context,
    what: str,
    op: Any,
    fn: Value,
    args: list[Value],
    kwargs: dict[str, Value],
) -> Value:
    """``fn(*args, **kwargs)`` traced into a child graph and recorded as ``op(body, *lifted)``
    in the current one; the value of what ``fn`` returned, its tensors now the op's results.
    Refused (``Unsupported``) where the body is not pure (see the module docstring)."""
    body, structure = _pure_body(tx, what, fn, args, kwargs, passthrough=True)
    made = tx.graph.call_subgraph(tx, op, body, {})
    assert isinstance(made, (TupleValue, ListValue))
    return _rebuild(structure, iter(made.items))


def _pure_body(
    tx: Context,
    what: str,
    fn: Value,
    args: list[Value],
    kwargs: dict[str, Value],
    *,
    passthrough: bool = False,
) -> tuple[Any, Any]:
    """``fn(*args, **kwargs)`` traced into a child graph of the current one, its output set to
    the tensors of the result: the child (closed) and the result's structure. Refused where
    ``fn`` is not pure. With ``passthrough``, a tensor the body returns as it was given (T5's
    position bias, handed from layer to layer) stays out of the outputs: the result holds the
    caller's tensor itself, as eagerly (a view of one is still refused)."""
    effects = tx.side_effects
    # what the body can reach: its function and arguments, and the values the trace wrote
    # earlier into objects, globals and cells that existed before the call
    before = _snapshot([fn, *args, *kwargs.values(), *effects.written_values()])
    mark, pending = effects.mark(), effects.pending_writes()
    with tx.graph.subgraph(f"{what}_body") as body:
        try:
            result = tx.call(fn, args, kwargs)
        except TracedException as exc:  # (its partial work is in the child, dropped)
            raise Unsupported(f"{what}() of a function that raises") from exc
        if not effects.restored_since(mark, pending):  # (a flag set and reset passes)
            raise Unsupported(f"{what}() of a function that writes to objects outside it")
        if _snapshot_changed(before):
            raise Unsupported(f"{what}() of a function that changes Python values it was given")
        tensors: list[TensorValue] = []
        structure = _flatten(result, tensors, what, body if passthrough else None)
        outputs = [body.lift(t.proxy) for t in tensors]
        _check_tensors(body, outputs, what)
        body.output(tuple(outputs))
    return body, structure


# ------------------------------------------------------------------ torch.cond
@handles(torch.cond)
def _cond(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    names = ("pred", "true_fn", "false_fn", "operands")
    if len(args) > len(names) or set(kwargs) - set(names[len(args) :]):
        raise Unsupported("torch.cond() with these arguments (TypeError)")
    bound = dict(zip(names, args)) | kwargs
    if not {"pred", "true_fn", "false_fn"} <= bound.keys():
        raise Unsupported("torch.cond() without pred, true_fn and false_fn (TypeError)")
    pred, operands = bound["pred"], bound.get("operands", TupleValue([]))
    if not isinstance(operands, (TupleValue, ListValue)):
        raise Unsupported(f"torch.cond() with operands {operands.describe()}")
    items = list(operands.items)
    if not isinstance(pred, TensorValue):
        # a Python bool (or a size comparison, specialised): eager torch.cond calls the branch
        chosen = bound["true_fn"] if tx.truth(pred) else bound["false_fn"]
        return tx.call(chosen, items, {})
    if pred.fake.numel() != 1 or not all(isinstance(v, TensorValue) for v in items):
        raise Unsupported("torch.cond() of a predicate or operands torch.cond refuses")
    true, true_structure = _pure_body(tx, "cond", bound["true_fn"], items, {})
    false, false_structure = _pure_body(tx, "cond", bound["false_fn"], items, {})
    if _shape_of(true_structure) != _shape_of(false_structure):
        raise Unsupported("torch.cond() of branches that return different structures")
    true_out, false_out = _outputs(true), _outputs(false)
    if [_metadata(t) for t in true_out] != [_metadata(f) for f in false_out]:
        raise Unsupported(
            "torch.cond() of branches whose tensors differ in shape, strides, dtype, device or "
            "requires_grad"
        )
    lifted = list(true.lifted_inputs)
    known = {p.node for p in lifted}
    lifted += [p for p in false.lifted_inputs if p.node not in known]
    graphs = [
        tx.graph.subgraph_attribute(f"cond_{side}", _taking(branch, lifted))
        for side, branch in (("true", true), ("false", false))
    ]
    made = tx.graph.call_operation(
        tx, torch.ops.higher_order.cond, (pred.proxy, *graphs, tuple(lifted)), {}
    )
    assert isinstance(made, (TupleValue, ListValue))
    return _rebuild(true_structure, iter(made.items))


def _shape_of(structure: Any) -> Any:
    """A structure with its constants kept as values (two branches must agree on them too)."""
    if structure is _TENSOR:
        return "tensor"
    if isinstance(structure, ConstantValue):
        return ("constant", type(structure.value), repr(structure.value))
    kind, items = structure
    return (kind, tuple(_shape_of(item) for item in items))


def _outputs(body: Any) -> list[Any]:
    output = next(n for n in reversed(body.graph.nodes) if n.op == "output")
    return [node.meta["example_value"] for node in output.args[0]]


def _metadata(fake: torch.Tensor) -> tuple[Any, ...]:
    """What the caller's trace may read of a branch's result: equal in both branches, as
    written (symbolic sizes compared as expressions, so no guard is added)."""
    return (
        tuple(str(d) for d in fake.shape),
        tuple(str(d) for d in fake.stride()),
        str(fake.storage_offset()),
        fake.dtype,
        fake.device,
        fake.requires_grad,
    )


def _taking(body: Any, lifted: list[Any]) -> torch.fx.GraphModule:
    """``body``'s graph module with its inputs made ``lifted`` (proxies of the caller's graph),
    in that order: the branches of one ``cond`` take the same operands."""
    module = body.graph_module()
    graph = module.graph
    old = {n.meta.get("lifted_from"): n for n in graph.nodes if n.op == "placeholder"}
    first = next(iter(graph.nodes))
    fresh = []
    for proxy in lifted:
        with graph.inserting_before(first):
            node = graph.placeholder(f"{proxy.node.name}_in")
        node.meta["example_value"] = proxy.node.meta.get("example_value")
        fresh.append(node)
    # (each new placeholder went in before the old first node: they lead, in ``lifted`` order)
    for node, proxy in zip(fresh, lifted):
        previous = old.pop(proxy.node, None)
        if previous is not None:
            previous.replace_all_uses_with(node)
            graph.erase_node(previous)
    if old:
        raise Unsupported("torch.cond() of a branch with inputs of its own")
    graph.lint()
    module.recompile()
    return module


def _flatten(value: Value, tensors: list[TensorValue], what: str, body: Any = None) -> Any:
    """The structure of a body's result with its tensors taken out (in order); with ``body``,
    a tensor of an enclosing graph (given, returned as it is) stays in the structure."""
    if isinstance(value, TensorValue):
        if body is not None and not body.owns(value.proxy):
            return value
        tensors.append(value)
        return _TENSOR
    if isinstance(value, ConstantValue):
        return value
    if isinstance(value, NamedTupleValue):
        return (value.cls, [_flatten(v, tensors, what, body) for v in value.items])
    if type(value) is ListValue:
        return (list, [_flatten(v, tensors, what, body) for v in value.items])
    if isinstance(value, TupleValue) and value.python_type() is tuple:
        return (tuple, [_flatten(v, tensors, what, body) for v in value.items])
    raise Unsupported(f"{what}() of a function returning {value.describe()}")


_TENSOR = object()


def _rebuild(structure: Any, tensors: Iterator[Value]) -> Value:
    if structure is _TENSOR:
        return next(tensors)
    if isinstance(structure, (ConstantValue, TensorValue)):
        return structure
    kind, items = structure
    values = [_rebuild(item, tensors) for item in items]
    if kind is list:
        return ListValue(values)
    if kind is tuple:
        return TupleValue(values)
    return NamedTupleValue(kind, values)


def _check_tensors(body: Any, outputs: list[Any], what: str) -> None:
    """The body's graph writes no tensor it was given, draws no random numbers, and returns
    only tensors it made (no input, no view of one)."""
    placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]
    given = {
        _storage(n.meta["example_value"])
        for n in placeholders
        if isinstance(n.meta.get("example_value"), torch.Tensor)
    }
    for node in body.graph.nodes:
        if node.op in ("call_method", "call_function") and _writes_in_place(node):
            target = node.args[0] if node.args else None
            fake = getattr(target, "meta", {}).get("example_value")
            if isinstance(fake, torch.Tensor) and _storage(fake) in given:
                raise Unsupported(
                    f"{what}() of a function that writes in place to a tensor it was given"
                )
    for proxy in outputs:
        fake = proxy.node.meta.get("example_value")
        if not isinstance(fake, torch.Tensor):
            raise Unsupported(f"{what}() of a function returning a symbolic number")
        if proxy.node.op == "placeholder" or _storage(fake) in given:
            raise Unsupported(f"{what}() of a function returning a tensor it was given (or a view)")
    inputs = [n.meta["example_value"] for n in placeholders]
    if _draws_random_numbers(body.graph, inputs):
        raise Unsupported(
            f"{what}() of a function that draws random numbers (dropout)",
            hint="Only Inductor reproduces them in the recompute; the checkpoint runs eagerly.",
        )


def _storage(tensor: torch.Tensor) -> int:
    """Which storage ``tensor`` (a fake) views: equal for a tensor and its views."""
    return int(tensor.untyped_storage()._cdata)


def _writes_in_place(node: Any) -> bool:
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if not isinstance(name, str):
        return False
    if name in ("__setitem__", "setitem") or "out" in node.kwargs:
        return True
    return name.endswith("_") and not name.endswith("__")


class _SeededOps(TorchDispatchMode):
    """Notes every operator tagged as drawing from the random number generator."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[Any] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if torch.Tag.nondeterministic_seeded in func.tags and _draws(func, args, kwargs):
            self.found.append(func)
        return func(*args, **kwargs)


def _draws(func: Any, args: Any, kwargs: dict[str, Any]) -> bool:
    """Whether a seeded operator draws here: the attention kernels are tagged seeded for their
    dropout, and draw nothing when ``dropout_p`` is 0."""
    for index, argument in enumerate(func._schema.arguments):
        if argument.name != "dropout_p":
            continue
        if argument.name in kwargs:
            value = kwargs[argument.name]
        elif index < len(args):
            value = args[index]
        else:
            value = argument.default_value
        return not (isinstance(value, (int, float)) and value == 0)
    return True


def _draws_random_numbers(graph: torch.fx.Graph, inputs: list[Any]) -> bool:
    """Run the body on its fake inputs, watching the operators it reaches."""
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    watch = _SeededOps()
    with watch:
        torch.fx.Interpreter(module).run(*inputs)
    return bool(watch.found)


# ------------------------------------------------------------------ what the body can reach
def _snapshot(roots: list[Value]) -> dict[int, tuple[Value, Any]]:
    """The state of every value reachable from ``roots``: each value's fields, values among
    them by identity. A body that changes one changes this."""
    seen: dict[int, tuple[Value, Any]] = {}
    stack = list(roots)
    while stack:
        value = stack.pop()
        if id(value) in seen or isinstance(value, (TensorValue, SymNumberValue, ConstantValue)):
            continue
        if len(seen) > _REACHABLE_LIMIT:
            raise Unsupported("a checkpointed function that reaches too many values to check")
        fields = tuple(_state_of(getattr(value, n, None), stack) for n in _slots(type(value)))
        seen[id(value)] = (value, fields)
    return seen


def _snapshot_changed(before: dict[int, tuple[Value, Any]]) -> bool:
    for value, fields in before.values():
        if value.source is not None:
            # an object from outside the trace: its changes are side effects the trace
            # records (checked apart); its fields may hold what it lazily loaded
            continue
        now = tuple(_state_of(getattr(value, n, None), []) for n in _slots(type(value)))
        if now != fields:
            return True
    return False


def _state_of(field: Any, stack: list[Value]) -> Any:
    if isinstance(field, Value):
        stack.append(field)
        return id(field)
    if isinstance(field, (list, tuple)):
        return (type(field), tuple(_state_of(item, stack) for item in field))
    if isinstance(field, dict):
        return (dict, tuple((key, _state_of(item, stack)) for key, item in field.items()))
    if isinstance(field, (set, frozenset)):
        return (set, frozenset(_state_of(item, stack) for item in field))
    return id(field) if not isinstance(field, (int, float, str, bool, type(None))) else field


def _slots(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else slots)
    return [n for n in names if n not in ("__weakref__", "__dict__")]
