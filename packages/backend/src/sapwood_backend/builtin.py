"""The built-in backends: ``eager``, ``aot_eager`` and ``inductor``.

Each follows the torch.compile protocol ``backend(gm, example_inputs) -> callable`` and is
registered under its name when ``sapwood_backend`` is imported.

* ``eager`` runs the captured graph as it is: the reference for everything else.
* ``aot_eager`` sends the graph through AOT autograd (functionalisation, the joint forward and
  backward graph, partitioning) and runs the resulting graphs without code generation. It is
  the fastest way to find out whether a problem lies in AOT autograd or in Inductor.
* ``inductor`` is torch's Inductor with its default settings; modes and options are applied by
  :func:`sapwood_backend.modes.resolve_backend`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from .compile_cache import cacheable_inputs
from .input_asserts import (
    Layout,
    guarded_layouts,
    leaves_out_input_asserts,
    without_input_asserts,
)
from .registry import register_backend
from .stage_times import timed_stages

__all__ = [
    "aot_eager",
    "direct_call",
    "eager",
    "inductor",
    "inductor_with",
    "static_top_level_inputs",
]


@register_backend
def eager(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """Run the graph module's own ``forward``: no compilation at all."""
    return gm.forward


def _boxed_nop(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(gm.forward)


def _returns_sequence(gm: torch.fx.GraphModule) -> bool:
    output = next(node for node in reversed(gm.graph.nodes) if node.op == "output")
    return isinstance(output.args[0], (tuple, list))


def _with_tuple_output(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of ``gm`` whose output is a 1-tuple of its single result.

    AOT autograd only accepts graphs that return a tuple or list (front ends such as sapwood's
    tracer always produce those); graphs from elsewhere, e.g. ``torch.fx.symbolic_trace``,
    may return one value.
    """
    copy = torch.fx.GraphModule(gm, gm.graph.__deepcopy__())
    output = next(node for node in reversed(copy.graph.nodes) if node.op == "output")
    output.args = ((output.args[0],),)
    copy.recompile()
    return copy


@register_backend
def aot_eager(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """AOT autograd's forward and backward graphs, run without code generation."""
    from torch._functorch.aot_autograd import aot_module_simplified

    single = not _returns_sequence(gm)
    with timed_stages(gm):
        compiled = aot_module_simplified(
            _with_tuple_output(gm) if single else gm,
            list(example_inputs),
            fw_compiler=_boxed_nop,
            bw_compiler=_boxed_nop,
            inference_compiler=_boxed_nop,
            keep_inference_input_mutations=True,
        )
    if not single:
        return compiled

    def run_single_output(*args: Any) -> Any:
        return compiled(*args)[0]

    return run_single_output


def direct_call(compiled: Callable[..., Any]) -> Callable[..., Any]:
    """``compiled`` without the ``torch._dynamo.disable`` wrapper AOT autograd puts around it,
    whenever torch's frame hook is off at the call.

    The wrapper exists so that torch.compile does not trace into a compiled graph: around each
    call it sets torch's frame-evaluation callback to none and restores the one before. Where
    no callback is set (sapwood installs none; its compiled functions are plain Python) that is
    three switches to the state already in force, paid on every call of every graph; where one
    is set (the call runs inside a torch.compile'd function), the wrapper runs as before.
    """
    inner = getattr(compiled, "_torchdynamo_orig_callable", None)
    if (
        inner is None
        or getattr(compiled, "_torchdynamo_disable", False) is not True
        # the wrapper itself, not a function that copied its attributes (functools.wraps)
        or getattr(compiled, "_torchdynamo_wrapper_id", None) != id(compiled)
    ):
        return compiled
    callback = torch._C._dynamo.eval_frame.get_eval_frame_callback

    def call(*args: Any) -> Any:
        if callback() is None:
            return inner(*args)
        return compiled(*args)

    call.__wrapped__ = compiled  # type: ignore[attr-defined]
    return call


def static_top_level_inputs(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> frozenset[int]:
    """Indices of the graph's inputs that hold module state: parameters and buffers.

    A front end that passes parameters as graph inputs (sapwood's tracer and torch's both do)
    loses the distinction AOT autograd draws for lifted attributes, so it is recovered here:
    an ``nn.Parameter``, or a placeholder whose ``meta["static_input"]`` a front end set (for
    buffers). Inductor is told (it then skips their per-call alignment checks), and the tree
    runtime does not copy them into a graph's buffers but checks their addresses instead; a
    wrong "static" costs a re-recording there, never a wrong result.
    """
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    static = set()
    for index, value in enumerate(example_inputs):
        hinted = index < len(placeholders) and placeholders[index].meta.get("static_input")
        if isinstance(value, torch.nn.Parameter) or hinted:
            static.add(index)
    return frozenset(static)


def _inner_with_static_inputs(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    top_level_count: int,
    top_level_static: dict[int, tuple[tuple[int, ...], torch.dtype]],
    layouts: tuple[Layout | None, ...] | None = None,
    **kwargs: Any,
) -> Any:
    """``compile_fx_inner`` told which inputs of a forward or inference graph are module state.

    torch's front end tells AOT autograd through metadata of its own; without it Inductor
    treats parameters as ordinary inputs and checks (and copies when misaligned) every one of
    them on every call, a cost per parameter. AOT autograd puts the attributes it lifts first,
    then the front end's inputs in order; an index is passed on only when the tensor there
    still matches the front end's example (a deduplicated input shifts the rest, and then
    nothing is claimed). Inductor itself drops a static input that is not aligned.

    Where the front end checks every input's sizes and strides before each call
    (``layouts``), the code is generated without Inductor's own input asserts (see
    :mod:`.input_asserts`).
    """
    from torch._inductor.compile_fx import compile_fx_inner

    if not kwargs.get("is_backward", False):
        lifted = len(example_inputs) - top_level_count
        static = set(kwargs.get("static_input_idxs") or ())
        for index, (shape, dtype) in top_level_static.items() if lifted >= 0 else ():
            theirs = example_inputs[lifted + index]
            if not isinstance(theirs, torch.Tensor) or theirs.dtype != dtype:
                continue
            dims = tuple(theirs.shape)
            # plain sizes only: comparing symbolic ones would add guards to the graph
            if all(type(d) is int for d in dims) and dims == shape:
                static.add(lifted + index)
        kwargs["static_input_idxs"] = tuple(sorted(static))
    leave_out = leaves_out_input_asserts(layouts, example_inputs, kwargs.get("is_backward", False))
    with without_input_asserts() if leave_out else contextlib.nullcontext():
        return compile_fx_inner(gm, example_inputs, **kwargs)


def inductor_with(config_patches: dict[str, Any] | None = None) -> Callable[..., Any]:
    """An Inductor backend with the given ``torch._inductor.config`` patches applied."""
    patches = dict(config_patches or {})

    def compile_with_inductor(
        gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
    ) -> Callable[..., Any]:
        from torch._inductor.compile_fx import compile_fx

        static = static_top_level_inputs(gm, example_inputs)
        layouts = guarded_layouts(gm, example_inputs)
        extra: dict[str, Any] = {}
        if static or layouts:  # sizes, strides, dtypes only: the code must not keep examples
            extra["inner_compile"] = functools.partial(
                _inner_with_static_inputs,
                top_level_count=len(example_inputs),
                top_level_static={
                    i: (tuple(example_inputs[i].shape), example_inputs[i].dtype)
                    for i in sorted(static)
                    if all(type(d) is int for d in example_inputs[i].shape)
                },
                layouts=layouts,
            )
        with timed_stages(gm), cacheable_inputs(example_inputs) as inputs:
            compiled = compile_fx(gm, inputs, config_patches=patches or None, **extra)
        return direct_call(cast(Callable[..., Any], compiled))

    compile_with_inductor.__name__ = "inductor"
    compile_with_inductor.__qualname__ = "inductor"
    return compile_with_inductor


@register_backend
def inductor(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """torch's Inductor with its default settings (CUDA graphs off, as in mode ``default``)."""
    return inductor_with()(gm, example_inputs)
