"""Inductor's caches serve sapwood's compiles, keyed apart from torch.compile's.

Each test turns the caches on (the suite turns them off) in a fresh cache directory and
compiles on the CPU.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch._dynamo.utils import counters
from torch._inductor.utils import run_and_get_code

import sapwood
import sapwood_backend
from sapwood_backend.compile_cache import cacheable_inputs


def _fresh_cache() -> Any:
    from torch._inductor import utils

    fresh = getattr(utils, "fresh_cache", None) or utils.fresh_inductor_cache
    return fresh()


@pytest.fixture(autouse=True)
def _caches_on() -> Iterator[None]:
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config

    sapwood.reset()
    counters.clear()
    with (
        _fresh_cache(),
        inductor_config.patch(fx_graph_cache=True),
        functorch_config.patch(enable_autograd_cache=True),
    ):
        yield
    sapwood.reset()


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    layers = [torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()) for _ in range(3)]
    return torch.nn.Sequential(*layers).eval()


def _input_asserts(codes: list[str]) -> int:
    return sum(code.count("assert_size_stride(") for code in codes)


def test_a_second_compile_of_a_model_loads_its_code_from_the_caches() -> None:
    model, x = _mlp(), torch.randn(4, 16)
    with torch.no_grad():
        out, codes = run_and_get_code(sapwood.compile(model), x)
        torch.testing.assert_close(out, model(x))
        assert counters["aot_autograd"]["autograd_cache_miss"] == 1
        assert codes and _input_asserts(codes) == 0
        sapwood.reset()  # a new process would start here: only the disk caches are left
        again = sapwood.compile(model)
        torch.testing.assert_close(again(x), model(x))
        assert counters["aot_autograd"]["autograd_cache_hit"] == 1
        # the model's parameters changed in place: the cached code reads them, not copies
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(0.5)
        torch.testing.assert_close(again(x), model(x))


def test_a_training_compile_is_served_from_the_caches_too() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    reference = copy.deepcopy(model)
    x = torch.randn(6, 8)
    for _ in range(2):  # the second compile is a new process's, served from disk
        sapwood.reset()
        compiled = sapwood.compile(model)
        compiled(x).sum().backward()
        reference(x).sum().backward()
        for ours, theirs in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(ours.grad, theirs.grad)
        # the running statistics were updated in place by the graph, as in eager
        torch.testing.assert_close(model[1].running_mean, reference[1].running_mean)
    assert counters["aot_autograd"]["autograd_cache_hit"] == 1


def test_a_graph_with_symbolic_sizes_is_served_from_the_caches_and_stays_guarded() -> None:
    model = _mlp()
    with torch.no_grad():
        for _ in range(2):  # the second compile is a new process's, served from disk
            sapwood.reset()
            compiled = sapwood.compile(model, dynamic=True)
            for rows in (8, 5, 13):
                x = torch.randn(rows, 16)
                torch.testing.assert_close(compiled(x), model(x))
        assert counters["aot_autograd"]["autograd_cache_hit"] == 1
        # one graph served every size; an input of another rank is not one of its calls
        assert counters["aot_autograd"]["total"] == 2
        x3 = torch.randn(2, 3, 16)
        torch.testing.assert_close(compiled(x3), model(x3))


def test_the_compile_sees_static_fakes_so_the_graph_stays_static(monkeypatch) -> None:
    from torch._inductor import compile_fx as inductor

    seen: list[list[Any]] = []
    original = inductor.compile_fx_inner

    def spy(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        seen.append(list(example_inputs))
        return original(gm, example_inputs, **kwargs)

    monkeypatch.setattr(inductor, "compile_fx_inner", spy)
    model, x = _mlp(), torch.randn(4, 16)
    with torch.no_grad():
        torch.testing.assert_close(sapwood.compile(model)(x), model(x))
    assert seen
    for inputs in seen:
        for value in inputs:
            assert isinstance(value, torch.Tensor)
            assert all(type(d) is int for d in (*value.shape, *value.stride())), value


def test_entries_of_sapwoods_code_generation_are_never_served_to_another_compiler() -> None:
    """The same graph compiled by sapwood's backend (input asserts left out) and then the way
    torch.compile's Inductor compiles it: the second is a miss and keeps its asserts."""
    from torch._guards import TracingContext, tracing
    from torch._inductor.compile_fx import compile_fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    model, x = _mlp(), torch.randn(4, 16)
    gm = torch.fx.symbolic_trace(model)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            node.meta["layout_guarded"] = True  # what sapwood's graph library marks
    with torch.no_grad():
        ours = sapwood_backend.lookup_backend("inductor")(copy.deepcopy(gm), [x])
        out, codes = run_and_get_code(ours, x)
        torch.testing.assert_close(out, model(x))
        assert _input_asserts(codes) == 0
        mode = FakeTensorMode(shape_env=ShapeEnv())
        with tracing(TracingContext(mode)):
            fake = mode.from_tensor(x, static_shapes=True)
            theirs, their_codes = run_and_get_code(lambda: compile_fx(copy.deepcopy(gm), [fake]))
    assert counters["aot_autograd"]["autograd_cache_hit"] == 0
    assert counters["inductor"]["fxgraph_cache_hit"] == 0
    assert _input_asserts(their_codes) >= 1
    result = theirs(x)
    torch.testing.assert_close(result[0] if isinstance(result, (tuple, list)) else result, model(x))


def test_inputs_are_left_alone_where_the_caches_cannot_key_the_compile() -> None:
    from torch._guards import TracingContext, tracing
    from torch._inductor import config
    from torch._inductor.custom_graph_pass import CustomGraphPass
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    x = torch.randn(3, 4)
    # a front end's own context (torch.compile's): its inputs and context are kept
    mode = FakeTensorMode(shape_env=ShapeEnv())
    with tracing(TracingContext(mode)):
        fake = mode.from_tensor(x)
        with cacheable_inputs([fake]) as inputs:
            assert inputs[0] is fake
            assert TracingContext.get().fake_mode is mode
    # symbolic inputs with no fake tensor beside them, and a user's post-grad pass: no context
    size = ShapeEnv().create_unbacked_symint()

    class UserPass(CustomGraphPass):  # type: ignore[misc]
        def __call__(self, graph: torch.fx.Graph) -> None:
            return None

        def uuid(self) -> str:
            return "a user's pass"

    for inputs, patch in (([size, x], {}), ([x], {"post_grad_custom_post_pass": UserPass()})):
        with config.patch(patch), cacheable_inputs(inputs) as given:
            assert given == inputs and given[-1] is x
            assert TracingContext.try_get() is None
    # the usual case: static fakes of the real inputs, inside a context with a ShapeEnv
    with cacheable_inputs([x, 3]) as given:
        context = TracingContext.get()
        assert context.fake_mode.shape_env is not None
        assert given[1] == 3 and given[0] is not x and given[0].shape == x.shape
        assert config.post_grad_custom_post_pass is not None
    assert TracingContext.try_get() is None
    assert config.post_grad_custom_post_pass is None
