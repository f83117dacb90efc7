"""SubgraphTracer: records operations into one FX graph, with fake-value metadata.

An :class:`~sapwood_graph.OutputGraph` owns a root tracer; higher-order operations (cond, map,
checkpoint-like regions) open child tracers with :meth:`SubgraphTracer.subtracer`.

Invariants:

* Every ``call_function`` / ``call_method`` / ``call_module`` / ``get_attr`` node carries
  ``meta["example_value"]``: the result of running its target on the fake values of its
  arguments (for a ``get_attr`` of a module or subgraph, the module itself). If that run fails,
  no node is created and :class:`~sapwood_graph.FakePropagationError` is raised.
* A proxy may be used in the tracer that made it or in any tracer nested inside it. Using it in
  a nested tracer *lifts* it: the child gets a placeholder and remembers the enclosing value,
  so the call site can pass it (:attr:`SubgraphTracer.lifted_inputs`). Lifting goes through
  every level in between, and the symbols in a lifted value's shape are lifted with it, so a
  child graph never refers to a symbol it does not bind. A value is lifted at most once per
  tracer.
* Placeholders come first in every graph: explicit subgraph inputs, then lifted ones (root:
  graph inputs in creation order).
* Real tensors met as arguments become attributes of the graph (``get_attr``), never baked-in
  constants of a node, so the graph stays serialisable and the tensors are deduplicated.

Proxies are ``torch.fx.Proxy`` objects, so ``x + y`` and ``torch.relu(x)`` on proxies record
into the innermost open tracer (lifting as needed) just as ``tracer.call_function`` would.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.proxy import TracerBase

from sapwood_graph._fake import fake_static, op_name, propagate, shielded, symbols_of
from sapwood_graph._lazy import lazy
from sapwood_graph.errors import GraphInputError, SubgraphError
from sapwood_graph.sources import Source

if TYPE_CHECKING:
    import sympy
else:
    sympy = lazy("sympy")


class GraphOwner(Protocol):
    """What a tracer asks of the :class:`~sapwood_graph.OutputGraph` that owns it.

    The output graph implements it; the tracer names only this, so the two modules do not
    import each other.
    """

    fake_mode: FakeTensorMode

    @property
    def current_tracer(self) -> SubgraphTracer: ...

    @property
    def attributes(self) -> Mapping[str, Any]: ...

    def install_attribute(
        self, value: Any, *, source: Source | None = None, name_hint: str | None = None
    ) -> str: ...

    def _install_subgraph(self, name: str, graph_module: torch.fx.GraphModule) -> str: ...

    def _push_tracer(self, tracer: SubgraphTracer) -> None: ...

    def _pop_tracer(self, tracer: SubgraphTracer) -> None: ...

    def _graph_module(self, graph: torch.fx.Graph, class_name: str) -> torch.fx.GraphModule: ...

    def _check_not_compiled(self) -> None: ...

    def _fake_module_state(self, module: torch.nn.Module) -> dict[str, torch.Tensor]: ...


__all__ = ["SubgraphTracer"]


class _Proxy(torch.fx.Proxy):
    """A proxy whose operator overloads record into the innermost open tracer."""

    def __init__(self, node: torch.fx.Node, tracer: SubgraphTracer) -> None:
        self._owner = tracer
        self.node = node

    @property  # type: ignore[override]
    def tracer(self) -> SubgraphTracer:
        return self._owner.output_graph.current_tracer

    @tracer.setter
    def tracer(self, value: SubgraphTracer) -> None:
        self._owner = value

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"


def _sympy_op(expr: Any) -> Callable[[Any, Any], Any] | None:
    """The operator a sympy sum or product node stands for (None for others)."""
    kind = type(expr)
    return operator.add if kind is sympy.Add else operator.mul if kind is sympy.Mul else None


class SubgraphTracer(TracerBase):
    """Builds one FX graph. Made by :class:`~sapwood_graph.OutputGraph` (the root) or by
    :meth:`subtracer` (children); not constructed directly.

    Example (inside a child, ``x`` belongs to the root and is lifted)::

        with og.root.subtracer("body") as body:
            y = body.call_function(torch.sin, (x,))
            body.output((y,))
        name = og.root.install_subgraph("body", body.graph_module())
        out = og.root.call_function(run_body, (og.root.get_attr(name), *body.lifted_inputs))
    """

    def __init__(self, output_graph: GraphOwner, parent: SubgraphTracer | None, name: str) -> None:
        self.output_graph = output_graph
        self.parent = parent
        self.name = name
        self.graph = torch.fx.Graph()
        self._open = True
        self._has_output = False
        self._explicit_inputs: list[torch.fx.Node] = []
        # The last lifted placeholder (root: the last graph input).
        self._last_placeholder: torch.fx.Node | None = None
        # outer node -> placeholder here; the outer proxies in placeholder order.
        self._lifted: dict[torch.fx.Node, _Proxy] = {}
        self._lifted_outer: list[torch.fx.Proxy] = []
        self._bound_symbols: dict[sympy.Symbol, torch.fx.Proxy] = {}
        self._attr_nodes: dict[str, _Proxy] = {}

    # ------------------------------------------------------------------ structure

    @property
    def depth(self) -> int:
        """0 for the root tracer, 1 for its children, …"""
        return 0 if self.parent is None else self.parent.depth + 1

    @property
    def lifted_inputs(self) -> list[torch.fx.Proxy]:
        """The enclosing tracer's proxies this tracer lifted, in the order of their
        placeholders (after the explicit inputs). Pass them at the call site."""
        return list(self._lifted_outer)

    @property
    def bound_symbols(self) -> Mapping[sympy.Symbol, torch.fx.Proxy]:
        """Symbols bound in this graph, each to the proxy (a placeholder or a node) binding it."""
        return dict(self._bound_symbols)

    def owns(self, proxy: torch.fx.Proxy) -> bool:
        """Whether ``proxy``'s node is in this tracer's graph."""
        return proxy.node.graph is self.graph

    # ------------------------------------------------------------------ recording

    @shielded
    def create_proxy(  # type: ignore[override]
        self,
        kind: str,
        target: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None = None,
        name: str | None = None,
        type_expr: Any | None = None,
        proxy_factory_fn: Callable[[torch.fx.Node], torch.fx.Proxy] | None = None,
    ) -> torch.fx.Proxy:
        """Record one node and return its proxy (``kind`` as in ``torch.fx``:
        ``call_function``, ``call_method``, ``call_module``, ``get_attr``).

        ``args``/``kwargs`` may nest tuples, lists, dicts and slices of proxies (from this
        tracer or an enclosing one), real tensors, SymInts and constants. The node's
        ``meta["example_value"]`` is the fake result. Raises
        :class:`~sapwood_graph.FakePropagationError` if the op cannot run on fake values.
        """
        self._check_recording()
        if kind not in ("call_function", "call_method", "call_module", "get_attr"):
            raise SubgraphError(f"create_proxy cannot make a {kind!r} node")
        node_args = self._to_node_arg(tuple(args))
        node_kwargs = self._to_node_arg(dict(kwargs or {}))
        example = self._run_fake(kind, target, node_args, node_kwargs)
        node = self.graph.create_node(kind, target, node_args, node_kwargs, name, type_expr)
        node.meta["example_value"] = example
        proxy = proxy_factory_fn(node) if proxy_factory_fn else _Proxy(node, self)
        self._bind_result_symbol(example, proxy)
        return proxy

    def call_function(
        self,
        target: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> torch.fx.Proxy:
        """Record ``target(*args, **kwargs)`` (a torch function, an operator, any callable)."""
        return self.create_proxy("call_function", target, args, kwargs)

    def call_method(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None
    ) -> torch.fx.Proxy:
        """Record ``args[0].method(*args[1:], **kwargs)`` (a tensor method)."""
        return self.create_proxy("call_method", method, args, kwargs)

    def call_module(
        self,
        module: torch.nn.Module,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        *,
        source: Any = None,
    ) -> torch.fx.Proxy:
        """Record a call of a user's module; it is installed as an attribute (by identity,
        named after ``source`` when given) and called as a ``call_module`` node."""
        name = self.output_graph.install_attribute(module, source=source)
        return self.create_proxy("call_module", name, args, kwargs)

    @shielded
    def get_attr(
        self, value: Any, *, source: Any = None, name_hint: str | None = None
    ) -> torch.fx.Proxy:
        """A ``get_attr`` proxy for an installed attribute name, or for a parameter, buffer,
        constant tensor or module (installed first, deduplicated by identity, named after
        ``source`` or ``name_hint``). One node per attribute per graph."""
        self._check_recording()
        if isinstance(value, str):
            if value not in self.output_graph.attributes:
                raise GraphInputError(f"no attribute named {value!r} is installed in this graph")
            qualname = value
        else:
            qualname = self.output_graph.install_attribute(
                value, source=source, name_hint=name_hint
            )
        cached = self._attr_nodes.get(qualname)
        if cached is not None:
            return cached
        attr = self.output_graph.attributes[qualname]
        example = (
            fake_static(self.output_graph.fake_mode, attr)
            if isinstance(attr, torch.Tensor)
            else attr
        )
        node = self.graph.create_node("get_attr", qualname)
        node.meta["example_value"] = example
        proxy = _Proxy(node, self)
        self._attr_nodes[qualname] = proxy
        return proxy

    @shielded
    def install_subgraph(self, name: str, graph_module: torch.fx.GraphModule) -> str:
        """Register a child's GraphModule as an attribute and return its qualified name.

        A subgraph structurally equal to one installed before returns the earlier name, so
        two identical branches are stored (and compiled) once.
        """
        return self.output_graph._install_subgraph(name, graph_module)

    # ------------------------------------------------------------------ nesting

    @contextlib.contextmanager
    def subtracer(self, name: str = "subgraph") -> Iterator[SubgraphTracer]:
        """Open a child tracer for the body of a higher-order operation.

        While the ``with`` block is open the child is the innermost tracer: operator
        overloads on proxies record into it, and proxies of this tracer (or any enclosing
        one) used in it are lifted. Only the innermost tracer may open a child.
        """
        self._check_recording()
        if self.output_graph.current_tracer is not self:
            raise SubgraphError("only the innermost open tracer can open a subtracer")
        child = SubgraphTracer(self.output_graph, self, name)
        self.output_graph._push_tracer(child)
        try:
            yield child
        finally:
            self.output_graph._pop_tracer(child)
            child._open = False

    @shielded
    def create_subgraph_input(self, name: str, example_value: Any) -> torch.fx.Proxy:
        """An explicit input of a child graph (e.g. the operand a branch receives).

        ``example_value`` is a fake tensor, a proxy (its fake value is used), a real tensor
        (made fake with static shape), a SymInt or a constant. Symbols in it are lifted.
        Explicit inputs come before lifted ones, in creation order.
        """
        self._check_recording()
        if self.parent is None:
            raise GraphInputError(
                "the root graph's inputs have sources: use OutputGraph.create_graph_input"
            )
        if isinstance(example_value, torch.fx.Proxy):
            example_value = example_value.node.meta.get("example_value")
        elif isinstance(example_value, torch.Tensor) and not isinstance(example_value, FakeTensor):
            example_value = fake_static(self.output_graph.fake_mode, example_value)
        self._lift_symbols_of(example_value)
        node = self._placeholder(name, example_value, explicit=True)
        proxy = _Proxy(node, self)
        self._bind_result_symbol(example_value, proxy)
        return proxy

    def lift(self, proxy: torch.fx.Proxy) -> torch.fx.Proxy:
        """The proxy standing for ``proxy`` in this graph (itself if it is ours; otherwise a
        placeholder lifted through every enclosing tracer in between)."""
        if proxy.node.graph is self.graph:
            return proxy
        if self.parent is None:
            raise SubgraphError(
                f"value {proxy.node.name!r} does not belong to this tracer or an enclosing one "
                "(was it made inside a subtracer that has been closed?)"
            )
        outer = self.parent.lift(proxy)
        return self._lift_outer(outer)

    def symbol_proxy(self, symbol: sympy.Symbol) -> torch.fx.Proxy:
        """The proxy binding ``symbol`` in this graph, lifting it from enclosing tracers."""
        bound = self._bound_symbols.get(symbol)
        if bound is not None:
            return bound
        if self.parent is None:
            raise SubgraphError(
                f"symbol {symbol} is not bound by any graph input; create the input whose "
                "size it is before using it"
            )
        return self._lift_outer(self.parent.symbol_proxy(symbol))

    def output(self, value: Any) -> None:
        """Set this graph's output (a proxy or a nested tuple/list/dict of them and constants).

        For the root graph use :meth:`~sapwood_graph.OutputGraph.compile`, which also records
        the output structure.
        """
        self._check_recording()
        if self._has_output:
            raise SubgraphError(f"the output of tracer {self.name!r} is already set")
        self.graph.output(self._to_node_arg(value))
        self._has_output = True

    @shielded
    def graph_module(self) -> torch.fx.GraphModule:
        """This graph as a ``GraphModule`` carrying the attributes it uses."""
        if not self._has_output:
            raise SubgraphError(f"set the output of tracer {self.name!r} before building it")
        return self.output_graph._graph_module(self.graph, self.name)

    # ------------------------------------------------------------------ internals

    def _check_recording(self) -> None:
        if not self._open:
            raise SubgraphError(f"tracer {self.name!r} is closed")
        if self._has_output:
            raise SubgraphError(f"tracer {self.name!r} already has its output")
        self.output_graph._check_not_compiled()

    def _placeholder(self, name: str, example: Any, *, explicit: bool = False) -> torch.fx.Node:
        # Keep placeholders ordered: explicit inputs, then lifted ones (root: inputs).
        if explicit:
            anchor = self._explicit_inputs[-1] if self._explicit_inputs else None
        else:
            anchor = self._last_placeholder or (
                self._explicit_inputs[-1] if self._explicit_inputs else None
            )
        ctx = (
            self.graph.inserting_after(anchor)
            if anchor is not None
            else self.graph.inserting_before(next(iter(self.graph.nodes), None))
        )
        with ctx:
            node = self.graph.placeholder(name)
        node.meta["example_value"] = example
        if explicit:
            self._explicit_inputs.append(node)
        else:
            self._last_placeholder = node
        return node

    def _lift_outer(self, outer: torch.fx.Proxy) -> torch.fx.Proxy:
        existing = self._lifted.get(outer.node)
        if existing is not None:
            return existing
        example = outer.node.meta.get("example_value")
        own = _symbol_of(example)
        self._lift_symbols_of(example, skip=own)
        node = self._placeholder(outer.node.name, example)
        node.meta["lifted_from"] = outer.node
        proxy = _Proxy(node, self)
        self._lifted[outer.node] = proxy
        self._lifted_outer.append(outer)
        if own is not None and own not in self._bound_symbols:
            self._bound_symbols[own] = proxy
        return proxy

    def _lift_symbols_of(self, example: Any, skip: sympy.Symbol | None = None) -> None:
        for symbol in symbols_of(example):
            if symbol != skip and symbol not in self._bound_symbols and self.parent is not None:
                self.symbol_proxy(symbol)

    def _bind_result_symbol(self, example: Any, proxy: torch.fx.Proxy) -> None:
        # A node whose value is a fresh symbol (an unbacked SymInt from ``.item()``) binds it;
        # fresh symbols that are sizes of a result tensor (``nonzero``) get a size node each, so
        # a later use, or a nested tracer, can refer to them.
        symbol = _symbol_of(example)
        if symbol is not None:
            if not self._is_bound_anywhere(symbol):
                self._bound_symbols[symbol] = proxy
            return
        if not isinstance(example, torch.Tensor):
            return
        for dim, size in enumerate(example.shape):
            symbol = _symbol_of(size)
            if symbol is not None and not self._is_bound_anywhere(symbol):
                self._bound_symbols[symbol] = self.create_proxy(
                    "call_function", torch.ops.aten.sym_size.int, (proxy, dim)
                )

    def _is_bound_anywhere(self, symbol: sympy.Symbol) -> bool:
        tracer: SubgraphTracer | None = self
        while tracer is not None:
            if symbol in tracer._bound_symbols:
                return True
            tracer = tracer.parent
        return False

    def _to_node_arg(self, value: Any) -> Any:
        if isinstance(value, torch.fx.Proxy):
            return self.lift(value).node
        if isinstance(value, tuple):
            items = tuple(self._to_node_arg(v) for v in value)
            return type(value)(*items) if hasattr(value, "_fields") else items
        if isinstance(value, list):
            return [self._to_node_arg(v) for v in value]
        if isinstance(value, dict):
            return {k: self._to_node_arg(v) for k, v in value.items()}
        if isinstance(value, slice):
            return slice(
                self._to_node_arg(value.start),
                self._to_node_arg(value.stop),
                self._to_node_arg(value.step),
            )
        if isinstance(value, FakeTensor):
            raise SubgraphError(
                "a fake tensor was passed as an argument; pass the proxy it belongs to"
            )
        if isinstance(value, torch.Tensor):
            return self.get_attr(value).node
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return self._symbolic_arg(value)
        if isinstance(value, torch.fx.Node):
            if value.graph is not self.graph:
                raise SubgraphError(f"node {value.name!r} belongs to another graph; pass its proxy")
            return value
        return value

    def _symbolic_arg(self, value: torch.SymInt | torch.SymFloat | torch.SymBool) -> Any:
        expr = value.node.expr
        if expr.is_number:
            return value.node.pytype(expr)
        return self._expr_node(expr, value)

    def _expr_node(self, expr: sympy.Expr, original: Any) -> Any:
        # Rebuild a symbolic expression from the proxies binding its symbols, so an op may
        # take e.g. ``2 * x.shape[0]`` straight from a fake tensor.
        if isinstance(expr, sympy.Symbol):
            return self.symbol_proxy(expr).node
        if isinstance(expr, sympy.Integer):
            return int(expr)
        op = _sympy_op(expr)
        if op is None and isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
            base = self._expr_node(expr.base, original)
            return self.create_proxy(
                "call_function", operator.pow, (_as_arg(self, base), int(expr.exp))
            ).node
        if op is None:
            raise SubgraphError(
                f"cannot rebuild the symbolic value {original} ({expr}) from graph values; "
                "pass the proxy that computed it instead"
            )
        args = [self._expr_node(a, original) for a in expr.args]
        acc = args[0]
        for arg in args[1:]:
            acc = self.create_proxy(
                "call_function", op, (_as_arg(self, acc), _as_arg(self, arg))
            ).node
        return acc

    def _run_fake(
        self, kind: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        og = self.output_graph
        if kind == "get_attr":
            attr = og.attributes[target]
            return fake_static(og.fake_mode, attr) if isinstance(attr, torch.Tensor) else attr
        fargs = _examples(args)
        fkwargs = _examples(kwargs)
        name = op_name(kind, target)
        if kind == "call_function":
            return propagate(og.fake_mode, name, lambda: target(*fargs, **fkwargs))
        if kind == "call_method":
            if not fargs:
                raise SubgraphError(
                    f"call_method {target!r} needs the object as its first argument"
                )
            return propagate(
                og.fake_mode, name, lambda: getattr(fargs[0], target)(*fargs[1:], **fkwargs)
            )
        module = og.attributes[target]
        name = f"{type(module).__name__} ({target})"
        state = og._fake_module_state(module)
        return propagate(
            og.fake_mode,
            name,
            lambda: torch.func.functional_call(module, state, tuple(fargs), fkwargs, strict=False),
        )

    def iter(self, obj: torch.fx.Proxy) -> Iterator[torch.fx.Proxy]:  # type: ignore[override]
        """Unpacking a proxy whose fake value is a tuple or list (``a, b = x.chunk(2)``)
        yields one ``getitem`` proxy per element; any other proxy cannot be iterated."""
        example = obj.node.meta.get("example_value")
        if not isinstance(example, (tuple, list)):
            raise SubgraphError(
                f"cannot iterate over {obj.node.name!r}: its length is not known while tracing"
            )
        return iter(
            [
                self.create_proxy("call_function", operator.getitem, (obj, i))
                for i in range(len(example))
            ]
        )

    def __repr__(self) -> str:
        return f"<SubgraphTracer {self.name!r} depth={self.depth}>"


def _as_arg(tracer: SubgraphTracer, value: Any) -> Any:
    return _Proxy(value, tracer) if isinstance(value, torch.fx.Node) else value


def _symbol_of(example: Any) -> sympy.Symbol | None:
    if isinstance(example, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        expr = example.node.expr
        if isinstance(expr, sympy.Symbol):
            return expr
    return None


def _examples(value: Any) -> Any:
    if isinstance(value, torch.fx.Node):
        return value.meta.get("example_value")
    if isinstance(value, tuple):
        items = tuple(_examples(v) for v in value)
        return type(value)(*items) if hasattr(value, "_fields") else items
    if isinstance(value, list):
        return [_examples(v) for v in value]
    if isinstance(value, dict):
        return {k: _examples(v) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(_examples(value.start), _examples(value.stop), _examples(value.step))
    return value
