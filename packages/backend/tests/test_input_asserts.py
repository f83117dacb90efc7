"""Inductor's input size/stride asserts are left out only where the front end checks the same.

Each compile here runs Inductor on the CPU and reads the Python code it generated.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch._inductor.utils import run_and_get_code

import sapwood
import sapwood_backend
from sapwood_backend.input_asserts import guarded_layouts, leaves_out_input_asserts


def _input_asserts(codes: list[str]) -> int:
    return sum(code.count("assert_size_stride(") for code in codes)


def _mlp(depth: int = 6) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(depth)]).eval()


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    sapwood.reset()
    torch._dynamo.reset()
    yield
    sapwood.reset()


def test_a_static_inference_graph_is_generated_without_input_asserts_and_stays_right() -> None:
    model = _mlp()
    x = torch.randn(4, 8)
    compiled = sapwood.compile(model)
    with torch.no_grad():
        out, codes = run_and_get_code(compiled, x)
        torch.testing.assert_close(out, model(x))
        assert codes and _input_asserts(codes) == 0
        # an input laid out otherwise fails sapwood's guard and gets its own graph, so the
        # asserts are not what keeps the answer right
        strided = torch.randn(8, 4).t()
        torch.testing.assert_close(compiled(strided), model(strided))
        half = torch.randn(4, 8, dtype=torch.float64)
        model64 = _mlp().double()
        torch.testing.assert_close(sapwood.compile(model64)(half), model64(half))


def test_a_graph_from_elsewhere_keeps_its_input_asserts() -> None:
    model = _mlp(3)
    x = torch.randn(4, 8)
    gm = torch.fx.symbolic_trace(model)
    assert guarded_layouts(gm, [x]) is None
    with torch.no_grad():
        out, codes = run_and_get_code(
            lambda: sapwood_backend.lookup_backend("inductor")(gm, [x])(x)
        )
    torch.testing.assert_close(out, model(x))
    assert _input_asserts(codes) > 0


def test_symbolic_sizes_keep_the_input_asserts() -> None:
    model = _mlp(3)
    x = torch.randn(4, 8)
    with torch.no_grad():
        out, codes = run_and_get_code(sapwood.compile(model, dynamic=True), x)
    torch.testing.assert_close(out, model(x))
    assert _input_asserts(codes) > 0


def test_code_without_the_asserts_is_keyed_apart_in_inductors_cache() -> None:
    """While a compile leaves the asserts out, Inductor's configuration carries a post-grad
    pass that changes nothing and has a uuid of its own: the FX graph cache key (which holds
    the passes' uuids) differs from a compile that keeps them, so neither is served the
    other's code."""
    from torch._inductor import config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    from sapwood_backend.input_asserts import without_input_asserts

    assert config.post_grad_custom_post_pass is None
    with without_input_asserts():
        marker = config.post_grad_custom_post_pass
        assert isinstance(marker, CustomGraphPass) and marker.uuid()
        graph = torch.fx.symbolic_trace(_mlp(1)).graph
        before = str(graph)
        marker(graph)
        assert str(graph) == before
    assert config.post_grad_custom_post_pass is None


def test_a_users_post_grad_pass_keeps_the_asserts() -> None:
    from torch._inductor import config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    calls = []

    class Counting(CustomGraphPass):
        def __call__(self, graph: torch.fx.Graph) -> None:
            calls.append(graph)

        def uuid(self) -> str:
            return "test: counting pass"

    model = _mlp(3)
    x = torch.randn(4, 8)
    with config.patch(post_grad_custom_post_pass=Counting()), torch.no_grad():
        out, codes = run_and_get_code(lambda: sapwood.compile(model)(x))
    torch.testing.assert_close(out, model(x))
    assert calls and _input_asserts(codes) > 0


def test_the_backward_graph_and_a_changed_input_list_keep_the_asserts() -> None:
    layouts = ((((4, 8), (8, 1))),)
    x = torch.randn(4, 8)
    assert leaves_out_input_asserts(layouts, [x], is_backward=False)
    assert not leaves_out_input_asserts(layouts, [x], is_backward=True)
    assert not leaves_out_input_asserts(layouts, [x, x], is_backward=False)
    assert not leaves_out_input_asserts(layouts, [x.t().contiguous().t()], is_backward=False)
    assert not leaves_out_input_asserts(None, [x], is_backward=False)


def test_training_keeps_the_asserts_of_the_backward_and_matches_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    reference = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    reference.load_state_dict(model.state_dict())
    x = torch.randn(4, 8)

    def step(m: Any) -> torch.Tensor:
        loss = m(x).sum()
        loss.backward()
        return loss

    loss, codes = run_and_get_code(step, sapwood.compile(model))
    expected = step(reference)
    torch.testing.assert_close(loss, expected)
    for ours, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(ours.grad, theirs.grad)
    forward, backward = codes[0], codes[-1]
    assert len(codes) == 2 and _input_asserts([forward]) == 0
    assert _input_asserts([backward]) > 0


def test_parameters_changed_in_place_are_caught_by_the_guards_not_by_the_asserts() -> None:
    """``param.data = ...`` keeps the Parameter object (and every module dict) while changing
    its dtype or strides. With the input asserts left out, only sapwood's guards stand between
    such a change and code specialised on the old layout: each call must match eager."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    model.eval()
    x = torch.randn(3, 8)
    graphs: list[list[str]] = []
    inductor = sapwood_backend.lookup_backend("inductor")

    def counting(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        out, codes = run_and_get_code(lambda: inductor(gm, example_inputs))
        graphs.append(codes)
        return out

    compiled = sapwood.compile(model, backend=counting)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
        weight = model[0].weight
        weight.data = weight.data.t().contiguous().t()  # same sizes, transposed strides
        assert model[0].weight is weight and weight.stride() == (1, 8)
        torch.testing.assert_close(compiled(x), model(x))
        model.double()  # Module._apply sets .data in place: same Parameter objects
        assert model[0].weight is weight and weight.dtype == torch.float64
        torch.testing.assert_close(compiled(x.double()), model(x.double()))
    # one graph per layout, each generated without the input asserts
    assert len(graphs) == 3
    assert all(codes and _input_asserts(codes) == 0 for codes in graphs)
