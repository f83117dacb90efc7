"""Graph passes run by ``OutputGraph.compile`` before the backend sees the graph.

Invariants:

* Dead-code elimination removes a node only if it has no users and is pure. A node is
  side-effecting (never removed) if torch.fx calls it impure, or it mutates an argument: an
  in-place tensor method (``add_``), a torch function ending in ``_``, ``out=``, ``inplace=True``,
  ``setitem``/augmented assignment on a tensor, or a module in training mode with buffers
  (batch norm updates its running statistics).
* Unused-input removal keeps a placeholder that binds a symbol still used by the graph.
* Duplicate-input removal merges placeholders only when they hold the *same tensor object*,
  and reports each merge so an alias guard can be recorded; different objects are never
  merged, however equal.
* Structural fingerprints are equal only for graphs that compute the same thing: same ops in
  the same order over the same arguments and attributes (names of nodes do not matter).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from sapwood_graph._fake import symbols_of

if TYPE_CHECKING:
    import sympy

_MUTATING_FUNCTIONS = frozenset(
    {
        operator.setitem,
        operator.delitem,
        operator.iadd,
        operator.isub,
        operator.imul,
        operator.itruediv,
        operator.ifloordiv,
        operator.imod,
        operator.ipow,
        operator.imatmul,
        operator.iand,
        operator.ior,
        operator.ixor,
        operator.ilshift,
        operator.irshift,
    }
)


_MUTATING_DUNDERS = frozenset(
    {f"__{op}__" for op in ("setitem", "delitem")}
    | {
        f"__i{op}__"
        for op in (
            "add",
            "sub",
            "mul",
            "truediv",
            "floordiv",
            "mod",
            "pow",
            "matmul",
            "and",
            "or",
            "xor",
            "lshift",
            "rshift",
        )
    }
)


def _is_inplace_name(name: str) -> bool:
    """``add_``/``relu_`` (torch's in-place convention) or a mutating dunder (``__setitem__``)."""
    return (name.endswith("_") and not name.endswith("__")) or name in _MUTATING_DUNDERS


def is_side_effecting(node: torch.fx.Node, attributes: dict[str, Any]) -> bool:
    """Whether DCE must keep ``node`` even when nothing uses its value."""
    if node.op in ("placeholder", "output"):
        return True
    if node.op == "get_attr":
        return False
    if node.kwargs.get("out") is not None or node.kwargs.get("inplace") is True:
        return True
    if node.op == "call_method":
        return _is_inplace_name(str(node.target))
    if node.op == "call_module":
        module = attributes.get(str(node.target))
        if module is None:
            return True
        if getattr(module, "inplace", False) is True or getattr(module, "_is_impure", False):
            return True
        return bool(module.training and any(True for _ in module.buffers()))
    target = node.target
    if target in _MUTATING_FUNCTIONS:
        first = (
            node.args[0].meta.get("example_value")
            if node.args and isinstance(node.args[0], torch.fx.Node)
            else None
        )
        return isinstance(first, torch.Tensor) or first is None
    name = getattr(target, "__name__", "")
    module = getattr(target, "__module__", None) or ""
    if _is_inplace_name(name) and (
        module.startswith("torch")
        or getattr(torch.Tensor, name, None) is target
        or isinstance(target, torch._ops.OpOverload)
    ):
        return True
    try:
        return bool(node.is_impure())
    except Exception:  # an unusual target fx cannot classify: keep it, to be safe
        return True


def eliminate_dead_code(graph: torch.fx.Graph, attributes: dict[str, Any]) -> list[str]:
    """Remove dead pure nodes; return the names removed (in removal order)."""
    removed: list[str] = []
    for node in reversed(list(graph.nodes)):
        if node.op == "placeholder" or node.users or is_side_effecting(node, attributes):
            continue
        removed.append(node.name)
        graph.erase_node(node)
    return removed


def used_symbols(graph: torch.fx.Graph, exclude: Iterable[torch.fx.Node] = ()) -> set[sympy.Symbol]:
    """The symbols appearing in the example values of the graph's nodes (except ``exclude``)."""
    skip = set(exclude)
    found: set[sympy.Symbol] = set()
    for node in graph.nodes:
        if node in skip or node.op == "output":
            continue
        found.update(symbols_of(node.meta.get("example_value")))
    return found


def remove_unused_inputs(
    graph: torch.fx.Graph, binds: Callable[[torch.fx.Node], sympy.Symbol | None]
) -> list[torch.fx.Node]:
    """Erase placeholders nobody uses, except those binding a symbol still in use.

    ``binds(node)`` gives the symbol a placeholder binds (or ``None``). Returns the erased nodes.
    """
    erased: list[torch.fx.Node] = []
    unused = [n for n in graph.nodes if n.op == "placeholder" and not n.users]
    plain = [n for n in unused if binds(n) is None]
    for node in plain:
        graph.erase_node(node)
        erased.append(node)
    binders = [n for n in unused if binds(n) is not None]
    for node in binders:
        if binds(node) not in used_symbols(graph, exclude=[node]):
            graph.erase_node(node)
            erased.append(node)
    return erased


def merge_duplicate_inputs(
    graph: torch.fx.Graph, value_of: Callable[[torch.fx.Node], Any]
) -> list[tuple[torch.fx.Node, torch.fx.Node]]:
    """Merge tensor placeholders holding the same object into the first of them.

    Returns ``(kept, merged)`` pairs; each ``merged`` node has been erased.
    """
    first_by_id: dict[int, torch.fx.Node] = {}
    merges: list[tuple[torch.fx.Node, torch.fx.Node]] = []
    for node in list(graph.nodes):
        if node.op != "placeholder":
            continue
        value = value_of(node)
        if not isinstance(value, torch.Tensor):
            continue
        kept = first_by_id.setdefault(id(value), node)
        if kept is node:
            continue
        node.replace_all_uses_with(kept)
        graph.erase_node(node)
        merges.append((kept, node))
    return merges


def fingerprint(gm: torch.fx.GraphModule) -> tuple[Any, ...]:
    """A hashable structural description of ``gm`` (see the module invariants)."""
    index: dict[torch.fx.Node, int] = {}
    parts: list[Any] = []

    def arg(value: Any) -> Any:
        if isinstance(value, torch.fx.Node):
            return ("node", index[value])
        if isinstance(value, (tuple, list)):
            return (type(value).__name__, tuple(arg(v) for v in value))
        if isinstance(value, dict):
            return ("dict", tuple((k, arg(v)) for k, v in value.items()))
        if isinstance(value, slice):
            return ("slice", arg(value.start), arg(value.stop), arg(value.step))
        try:
            hash(value)
        except TypeError:
            return ("object", id(value))
        return (type(value).__name__, value)

    for i, node in enumerate(gm.graph.nodes):
        index[node] = i
        target: Any = node.target
        if node.op in ("get_attr", "call_module"):
            attr = _attribute(gm, str(target))
            if isinstance(attr, torch.fx.GraphModule):
                target = ("subgraph", fingerprint(attr))
            else:
                target = ("attribute", id(attr))
        elif node.op == "placeholder":
            target = None
        parts.append((node.op, target, arg(node.args), arg(node.kwargs)))
    return tuple(parts)


def _attribute(gm: torch.nn.Module, qualname: str) -> Any:
    value: Any = gm
    for part in qualname.split("."):
        value = getattr(value, part)
    return value
