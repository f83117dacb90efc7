"""A frontend with no bytecode at all: a TorchFunctionMode that records torch calls.

It uses only names from ``sapwood_graph.__all__`` (the graph-building API): the proof that
the interface between a frontend and the graph library is narrow. The same code is shown in
``docs/packages/graph.md``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves, tree_map

import sapwood_graph as sg


class TorchFunctionFrontend(TorchFunctionMode):
    """Runs code eagerly while recording every torch call on known tensors into a graph."""

    def __init__(self) -> None:
        super().__init__()
        self.graph = sg.OutputGraph()
        self._proxies: dict[int, tuple[torch.Tensor, object]] = {}

    def input(self, name: str, tensor: torch.Tensor, dynamic_dims=()) -> torch.Tensor:
        proxy = self.graph.create_graph_input(
            sg.LocalSource(name), tensor, dynamic_dims=dynamic_dims
        )
        self._proxies[id(tensor)] = (tensor, proxy)
        return tensor

    def _proxy_of(self, value):
        entry = self._proxies.get(id(value)) if isinstance(value, torch.Tensor) else None
        return entry[1] if entry is not None and entry[0] is value else value

    def _bind(self, value, proxy) -> None:
        if isinstance(value, torch.Tensor):
            self._proxies[id(value)] = (value, proxy)
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                self._bind(item, proxy[i])

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)  # the mode is off in here: this runs eagerly
        name = getattr(func, "__name__", "")
        mutates = name.endswith("_") or name == "__setitem__"
        if mutates or any(isinstance(v, torch.Tensor) for v in tree_leaves(result)):
            proxy = self.graph.root.call_function(
                func, tree_map(self._proxy_of, args), tree_map(self._proxy_of, kwargs)
            )
            self._bind(result, proxy)
        return result

    def compile(self, result, backend) -> sg.CompiledGraph:
        return self.graph.compile(tree_map(self._proxy_of, result), backend)


def eager_backend(gm, example_inputs):
    return gm.forward


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        h = self.norm(x)
        left, right = self.fc(h).chunk(2, dim=-1)
        out = F.gelu(left) * torch.sigmoid(right)
        out[:, 0] = 0.0  # an in-place write the graph must keep
        return {"out": out, "residual": x[:, :4] + out}


def test_a_torch_function_frontend_builds_a_correct_graph_through_the_public_api():
    block = Block()
    frontend = TorchFunctionFrontend()
    with frontend:
        x = frontend.input("x", torch.randn(5, 8))
        result = block(x)
    compiled = frontend.compile(result, eager_backend)

    fresh = torch.randn(5, 8)
    got = compiled(*compiled.resolve_inputs({"x": fresh}))
    expected = block(fresh)
    torch.testing.assert_close(got["out"], expected["out"])
    torch.testing.assert_close(got["residual"], expected["residual"])


def test_the_frontend_graph_holds_the_modules_parameters_as_attributes():
    block = Block()
    frontend = TorchFunctionFrontend()
    with frontend:
        result = block(frontend.input("x", torch.randn(3, 8)))
    compiled = frontend.compile(result, eager_backend)
    params = {id(p) for p in block.parameters()}
    attrs = [
        getattr(compiled.graph_module, n.target)
        for n in compiled.graph_module.graph.nodes
        if n.op == "get_attr"
    ]
    assert {id(a) for a in attrs} == params
    assert compiled.input_sources == (sg.LocalSource("x"),)


def test_the_frontend_supports_dynamic_batch_sizes():
    block = Block()
    frontend = TorchFunctionFrontend()
    with frontend:
        result = block(frontend.input("x", torch.randn(4, 8), dynamic_dims=[0]))
    compiled = frontend.compile(result, eager_backend)
    fresh = torch.randn(11, 8)
    got = compiled(*compiled.resolve_inputs({"x": fresh}))
    torch.testing.assert_close(got["residual"], block(fresh)["residual"])


def test_the_frontend_uses_only_public_names_of_the_library():
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(TorchFunctionFrontend)))
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "sg"
    }
    assert used and used <= set(sg.__all__)
    # Attributes reached through the graph object are public too (no leading underscore).
    graph_attrs = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr in ("graph", "root")
    }
    assert graph_attrs and not any(name.startswith("_") for name in graph_attrs)
