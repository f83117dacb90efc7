"""Putting compiled functions on sapwood's CUDA graph tree runtime.

Three ways in, one rule: every compiled forward, backward and inference function is wrapped by
:func:`sapwood_cudagraph_trees.cudagraphify` with the mode it serves, and the inputs that hold
parameters and buffers (the ones AOT autograd lifts in front of the user's inputs) are static.

* :func:`inductor_on_trees` — Inductor with its own CUDA graphs off; Inductor's compiled
  ``current_callable`` of each graph is wrapped after ``compile_fx_inner`` returns it. This is
  the ``reduce-overhead`` and ``max-autotune`` modes.
* the ``cudagraphs`` backend — AOT autograd without code generation, each graph replayed
  through the trees.
* :func:`~sapwood_backend.modes.torch_backend` — the same Inductor-on-trees compiler as a
  backend for ``torch.compile`` (it lives with the modes it validates).

A CPU input that the graph only copies to the GPU is copied just before the graph instead
(:mod:`.host_copies`): a capture cannot copy from pageable host memory, and transformers'
static KV cache makes such a copy on its first call.

Graphs with no CUDA tensor among their inputs are returned unwrapped: there is nothing to
record. Anything else the runtime cannot capture it runs eagerly and records why
(``sapwood_cudagraph_trees.tree_info``).

Inputs a graph writes in place (a static key/value cache, BatchNorm's running statistics, a
tensor the user's code updates with ``add_``) are static too: the recording writes into the
caller's tensor at its own address, which every replay checks; one that moves is recorded
again, and after ``max_static_rerecords`` moves the function runs eagerly, saying why. (The
tree would otherwise copy such an input into a buffer of its own, where the write is lost, so
it refuses them and runs eagerly.)

Outputs that only autograd sees are declared reusable, so the tree runtime hands out the same
tensor objects on every replay instead of building new ones: a forward graph's activations
that AOT autograd saves for the backward (never returned to the user), and every output of a
backward graph (gradients, which autograd takes over by a detached alias). User-visible
outputs are new tensors on every call, as in eager.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from .builtin import direct_call, static_top_level_inputs
from .compile_cache import cacheable_inputs
from .host_copies import hoist_host_copies
from .registry import register_backend
from .stage_times import timed_stages

__all__ = ["cudagraphs", "inductor_on_trees", "mutated_placeholders"]


def _cuda_device_index(example_inputs: Sequence[Any]) -> int | None:
    for value in example_inputs:
        if isinstance(value, torch.Tensor) and value.device.type == "cuda":
            return value.device.index if value.device.index is not None else 0
    return None


def _output_stack_traces(gm: torch.fx.GraphModule) -> list[str | None]:
    """For each output of ``gm``, the user's frames that produced it (a traceback), when known."""
    output = next(node for node in reversed(gm.graph.nodes) if node.op == "output")
    results = output.args[0] if isinstance(output.args[0], (tuple, list)) else [output.args[0]]
    traces: list[str | None] = []
    for result in results:
        trace = result.meta.get("stack_trace") if isinstance(result, torch.fx.Node) else None
        traces.append(trace.rstrip() if trace else None)
    return traces


def _output_count(gm: torch.fx.GraphModule) -> int:
    output = next(node for node in reversed(gm.graph.nodes) if node.op == "output")
    results = output.args[0]
    return len(results) if isinstance(results, (tuple, list)) else 1


def _saved_activation_outputs(num_outputs: int) -> tuple[int, ...]:
    """Indices of a forward graph's outputs that AOT autograd only saves for the backward.

    Read from the metadata AOT autograd keeps in the tracing context while it compiles a
    forward graph; empty when there is none or this torch names it differently (the outputs
    are then simply built anew on every replay).
    """
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None)
    if metadata is None:
        return ()
    try:
        saved = metadata.tensors_saved_for_backwards_slice
    except (AttributeError, AssertionError, TypeError):
        return ()
    return tuple(range(num_outputs)[saved])


def _reusable_outputs(gm: torch.fx.GraphModule, mode: str) -> tuple[int, ...]:
    """Outputs of a graph in ``mode`` that only autograd sees (see the module docstring)."""
    count = _output_count(gm)
    if mode == "backward":
        return tuple(range(count))
    if mode == "forward":
        return _saved_activation_outputs(count)
    return ()


_NOT_SAVED = ("tangents", "bwd_seed", "bwd_base_offset", "bwd_rng_state")


def _backward_static_inputs(
    gm: torch.fx.GraphModule,
    candidates: Sequence[int] | None,
    forward_static: frozenset[int] | None,
) -> set[int]:
    """Which inputs of a backward graph stay at one address from step to step.

    A backward graph takes the values its forward saved, then the tangents. Saved activations
    are outputs of the forward's recording (at the same pool addresses whenever that recording
    replays) and saved parameters are the module's own tensors: both static. A *user input* the
    forward saved (token ids for an embedding's backward, say) is not: each step's batch is a
    new tensor, and a graph that took it as static would be recorded again at every step. AOT
    autograd names a saved forward input ``primals_<k>`` after the forward's ``k``-th input, so
    such a placeholder is static only when that forward input was (``forward_static``; when
    unknown, every saved value is taken as static, which costs re-recordings, never results).
    ``candidates`` are the indices the compiler proposed (all saved values when None).
    """
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    if candidates is None:
        candidates = [
            i for i, node in enumerate(placeholders) if not node.name.startswith(_NOT_SAVED)
        ]
    static = set()
    for i in candidates:
        name = placeholders[i].name if i < len(placeholders) else ""
        if forward_static is not None and name.startswith("primals_"):
            number = name[len("primals_") :]
            if number.isdigit() and int(number) - 1 not in forward_static:
                continue
        static.add(i)
    return static


def mutated_placeholders(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """Indices of ``gm``'s inputs that an operation of the graph writes in place (AOT
    autograd keeps an inference graph's input mutations in the graph as ``copy_`` nodes)."""
    placeholders = {
        node: i for i, node in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")
    }
    written: set[int] = set()
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None:
            continue
        for argument, value in zip(schema.arguments, node.args):
            info = argument.alias_info
            if info is not None and info.is_write and value in placeholders:
                written.add(placeholders[value])
        for name, value in node.kwargs.items():
            argument = next((a for a in schema.arguments if a.name == name), None)
            info = argument.alias_info if argument is not None else None
            if info is not None and info.is_write and value in placeholders:
                written.add(placeholders[value])
    return tuple(sorted(written))


def _tree_mode(*, is_backward: bool, is_inference: bool) -> str:
    if is_backward:
        return "backward"
    return "inference" if is_inference else "forward"


def _inner_compile_on_trees(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    top_level_inputs: int,
    top_level_static: frozenset[int],
    forward_static: dict[str, frozenset[int]],
    **kwargs: Any,
) -> Any:
    """``compile_fx_inner`` with Inductor's CUDA graphs off, its result put on the trees.

    ``forward_static`` is shared by the forward and backward compilations of one graph: the
    forward leaves its static input indices there for the backward to read."""
    from torch._inductor.compile_fx import compile_fx_inner

    from sapwood_cudagraph_trees import cudagraphify

    compiled = compile_fx_inner(gm, example_inputs, **kwargs)
    device_index = _cuda_device_index(example_inputs)
    run = getattr(compiled, "current_callable", None)
    if device_index is None or run is None:
        return compiled
    is_backward = bool(kwargs.get("is_backward", False))
    static = set(kwargs.get("static_input_idxs") or ())
    mutated = tuple(getattr(compiled, "mutated_input_idxs", ()) or ())
    if is_backward:
        static = _backward_static_inputs(gm, sorted(static), forward_static.get("forward"))
    else:
        # Forward graphs take AOT autograd's lifted attributes first, then the top-level inputs.
        lifted = len(example_inputs) - top_level_inputs
        static |= {lifted + index for index in top_level_static if lifted >= 0}
        if not kwargs.get("is_inference", False):
            forward_static["forward"] = frozenset(static)
    static |= set(mutated)  # written in place at the caller's address (module docstring)
    mode = _tree_mode(is_backward=is_backward, is_inference=bool(kwargs.get("is_inference", False)))
    compiled.current_callable = cudagraphify(  # type: ignore[attr-defined]
        run,
        example_inputs,
        tuple(sorted(static)),
        device_index=device_index,
        mode=mode,
        stack_traces=_output_stack_traces(gm),
        mutated_input_idxs=mutated,
        name=gm.__class__.__name__,
        # Inductor's code is specialised to the example layouts (its callers' guards and AOT
        # autograd's tangent coercion keep them), so the trees key calls on non-tensor inputs
        layout_guarded=True,
        reusable_output_idxs=_reusable_outputs(gm, mode),
    )
    return compiled


def inductor_on_trees(config_patches: dict[str, Any] | None = None) -> Callable[..., Any]:
    """An Inductor backend whose compiled graphs replay through sapwood's tree runtime."""
    patches = {**(config_patches or {}), "triton.cudagraphs": False}

    def inductor_reduce_overhead(
        gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
    ) -> Callable[..., Any]:
        from torch._functorch import config as functorch_config
        from torch._inductor.compile_fx import compile_fx

        original = gm  # (where the stage times are noted for the front end)
        hoisted = hoist_host_copies(gm, example_inputs)
        if hoisted is not None:
            gm, example_inputs = hoisted.gm, hoisted.example_inputs
        inner = functools.partial(
            _inner_compile_on_trees,
            top_level_inputs=len(example_inputs),
            top_level_static=static_top_level_inputs(gm, example_inputs),
            forward_static={},
        )
        # AOT autograd's cache hands back compiled graphs without calling ``inner_compile``:
        # a hit would skip the trees and run Inductor's code with no CUDA graph at all
        # (Inductor's FX graph cache still applies: the inner compile runs on a hit there)
        with (
            timed_stages(original),
            functorch_config.patch(enable_autograd_cache=False),
            cacheable_inputs(example_inputs) as inputs,
        ):
            compiled = compile_fx(gm, inputs, inner_compile=inner, config_patches=patches)
        run = direct_call(cast(Callable[..., Any], compiled))
        return run if hoisted is None else hoisted.wrap(run)

    return inductor_reduce_overhead


@register_backend
def cudagraphs(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """AOT autograd with no code generation, each graph replayed through sapwood's trees."""
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

    from sapwood_cudagraph_trees import cudagraphify

    hoisted = hoist_host_copies(gm, example_inputs)
    if hoisted is not None:
        with timed_stages(gm):
            return hoisted.wrap(cudagraphs(hoisted.gm, hoisted.example_inputs))
    user_input_count = len(example_inputs)
    top_level_static = static_top_level_inputs(gm, example_inputs)
    device_index = _cuda_device_index(example_inputs)
    if device_index is None:
        from .builtin import aot_eager

        return aot_eager(gm, example_inputs)

    forward_static: dict[str, frozenset[int]] = {}

    def wrap(mode: str) -> Callable[..., Any]:
        def compile_graph(aot_gm: torch.fx.GraphModule, aot_inputs: Sequence[Any]) -> Any:
            if mode == "backward":
                static = _backward_static_inputs(aot_gm, None, forward_static.get("forward"))
            else:
                lifted = max(len(aot_inputs) - user_input_count, 0)
                static = set(range(lifted)) | {lifted + i for i in top_level_static}
                if mode == "forward":
                    forward_static["forward"] = frozenset(static)
            mutated = mutated_placeholders(aot_gm)
            static |= set(mutated)
            boxed = make_boxed_func(aot_gm.forward)
            wrapped = cudagraphify(
                boxed,
                aot_inputs,
                tuple(sorted(static)),
                device_index=device_index,
                mode=mode,
                mutated_input_idxs=mutated,
                stack_traces=_output_stack_traces(aot_gm),
                name=f"{mode} graph",
                reusable_output_idxs=_reusable_outputs(aot_gm, mode),
            )
            wrapped._boxed_call = True  # type: ignore[attr-defined]
            return wrapped

        return compile_graph

    with timed_stages(gm):
        return aot_module_simplified(
            gm,
            list(example_inputs),
            fw_compiler=wrap("forward"),
            bw_compiler=wrap("backward"),
            inference_compiler=wrap("inference"),
            keep_inference_input_mutations=True,
        )
