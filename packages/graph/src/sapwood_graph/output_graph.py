"""OutputGraph: everything one traced region accumulates, and its compilation.

One ``OutputGraph`` per region a frontend traces. It owns the root
:class:`~sapwood_graph.SubgraphTracer`, a ``FakeTensorMode`` with a ``ShapeEnv``, the graph
inputs (keyed by :class:`~sapwood_graph.Source`), the attributes installed into the graph,
the guard records and cleanup hooks.

Invariants:

* Graph inputs are keyed by source: an equal source gives the same placeholder. Inputs are
  placeholders of the root graph in creation order, a tensor's symbol placeholders just before
  the tensor.
* Attributes are deduplicated by identity: installing the same object twice gives the same
  qualified name. Names are readable (``self_layers_0_weight`` for
  ``L['self'].layers[0].weight``), valid identifiers, and never change once given.
* The OutputGraph keeps strong references to the installed attributes and to the example
  input values until it is compiled; after :meth:`OutputGraph.compile` it refuses new nodes.
* Cleanup hooks run exactly once, in reverse order of registration, on :meth:`cleanup` or
  when leaving the ``with`` block (also on error).

Example::

    og = OutputGraph()
    x = og.create_graph_input(LocalSource("x"), torch.randn(4, 3), dynamic_dims=[0])
    y = og.root.call_function(torch.relu, (x,))
    compiled = og.compile((y,), backend=lambda gm, example_inputs: gm.forward)
    compiled.input_sources            # (L['x'].size()[0], L['x'])
    (out,) = compiled(7, torch.randn(7, 3))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensorMode

from sapwood_graph import _passes
from sapwood_graph._fake import fake_dynamic, fake_static, fake_symint, new_fake_mode, shielded
from sapwood_graph._lazy import lazy
from sapwood_graph._naming import source_stem, unique
from sapwood_graph._shape_guards import produce_shape_guards
from sapwood_graph.compiled import Backend, CompiledGraph, OutputSpec, _Constant
from sapwood_graph.errors import BackendCompilerFailed, GraphError, GraphInputError, SubgraphError
from sapwood_graph.guards import Guard, GuardKind, GuardSet, TensorSpec
from sapwood_graph.sources import Source, TensorPropertySource
from sapwood_graph.tracer import SubgraphTracer

if TYPE_CHECKING:
    import sympy
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
else:
    sympy = lazy("sympy")

__all__ = ["GraphInput", "OutputGraph"]


@dataclasses.dataclass(frozen=True, eq=False)
class GraphInput:
    """One placeholder of the root graph and where its value comes from."""

    #: Where the value comes from; the key of the input.
    source: Source
    #: The placeholder's proxy (``proxy.node.meta["example_value"]`` is the fake value).
    proxy: torch.fx.Proxy
    #: The real value seen while tracing (the example input a backend gets for a static graph;
    #: a graph with symbols hands backends :attr:`fake` instead).
    example: Any
    #: ``"tensor"``, ``"symint"`` (a symbolic int: an int input or a tensor size) or ``"value"``.
    kind: str
    #: Dims of a tensor input that are symbolic.
    dynamic_dims: frozenset[int] = frozenset()
    #: The symbol this input binds (``"symint"`` inputs only).
    symbol: sympy.Symbol | None = None
    #: Module state (a parameter or buffer): its storage stays put between calls, so a backend
    #: may read it in place; the placeholder carries ``meta["static_input"] = True``.
    static: bool = False

    @property
    def fake(self) -> Any:
        """The fake value (FakeTensor, SymInt, or the value itself)."""
        return self.proxy.node.meta["example_value"]


class OutputGraph:
    """The graph of one traced region, its inputs, attributes, guards and cleanup hooks."""

    def __init__(self, *, shape_env: ShapeEnv | None = None, name: str = "sapwood_graph") -> None:
        self.name = name
        self.fake_mode: FakeTensorMode = new_fake_mode(shape_env)
        assert self.fake_mode.shape_env is not None
        self.shape_env: ShapeEnv = self.fake_mode.shape_env
        self.root = SubgraphTracer(self, None, "root")
        self.guards = GuardSet()
        self._tracers: list[SubgraphTracer] = [self.root]
        self._inputs: dict[Source, GraphInput] = {}
        self._input_by_node: dict[torch.fx.Node, GraphInput] = {}
        self._attrs: dict[str, Any] = {}
        self._attr_name_by_id: dict[int, str] = {}
        self._subgraph_by_fingerprint: dict[tuple[Any, ...], str] = {}
        self._fake_by_id: dict[int, tuple[torch.Tensor, Any, frozenset[int]]] = {}
        self._fake_state: dict[int, dict[str, torch.Tensor]] = {}
        self._cleanup_hooks: list[Callable[[], None]] = []
        self._free_strides: list[tuple[Source, int, Any]] = []
        self._compiled = False

    # ------------------------------------------------------------------ tracers

    @property
    def current_tracer(self) -> SubgraphTracer:
        """The innermost open tracer (the root when no subtracer is open)."""
        return self._tracers[-1]

    def _push_tracer(self, tracer: SubgraphTracer) -> None:
        self._tracers.append(tracer)

    def _pop_tracer(self, tracer: SubgraphTracer) -> None:
        if self._tracers[-1] is not tracer:
            raise SubgraphError("subtracers must be closed innermost first")
        self._tracers.pop()

    # ------------------------------------------------------------------ inputs

    @shielded
    def create_graph_input(
        self,
        source: Source,
        value: Any,
        *,
        dynamic_dims: Iterable[int] = (),
        dim_ranges: Mapping[int, tuple[int | None, int | None]] | None = None,
        static: bool = False,
    ) -> torch.fx.Proxy:
        """The placeholder proxy for ``value`` found at ``source`` (the same one for an equal
        source).

        * A tensor becomes a fake tensor; dims in ``dynamic_dims`` become SymInts, and each new
          symbol gets its own placeholder bound to ``source.size()[d]``. A ``TENSOR_MATCH``
          guard records the tensor's properties (dynamic dims left free). A dynamic dim with
          bounds in ``dim_ranges`` (``(min, max)``, either None for unbounded) gets a symbol
          of its own whose range, and so its guards, lie within them
          (:class:`GraphInputError` if the tensor's size does not).
        * A Python ``int`` becomes a SymInt placeholder (the graph does not specialise on it);
          a ``TYPE_MATCH`` guard records that it is an int.
        * Anything else (float, bool, …) becomes a plain placeholder whose example value is
          the value itself.

        ``static`` marks a tensor that is module state (a parameter or buffer, which keeps its
        storage between calls): backends that replay graphs (CUDA graphs) read it in place
        instead of copying it, and its in-place updates (BatchNorm's running statistics) stay
        in the graph.
        """
        existing = self._inputs.get(source)
        if existing is not None:
            return existing.proxy
        self._check_not_compiled()
        # (while a subtracer is open, the input is still the root graph's: a use inside the
        # child lifts it, as any value of an enclosing graph — a module's parameter that a
        # frontend first reads inside the body of a higher-order operation)
        if isinstance(value, torch.Tensor):
            dims = frozenset(dynamic_dims)
            bad = [d for d in dims if not -value.dim() <= d < value.dim()]
            if bad:
                raise GraphInputError(
                    f"dynamic_dims {sorted(bad)} out of range for {source} with {value.dim()} dims"
                )
            return self._tensor_input(source, value, dims, static, dim_ranges)
        if type(value) is int:
            fake = fake_symint(self.fake_mode, value, source)
            symbol = fake.node.expr if isinstance(fake, torch.SymInt) else None
            self.guards.add(Guard(GuardKind.TYPE_MATCH, source, int))
            return self._add_input(source, value, fake, "symint", symbol=symbol)
        return self._add_input(source, value, value, "value")

    @shielded
    def create_derived_input(
        self, source: Source, example: torch.Tensor, fake: Any
    ) -> torch.fx.Proxy:
        """The placeholder proxy for a tensor the caller makes from other graph inputs before
        each call (found at ``source``; ``example`` is the one made for this trace).

        ``fake`` is its fake value, made by the caller from those inputs' fakes, so its sizes
        are expressions of their symbols. It gets no guard of its own: its properties follow
        from the guards of the inputs it is made from.
        """
        self._check_not_compiled()
        if self.current_tracer is not self.root:
            raise GraphInputError("graph inputs belong to the root graph")
        if source in self._inputs:
            raise GraphInputError(f"{source} is a graph input already")
        dims = frozenset(d for d in range(fake.dim()) if _is_symbolic(fake.shape[d]))
        return self._add_input(source, example, fake, "tensor", dynamic_dims=dims)

    def _tensor_input(
        self,
        source: Source,
        value: torch.Tensor,
        dims: frozenset[int],
        static: bool = False,
        ranges: Mapping[int, tuple[int | None, int | None]] | None = None,
    ) -> torch.fx.Proxy:
        memo = self._fake_by_id.get(id(value))
        if memo is not None and memo[0] is value:
            fake, free = memo[1], memo[2]
        elif dims:
            fake, free = fake_dynamic(self.fake_mode, value, source, dims, ranges)
        else:
            fake, free = fake_static(self.fake_mode, value), frozenset()
        self._fake_by_id[id(value)] = (value, fake, free)
        spec = TensorSpec.of(value, free)
        if free:  # a stride is free exactly where the fake's stride is symbolic
            strides = tuple(
                None if _is_symbolic(fake.stride(d)) else st for d, st in enumerate(value.stride())
            )
            spec = dataclasses.replace(spec, stride=strides)
        for d, stride in enumerate(spec.stride):
            if stride is None:  # free in the spec: guarded as an expression of the sizes
                self._free_strides.append((source, d, fake.stride(d)))
        for d in sorted(free):
            size = fake.shape[d]
            symbol = size.node.expr
            if isinstance(symbol, sympy.Symbol) and symbol not in self.root._bound_symbols:
                self._add_input(
                    TensorPropertySource(source, "size", d),
                    int(value.shape[d]),
                    size,
                    "symint",
                    symbol=symbol,
                )
        self.guards.add(Guard(GuardKind.TENSOR_MATCH, source, spec))
        proxy = self._add_input(source, value, fake, "tensor", dynamic_dims=free, static=static)
        if spec.static:
            # the guard fixes every size and stride: a backend may skip checking them again
            proxy.node.meta["layout_guarded"] = True
        return proxy

    def _add_input(
        self,
        source: Source,
        value: Any,
        fake: Any,
        kind: str,
        *,
        symbol: sympy.Symbol | None = None,
        dynamic_dims: frozenset[int] = frozenset(),
        static: bool = False,
    ) -> torch.fx.Proxy:
        from sapwood_graph.tracer import _Proxy

        taken = {n.name for n in self.root.graph.nodes}
        node = self.root._placeholder(unique(source_stem(source), taken), fake)
        node.meta["source"] = source
        if static:
            node.meta["static_input"] = True
        proxy = _Proxy(node, self.root)
        graph_input = GraphInput(source, proxy, value, kind, dynamic_dims, symbol, static)
        self._inputs[source] = graph_input
        self._input_by_node[node] = graph_input
        if symbol is not None:
            self.root._bound_symbols.setdefault(symbol, proxy)
        return proxy

    @property
    def graph_inputs(self) -> list[GraphInput]:
        """The root graph's inputs in placeholder order."""
        return [
            self._input_by_node[n]
            for n in self.root.graph.nodes
            if n.op == "placeholder" and n in self._input_by_node
        ]

    def input_for(self, source: Source) -> GraphInput | None:
        """The input created for ``source``, if any."""
        return self._inputs.get(source)

    # ------------------------------------------------------------------ attributes

    @property
    def attributes(self) -> Mapping[str, Any]:
        """Installed attributes by qualified name (parameters, buffers, constants, modules,
        subgraphs)."""
        return self._attrs

    def install_attribute(
        self, value: Any, *, source: Source | None = None, name_hint: str | None = None
    ) -> str:
        """Install a parameter, buffer, constant tensor or module; return its qualified name.

        The same object always gets the same name. The name comes from ``source``
        (``L['self'].fc.weight`` → ``self_fc_weight``), else ``name_hint``, else its kind.
        """
        known = self._attr_name_by_id.get(id(value))
        if known is not None and self._attrs[known] is value:
            return known
        self._check_not_compiled()
        if source is not None:
            stem = source_stem(source)
        elif name_hint:
            stem = name_hint
        elif isinstance(value, torch.nn.Parameter):
            stem = "parameter"
        elif isinstance(value, torch.Tensor):
            stem = "constant"
        elif isinstance(value, torch.nn.Module):
            stem = type(value).__name__.lower()
        else:
            stem = "attribute"
        name = unique(stem, self._attrs)
        self._attrs[name] = value
        self._attr_name_by_id[id(value)] = name
        return name

    def _install_subgraph(self, name: str, graph_module: torch.fx.GraphModule) -> str:
        key = _passes.fingerprint(graph_module)
        known = self._subgraph_by_fingerprint.get(key)
        if known is not None:
            return known
        qualname = self.install_attribute(graph_module, name_hint=name)
        self._subgraph_by_fingerprint[key] = qualname
        return qualname

    def _fake_module_state(self, module: torch.nn.Module) -> dict[str, torch.Tensor]:
        state = self._fake_state.get(id(module))
        if state is None:
            state = {
                name: fake_static(self.fake_mode, t)
                for name, t in [
                    *module.named_parameters(remove_duplicate=False),
                    *module.named_buffers(remove_duplicate=False),
                ]
            }
            self._fake_state[id(module)] = state
        return state

    def _graph_module(self, graph: torch.fx.Graph, class_name: str) -> torch.fx.GraphModule:
        used = {
            str(n.target): self._attrs[str(n.target)]
            for n in graph.nodes
            if n.op in ("get_attr", "call_module")
        }
        return torch.fx.GraphModule(used, graph, class_name=_class_name(class_name))

    # ------------------------------------------------------------------ guards and hooks

    def add_guard(self, guard: Guard) -> None:
        """Record a guard (duplicates are ignored)."""
        self.guards.add(guard)

    @shielded
    def shape_guards(self) -> list[Guard]:
        """The ShapeEnv's assumptions so far, as ``SHAPE`` guards over sources."""
        return produce_shape_guards(self.shape_env, self._free_strides)

    def add_cleanup_hook(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` on :meth:`cleanup` (or when the ``with`` block ends, errors included).

        Typical hooks undo state a frontend changed while tracing (grad mode, a patched
        attribute); compiling does not run them, so a frontend decides when tracing is over.
        """
        self._cleanup_hooks.append(hook)

    def cleanup(self) -> None:
        """Run the cleanup hooks, last registered first, each exactly once."""
        while self._cleanup_hooks:
            self._cleanup_hooks.pop()()

    def release(self) -> None:
        """Drop every reference this graph holds to the real values it was traced with.

        Call it when the frontend is done with the graph (after :meth:`compile` and after
        reading :attr:`graph_inputs`): the example inputs, the real tensors behind the fake
        ones and the installed attributes are let go, so a traced call's arguments die as soon
        as their caller drops them (the graph objects form reference cycles that only the
        cyclic garbage collector would free). What a compiled graph needs lives in its
        ``GraphModule``. After ``release()`` the graph lists no inputs and accepts no nodes.
        """
        self._compiled = True
        self._inputs.clear()
        self._input_by_node.clear()
        self._attrs.clear()
        self._attr_name_by_id.clear()
        self._subgraph_by_fingerprint.clear()
        self._fake_by_id.clear()
        self._fake_state.clear()
        self._free_strides.clear()

    def __enter__(self) -> OutputGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def _check_not_compiled(self) -> None:
        if self._compiled:
            raise GraphError(f"graph {self.name!r} is already compiled; start a new OutputGraph")

    # ------------------------------------------------------------------ compile

    def compile(
        self, outputs: Any, backend: Backend, *, backend_name: str | None = None
    ) -> CompiledGraph:
        """Finish the graph with ``outputs`` and hand it to ``backend``.

        ``outputs`` is any nesting of tuples, lists, dicts and namedtuples whose leaves are
        root proxies or constants. Then: dead-code elimination (side-effecting ops stay),
        removal of unused inputs (those binding used symbols stay), merging of inputs that are
        the same tensor (with an ``ALIAS_MATCH`` guard), and one call of
        ``backend(gm, example_inputs)``. A backend exception becomes
        :class:`~sapwood_graph.BackendCompilerFailed`.
        """
        gm, inputs, spec = self._finish(outputs)
        name = backend_name or getattr(backend, "__name__", None) or type(backend).__name__
        try:
            fn = backend(gm, self._backend_examples(inputs))
        except Exception as exc:
            raise BackendCompilerFailed(name, exc) from exc
        # A backend may add assumptions of its own to the ShapeEnv while compiling (Inductor
        # bounds sizes, specialises where a kernel needs it): they are guards too.
        self.guards.update(self.shape_guards())
        if not callable(fn):
            raise BackendCompilerFailed(
                name, TypeError(f"backend returned {type(fn).__name__}, not a callable")
            )
        return CompiledGraph(
            fn=fn,
            input_sources=tuple(i.source for i in inputs),
            output_spec=spec,
            graph_module=gm,
            guards=GuardSet(self.guards),
            backend_name=name,
        )

    def _backend_examples(self, inputs: list[GraphInput]) -> list[Any]:
        # A graph with symbols gets the fake values (FakeTensors with SymInt sizes, SymInts),
        # so a compiling backend sees what is symbolic and shares this graph's ShapeEnv; a
        # static graph gets the real values.
        if any(i.kind == "symint" or i.dynamic_dims for i in inputs):
            return [i.fake for i in inputs]
        return [i.example for i in inputs]

    @shielded
    def _finish(self, outputs: Any) -> tuple[torch.fx.GraphModule, list[GraphInput], OutputSpec]:
        # Everything compile does before the backend: output node, passes, guards, the module.
        self._check_not_compiled()
        if self.current_tracer is not self.root:
            raise SubgraphError("close every subtracer before compiling")
        leaves, treespec = pytree.tree_flatten(outputs)
        graph_outputs: list[torch.fx.Node] = []
        plan: list[int | _Constant] = []
        for leaf in leaves:
            if isinstance(leaf, torch.fx.Proxy):
                if not self.root.owns(leaf):
                    raise SubgraphError(
                        f"output {leaf.node.name!r} belongs to a subtracer, not the root graph"
                    )
                plan.append(len(graph_outputs))
                graph_outputs.append(leaf.node)
            else:
                plan.append(_Constant(leaf))
        graph = self.root.graph
        graph.output(tuple(graph_outputs))
        self.root._has_output = True
        self._compiled = True

        _passes.eliminate_dead_code(graph, self._attrs)
        erased = _passes.remove_unused_inputs(
            graph, lambda n: self._input_by_node[n].symbol if n in self._input_by_node else None
        )
        for node in erased:
            self._input_by_node.pop(node, None)
        merges = _passes.merge_duplicate_inputs(graph, lambda n: self._input_by_node[n].example)
        for kept, merged in merges:
            gone = self._input_by_node.pop(merged)
            self.guards.add(
                Guard(GuardKind.ALIAS_MATCH, gone.source, self._input_by_node[kept].source)
            )
        self.guards.update(self.shape_guards())
        graph.lint()

        inputs = self.graph_inputs
        gm = self._graph_module(graph, self.name)
        return gm, inputs, OutputSpec(treespec, tuple(plan))

    def __repr__(self) -> str:
        return f"<OutputGraph {self.name!r}: {len(self._inputs)} inputs, {len(self._attrs)} attributes>"


def _is_symbolic(value: Any) -> bool:
    return isinstance(value, torch.SymInt) and not value.node.expr.is_number


def _class_name(name: str) -> str:
    words = [w for w in name.replace("-", "_").split("_") if w]
    return "".join(w[:1].upper() + w[1:] for w in words) or "Graph"
