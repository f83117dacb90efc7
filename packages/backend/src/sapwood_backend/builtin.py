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

from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from .registry import register_backend

__all__ = ["aot_eager", "eager", "inductor", "inductor_with"]


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


def inductor_with(config_patches: dict[str, Any] | None = None) -> Callable[..., Any]:
    """An Inductor backend with the given ``torch._inductor.config`` patches applied."""
    patches = dict(config_patches or {})

    def compile_with_inductor(
        gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
    ) -> Callable[..., Any]:
        from torch._inductor.compile_fx import compile_fx

        compiled = compile_fx(gm, list(example_inputs), config_patches=patches or None)
        return cast(Callable[..., Any], compiled)

    compile_with_inductor.__name__ = "inductor"
    compile_with_inductor.__qualname__ = "inductor"
    return compile_with_inductor


@register_backend
def inductor(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """torch's Inductor with its default settings (CUDA graphs off, as in mode ``default``)."""
    return inductor_with()(gm, example_inputs)
