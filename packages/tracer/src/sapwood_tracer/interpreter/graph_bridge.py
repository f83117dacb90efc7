"""The tracer's one door into sapwood_graph.

Everything the interpreter records goes through :class:`GraphBridge`: graph inputs (with
their sources), function/method nodes (fake propagation decides the result's value kind),
state-switching nodes (grad mode, autocast) and the final compile. Keeping it in one place
keeps the rest of the interpreter ignorant of FX and of how sapwood_graph spells things.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator
from typing import Any

import torch

from sapwood_graph import (
    CompiledGraph,
    FakePropagationError,
    GuardKind,
    OutputGraph,
    Source,
)

from ..errors import Unsupported
from ..guards.sources import LeafViewSource, ReaderSource
from ..marks import static_address_marked
from ..pymodel.overriding_tensors import drop_aliases, plain_alias, without_subclass_functions
from ..values.base import Context, Value
from ..values.symbolic import number_from_fake
from ..values.tensor_subclasses import (
    check_subclass_input,
    inner_versions,
    subclass_layout,
    written_inner_tensors,
)
from ..values.tensors import TensorValue, graph_error, to_graph_arg, wrap_graph_result
from .leaf_views import MadeLeaf, check_unwritten, make_leaf_source, shares_tensor, view_steps
from .marked_dynamic import specialized_marks, watch_marked_dims, watched_shape_env
from .shape_plan import ShapePlan

__all__ = ["GraphBridge"]

#: Tensor methods that do not mutate and return their receiver itself when there is nothing
#: to convert (same dtype, device, layout or memory format). The fake result tells which case
#: a call is: it is then the receiver's fake tensor itself.
_SELF_WHEN_UNCHANGED = frozenset(
    {
        "to",
        "type",
        "type_as",
        "contiguous",
        "float",
        "double",
        "half",
        "bfloat16",
        "int",
        "long",
        "short",
        "bool",
        "byte",
        "char",
        "cpu",
        "cuda",
    }
)


def _is_module_state(tx: Context, tensor: torch.Tensor, source: Source) -> bool:
    """A parameter, a buffer read as a module attribute, or a tensor marked with
    ``mark_static_address``: storage that stays put."""
    return (
        isinstance(tensor, torch.nn.Parameter)
        or tx.member_stores.get(source) == "_buffers"
        or static_address_marked(tensor)
    )


def _stamp(tx: Context, proxy: Any) -> None:
    """Tag a new node with the user's frames that made it (``meta["stack_trace"]``)."""
    trace = tx.stack_trace()
    if trace:
        proxy.node.meta["stack_trace"] = trace


def _typed_as_target(result: Value, args: list[Value]) -> Value:
    """An in-place operation's result is its target (``p.mul_(2)`` is ``p``): of its type."""
    if isinstance(result, TensorValue):
        for arg in args:
            if isinstance(arg, TensorValue) and arg.fake is result.fake:
                result.input_type = arg.python_type()
                break
    return result


class GraphBridge:
    """Records one trace's graph."""

    def __init__(self, name: str, shape_plan: ShapePlan | None = None) -> None:
        self.og = OutputGraph(name=name, shape_env=watched_shape_env())
        self.shape_plan = shape_plan if shape_plan is not None else ShapePlan()
        self.inputs: dict[int, tuple[torch.Tensor, TensorValue]] = {}
        #: the tensor object of each input value (by the value's id)
        self.input_objects: dict[int, torch.Tensor] = {}
        self.input_order: list[Source] = []
        self.made_leaves: list[MadeLeaf] = []
        #: tensor subclass inputs, with their inner tensors' versions when made
        self.subclass_inputs: list[tuple[TensorValue, tuple[int, ...]]] = []

    def fake_mode(self) -> Any:
        return self.og.fake_mode

    # -- inputs --------------------------------------------------------------------------------
    def tensor_input(self, tx: Context, tensor: torch.Tensor, source: Source) -> TensorValue:
        subclass = type(tensor) not in (torch.Tensor, torch.nn.Parameter) and not isinstance(
            tensor, torch.nn.Buffer if hasattr(torch.nn, "Buffer") else ()
        )
        if subclass:
            subclass = check_subclass_input(tensor)  # (False: a plain one, as its base)
        known = self.inputs.get(id(tensor))
        if known is not None and known[0] is tensor:
            # One tensor reached through two sources: one graph input, and a guard that the
            # two sources still hold the same object.
            value = known[1]
            assert value.input_source is not None
            tx.guard(GuardKind.ALIAS_MATCH, source, value.input_source)
            return value
        try:
            dims = frozenset() if subclass else self.shape_plan.tensor_dims(source, tensor)
            proxy = self.og.create_graph_input(
                source,
                tensor,
                dynamic_dims=dims,
                dim_ranges=self.shape_plan.tensor_ranges(tensor) if dims else None,
                static=_is_module_state(tx, tensor, source),
            )
        except FakePropagationError as exc:
            raise graph_error(exc) from exc
        fake = proxy.node.meta["example_value"]
        if dims:
            watch_marked_dims(self.og.shape_env, tx.location, tensor, fake, source)
        value = TensorValue(proxy, fake, source)
        value.input_type = type(tensor)
        if subclass:  # its inner tensors, guarded; their writes watched (see the module)
            layout = subclass_layout(tensor)
            tx.guard(GuardKind.CONSTANT_MATCH, ReaderSource(source, subclass_layout), layout)
            self.subclass_inputs.append((value, inner_versions(fake)))
        self.inputs[id(tensor)] = (tensor, value)
        self.input_objects[id(value)] = tensor
        self.input_order.append(source)
        return value

    def specialized_marks(self) -> list[tuple[str, int, str | None]]:
        """The ``mark_dynamic`` dims this trace specialised: ``(dim, size, file:line)``."""
        return specialized_marks(self.og.shape_env)

    def input_object(self, value: Value) -> torch.Tensor | None:
        return self.input_objects.get(id(value))

    def input_of(self, value: Value) -> TensorValue | None:
        fake = getattr(value, "fake", None)
        return next((v for _, v in self.inputs.values() if v.fake is fake), None)

    def symint_input(self, tx: Context, value: int, source: Source) -> Value:
        """An int argument traced as a symbol (the shape plan asked for it)."""
        proxy = self.og.create_graph_input(source, value)
        result = number_from_fake(proxy, proxy.node.meta["example_value"])
        result.source = source
        return result

    def view_leaf(self, tx: Context, value: TensorValue) -> None:
        """Make ``value`` (a view of a graph input that does not require grad) a leaf that
        requires grad: from here on it is a graph input the entry makes (see
        :mod:`.leaf_views`), and the same value wherever the trace holds it."""
        placeholder, _ = view_steps(value)
        found = [
            (real, base)
            for real, base in self.inputs.values()
            if base.proxy.node is placeholder and base.input_source is not None
        ]
        if len(found) != 1 or isinstance(found[0][1].input_source, LeafViewSource):
            raise Unsupported("setting requires_grad on a view of a value that is not an input")
        real, base = found[0]
        if base.fake._version != 0:
            raise Unsupported("setting requires_grad on a view of an input the function wrote to")
        if shares_tensor(self.og.root.graph, value):
            raise Unsupported("setting requires_grad on a tensor the trace holds twice")
        source, example, fake = make_leaf_source(value, base, real, self.og.fake_mode)
        proxy = self.og.create_derived_input(source, example, fake)
        self.made_leaves.append(MadeLeaf(base.fake, source))
        value.proxy, value.fake = proxy, fake
        value.input_source = value.source = source

    # -- nodes ----------------------------------------------------------------------------------
    def call_function(
        self, tx: Context, fn: Any, args: list[Value], kwargs: dict[str, Value]
    ) -> Value:
        gargs = tuple(to_graph_arg(tx, a) for a in args)
        gkwargs = {k: to_graph_arg(tx, v) for k, v in kwargs.items()}
        try:
            proxy = self.og.current_tracer.call_function(fn, gargs, gkwargs)
        except FakePropagationError as exc:
            raise graph_error(exc) from exc
        _stamp(tx, proxy)
        self._check_subclass_writes()
        name = getattr(fn, "__name__", str(fn))
        return _typed_as_target(
            wrap_graph_result(tx, proxy, proxy.node.meta["example_value"], name), args
        )

    def _check_subclass_writes(self) -> None:
        for value, versions in self.subclass_inputs:
            if written_inner_tensors(value.fake, versions):
                raise Unsupported(
                    f"writing in place to a tensor subclass input ({value.input_type.__qualname__})"
                )

    def call_method(
        self, tx: Context, name: str, args: list[Value], kwargs: dict[str, Value]
    ) -> Value:
        gargs = tuple(to_graph_arg(tx, a) for a in args)
        gkwargs = {k: to_graph_arg(tx, v) for k, v in kwargs.items()}
        try:
            proxy = self.og.current_tracer.call_method(name, gargs, gkwargs)
        except FakePropagationError as exc:
            raise graph_error(exc) from exc
        _stamp(tx, proxy)
        self._check_subclass_writes()
        fake = proxy.node.meta["example_value"]
        receiver = args[0] if args else None
        if (
            name in _SELF_WHEN_UNCHANGED
            and isinstance(receiver, TensorValue)
            and fake is receiver.fake
            and not proxy.node.users
        ):
            # ``x.to(x.dtype)``, ``x.float()`` on a float tensor, ``x.contiguous()`` on a
            # contiguous one: torch returns ``x`` itself, decided by metadata the guards fix.
            # The node would cost a dispatch per call for nothing; the value is ``x``.
            proxy.node.graph.erase_node(proxy.node)
            return receiver
        return _typed_as_target(wrap_graph_result(tx, proxy, fake, f"Tensor.{name}"), args)

    def symbol_proxy(self, expr: Any) -> Any | None:
        """The graph input bound to the size symbol ``expr`` (no node needed), or None."""
        root = self.og.root
        import sympy  # (at first use: importing sympy with sapwood would cost 0.25 s)

        if isinstance(expr, sympy.Symbol) and expr in root.bound_symbols:
            return root.symbol_proxy(expr)
        return None

    def getitem_proxy(self, proxy: Any, index: int) -> Any:
        return self.og.current_tracer.call_function(operator.getitem, (proxy, index))

    def record_state_call(self, tx: Context, fn: Any, args: tuple[Any, ...]) -> Any:
        """Record a node that switches global state; running it on fakes switches it now."""
        try:
            return self.og.current_tracer.call_function(fn, args)
        except FakePropagationError as exc:
            raise graph_error(exc) from exc

    # -- bodies of higher-order operations -------------------------------------------------------
    @contextlib.contextmanager
    def subgraph(self, name: str) -> Iterator[Any]:
        """Record into a child graph while the block runs (the body of a higher-order
        operation); values of enclosing graphs used in it are lifted. Yields the child."""
        with self.og.current_tracer.subtracer(name) as child:
            yield child

    def call_subgraph(self, tx: Context, op: Any, body: Any, kwargs: dict[str, Any]) -> Value:
        """Record ``op(body, *lifted inputs, **kwargs)`` in the graph that opened ``body`` (a
        child from :meth:`subgraph`, closed, its output set: a tuple of proxies); the value of
        the op's result (a tuple, one item per output)."""
        graph = self.subgraph_attribute(body.name, body.graph_module())
        return self.call_operation(tx, op, (graph, *body.lifted_inputs), kwargs)

    def subgraph_attribute(self, name: str, graph_module: torch.fx.GraphModule) -> Any:
        """A child's graph installed on the current graph: the proxy that reads it."""
        tracer = self.og.current_tracer
        return tracer.get_attr(tracer.install_subgraph(name, graph_module))

    def call_operation(
        self, tx: Context, op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Value:
        """Record ``op(*args, **kwargs)`` (proxies and constants) in the current graph."""
        try:
            proxy = self.og.current_tracer.call_function(op, args, kwargs)
        except FakePropagationError as exc:
            raise graph_error(exc) from exc
        _stamp(tx, proxy)
        return wrap_graph_result(tx, proxy, proxy.node.meta["example_value"], str(op))

    # -- compile ---------------------------------------------------------------------------------
    def compile(self, outputs: list[Any], backend: Any) -> CompiledGraph:
        check_unwritten(self.made_leaves)
        if any(getattr(s, "reader", None) is plain_alias for s in self.input_order):
            backend = without_subclass_functions(backend)  # (see pymodel.overriding_tensors)
            drop_aliases(self.og.root.graph, outputs)
        return self.og.compile(tuple(outputs), backend)

    @property
    def guards(self) -> Any:
        return self.og.guards

    def release(self) -> None:
        """Let go of the real tensors this trace saw (see ``OutputGraph.release``)."""
        self.inputs.clear()
        self.input_objects.clear()
        self.og.release()
