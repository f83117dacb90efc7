"""``sapwood_backend.compile``: torch.compile's signature over sapwood's tracer.

The signature, the decorator form, argument errors raised before tracing, a backend's failure
reported by name, and the generation signal that tree modes rely on.
"""

from __future__ import annotations

import copy
import inspect

import pytest
import torch

import sapwood_backend

from .models import model_and_input


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    import sapwood_tracer

    sapwood_tracer.reset()


def test_the_signature_is_torch_compiles() -> None:
    """Every parameter of torch.compile's that sapwood takes is in its order, kind and
    default, then sapwood's own keyword-only ones (any torch.compile call is a sapwood.compile
    call). torch's ``backend=None`` means Inductor; ours spells that out."""
    ours = inspect.signature(sapwood_backend.compile).parameters
    theirs = inspect.signature(torch.compile).parameters
    sapwood_only = ["ddp_split"]
    core = [name for name in ours if name not in sapwood_only]
    assert list(ours) == core + sapwood_only
    for name in sapwood_only:
        assert ours[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert name not in theirs, name
    assert [name for name in theirs if name in ours] == core
    assert set(theirs) <= set(ours), "a torch.compile parameter sapwood does not take"
    for name in core:
        assert ours[name].kind == theirs[name].kind, name
        expected = "inductor" if name == "backend" else theirs[name].default
        assert ours[name].default == expected, name


def test_a_module_compiles_with_each_cpu_backend() -> None:
    """One smoke check per backend; the differential suites over models and training live in
    ``integration-tests/cpu/test_end_to_end.py``."""
    import sapwood_tracer

    model, example = model_and_input("mlp")
    model.eval()
    for backend in ("eager", "aot_eager", "inductor"):
        sapwood_tracer.reset()
        compiled = sapwood_backend.compile(model, backend=backend)
        with torch.no_grad():
            torch.testing.assert_close(compiled(example), model(example), rtol=1e-4, atol=1e-4)


def test_decorator_form() -> None:
    @sapwood_backend.compile(backend="eager")
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x + 1).relu() * 2

    x = torch.randn(5)
    torch.testing.assert_close(f(x), (x + 1).relu() * 2)


def test_disable_returns_the_model_itself() -> None:
    model, _ = model_and_input("mlp")
    assert sapwood_backend.compile(model, disable=True) is model


def test_a_backend_that_raises_names_itself_and_chains_the_cause() -> None:
    import sapwood_graph

    def broken_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        raise RuntimeError("codegen exploded")

    compiled = sapwood_backend.compile(lambda x: x.sin() + 1, backend=broken_backend)
    with pytest.raises(sapwood_graph.BackendCompilerFailed, match="broken_backend") as caught:
        compiled(torch.randn(3))
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert "codegen exploded" in str(caught.value.__cause__)


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"backend": "no_such_backend"}, sapwood_backend.UnknownBackendError, "no_such_backend"),
        ({"mode": "turbo"}, sapwood_backend.InvalidModeError, "unknown mode 'turbo'"),
        ({"backend": "eager", "mode": "max-autotune"}, sapwood_backend.InvalidModeError, "only"),
    ],
)
def test_bad_arguments_fail_before_anything_is_traced(
    kwargs: dict, error: type[Exception], pattern: str
) -> None:
    model, _ = model_and_input("mlp")
    with pytest.raises(error, match=pattern):
        sapwood_backend.compile(model, **kwargs)


def test_only_top_level_calls_start_a_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    import sapwood_cudagraph_trees
    from sapwood_backend import entry

    generations: list[int] = []
    monkeypatch.setattr(sapwood_cudagraph_trees, "new_generation", lambda: generations.append(1))
    inner = entry._signal_generations(lambda x: x + 1)

    def outer_fn(x: torch.Tensor) -> torch.Tensor:
        return inner(inner(x))

    outer = entry._signal_generations(outer_fn)
    outer(torch.zeros(1))
    assert len(generations) == 1
    inner(torch.zeros(1))
    assert len(generations) == 2


def test_a_failing_call_does_not_leave_the_depth_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    import sapwood_cudagraph_trees
    from sapwood_backend import entry

    generations: list[int] = []
    monkeypatch.setattr(sapwood_cudagraph_trees, "new_generation", lambda: generations.append(1))

    def fails(x: torch.Tensor) -> torch.Tensor:
        raise ValueError("boom")

    wrapped = entry._signal_generations(fails)
    with pytest.raises(ValueError):
        wrapped(torch.zeros(1))
    with pytest.raises(ValueError):
        wrapped(torch.zeros(1))
    assert len(generations) == 2


def test_a_compiled_module_signals_once_per_top_level_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sapwood_cudagraph_trees
    from sapwood_backend import entry

    generations: list[int] = []
    monkeypatch.setattr(sapwood_cudagraph_trees, "new_generation", lambda: generations.append(1))
    model, example = model_and_input("mlp")
    wrapped = entry._signal_generations(copy.deepcopy(model))
    wrapped(example)
    wrapped(example)
    assert len(generations) == 2


def test_a_tracer_compiled_module_signals_without_module_hooks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sapwood_cudagraph_trees
    import sapwood_tracer
    from sapwood_backend import entry

    generations: list[int] = []
    monkeypatch.setattr(sapwood_cudagraph_trees, "new_generation", lambda: generations.append(1))
    model, example = model_and_input("mlp")
    compiled = sapwood_tracer.compile(model, backend=lambda gm, ex: gm.forward)
    wrapped = entry._signal_generations(compiled)
    for _ in range(3):
        torch.testing.assert_close(wrapped(example), model(example))
    assert len(generations) == 3
    # no hooks: nn.Module's fast call path stays on
    assert not wrapped._forward_hooks and not wrapped._forward_pre_hooks


def test_compile_in_place_keeps_the_module_and_its_keys() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    keys = list(model.state_dict())
    calls: list[int] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> object:
        calls.append(1)
        return gm.forward

    x = torch.randn(5, 3)
    expected = model(x)
    returned = sapwood_backend.compile_in_place(model, backend=backend)
    assert returned is None
    torch.testing.assert_close(model(x), expected)
    assert calls == [1] and list(model.state_dict()) == keys
    outer = torch.nn.Sequential(model, torch.nn.Tanh())  # a parent calls it compiled
    torch.testing.assert_close(outer(x), torch.tanh(expected))
    assert calls == [1]
    model._compiled_call_impl = None  # undone as torch's Module.compile is
    torch.testing.assert_close(model(x), expected)


def test_compile_in_place_runs_the_modules_hooks_and_refuses_non_modules() -> None:
    model = torch.nn.Linear(3, 3)
    seen: list[str] = []
    model.register_forward_pre_hook(lambda m, args: seen.append("pre"))
    model.register_forward_hook(lambda m, args, out: out * 2)
    sapwood_backend.compile_in_place(model, backend="eager")
    x = torch.randn(2, 3)
    torch.testing.assert_close(
        model(x), torch.nn.functional.linear(x, model.weight, model.bias) * 2
    )
    assert seen == ["pre"]
    model.register_full_backward_hook(lambda m, gi, go: None)  # eagerly, no recursion
    torch.testing.assert_close(
        model(x), torch.nn.functional.linear(x, model.weight, model.bias) * 2
    )
    with pytest.raises(TypeError, match=r"nn\.Module"):
        sapwood_backend.compile_in_place(lambda x: x)  # type: ignore[arg-type]


def test_compile_in_place_with_disable_leaves_the_module_alone() -> None:
    model = torch.nn.Linear(2, 2)
    sapwood_backend.compile_in_place(model, disable=True)
    assert model._compiled_call_impl is None


def test_shapes_spec_is_refused_in_words() -> None:
    with pytest.raises(NotImplementedError, match="mark_dynamic"):
        sapwood_backend.compile(lambda x: x, shapes_spec={"x": None})  # type: ignore[arg-type]


def test_options_guards_inputs_reaches_the_tracer_and_combines_with_a_mode() -> None:
    import sapwood_tracer
    from sapwood_tracer.api import cache

    model, x = model_and_input("mlp")
    compiled = sapwood_backend.compile(model, backend="eager", options={"guards": "inputs"})
    torch.testing.assert_close(compiled(x), model(x))
    entries = cache.lookup(type(model).forward.__code__).entries
    assert [e.guard_mode.split()[0] for e in entries] == ["inputs"]
    # the serving recipe: reduce-overhead with the declaration (resolved, not yet traced)
    sapwood_backend.compile(model, mode="reduce-overhead", options={"guards": "inputs"})
    with pytest.raises(ValueError, match="options\\['guards'\\] must be 'all' or 'inputs'"):
        sapwood_backend.compile(model, options={"guards": "frozen"})
    assert "Guard mode" in str(sapwood_tracer.explain(compiled)(x))
