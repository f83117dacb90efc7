"""The public entry points: wrap a boxed callable, mark generations, look at the trees.

Nothing here knows about a tracer or a compiler: a compiler calls :func:`new_generation` at the
start of each top-level invocation, a user may call :func:`mark_step_begin` between steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ._device import DeviceLayer
from ._info import FunctionInfo, NodeInfo, TreeInfo
from ._runtime import MODES, DeviceRuntime, TreeFunction

_runtimes: dict[int, DeviceRuntime] = {}
_layer_factory: dict[int, Callable[[], DeviceLayer]] = {}


class CudaGraphTreeError(RuntimeError):
    """A misuse of the tree runtime's API (bad mode, no such device, ...)."""


def _runtime(device_index: int) -> DeviceRuntime:
    runtime = _runtimes.get(device_index)
    if runtime is None:
        factory = _layer_factory.get(device_index)
        if factory is not None:
            layer = factory()
        else:
            from ._allocator import CudaDeviceLayer, missing_private_apis

            if not torch.cuda.is_available():
                raise CudaGraphTreeError(
                    "cudagraphify needs a CUDA device; torch sees none. Run the model eagerly "
                    "or on a machine with a GPU."
                )
            missing = missing_private_apis()
            if missing:
                raise CudaGraphTreeError(
                    f"this torch build lacks allocator functions the tree runtime needs: {missing}"
                )
            if not 0 <= device_index < torch.cuda.device_count():
                raise CudaGraphTreeError(
                    f"device_index {device_index} is not a CUDA device "
                    f"(this machine has {torch.cuda.device_count()})"
                )
            layer = CudaDeviceLayer(device_index)
        runtime = _runtimes[device_index] = DeviceRuntime(device_index, layer)
    return runtime


def _install_layer(device_index: int, factory: Callable[[], DeviceLayer]) -> None:
    """Use another device layer (the simulated one in tests) for ``device_index``."""
    if device_index in _runtimes:
        _runtimes.pop(device_index).reset()
    _layer_factory[device_index] = factory


def _uninstall_layer(device_index: int) -> None:
    if device_index in _runtimes:
        _runtimes.pop(device_index).reset()
    _layer_factory.pop(device_index, None)


def cudagraphify(
    model: Callable[[list[Any]], Any],
    example_inputs: Sequence[Any],
    static_input_idxs: Sequence[int] = (),
    *,
    device_index: int,
    mode: str,
    stack_traces: Sequence[str | None] | None = None,
    constants: Sequence[torch.Tensor] = (),
    mutated_input_idxs: Sequence[int] = (),
    name: str | None = None,
    max_recordings: int = 8,
    max_static_rerecords: int = 4,
    layout_guarded: bool = False,
    reusable_output_idxs: Sequence[int] = (),
) -> Callable[[list[Any]], list[Any]]:
    """Wrap a boxed callable (``model(list) -> list``) so it runs through the device's tree.

    ``example_inputs`` are used only to check the arguments (their count and the static
    indices); the first real call warms up, the second records, later calls replay.
    ``stack_traces[i]`` is the source line that produced output ``i``; it goes into the error
    raised when a stale output is read. ``constants`` are tensors the model may return as they
    are. ``max_recordings`` caps the graphs kept for this function (least recently used first
    out); a static input that moves more than ``max_static_rerecords`` times makes the function
    run eagerly.

    ``layout_guarded=True`` is a compiler's promise: whenever the non-tensor inputs have the same
    values, every tensor input has the same dtype, shape, strides and device (Inductor's
    compiled graphs, whose callers' guards and generated code fix them). Calls are then keyed
    on the non-tensor inputs alone instead of reading every tensor's metadata on each call.
    Without the promise, each call is keyed on all of it.

    ``reusable_output_idxs`` are outputs the caller keeps away from user code and never
    changes the metadata of (AOT autograd's saved activations, the gradients it hands to
    autograd): a replay returns the same tensor objects for them as the last replay did, once
    those are free, instead of building new ones. An output that shares its storage with an
    output not listed is built anew as usual.
    """
    if mode not in MODES:
        raise CudaGraphTreeError(f"mode must be one of {MODES}, got {mode!r}")
    n = len(example_inputs)
    bad = [i for i in (*static_input_idxs, *mutated_input_idxs) if not 0 <= i < n]
    if bad:
        raise CudaGraphTreeError(f"input indices {bad} are out of range for {n} example inputs")
    negative = [i for i in reusable_output_idxs if i < 0]
    if negative:
        raise CudaGraphTreeError(f"reusable_output_idxs must not be negative, got {negative}")
    if max_recordings < 1:
        raise CudaGraphTreeError("max_recordings must be at least 1")
    label = name or getattr(model, "__name__", None) or type(model).__name__
    fn = TreeFunction(
        _runtime(device_index),
        model,
        static_input_idxs,
        mode,
        stack_traces,
        constants,
        mutated_input_idxs,
        label,
        max_recordings,
        max_static_rerecords,
        value_positions=(
            [i for i, x in enumerate(example_inputs) if not isinstance(x, torch.Tensor)]
            if layout_guarded
            else None
        ),
        reusable_output_idxs=reusable_output_idxs,
    )
    return fn


def mark_step_begin() -> None:
    """Start a new step: outputs of earlier steps may be overwritten from the next call on.

    Reading such an output afterwards raises an error naming the function that produced it.
    Forward outputs (saved activations whose backward has not run) are kept.
    """
    for runtime in _runtimes.values():
        runtime.pending_step = True
        runtime.end_path()


def new_generation() -> None:
    """A compiler's hook at the start of each top-level invocation: end the current paths.

    Outputs still referenced stay valid, with one exception, torch's: when a training step
    ended before this call (every forward call's backward ran), a new step begins, and the
    forward and inference outputs of earlier steps are invalidated at the next call (reading
    one raises an error naming it; gradients stay valid). The next recording starts a new root.
    """
    for runtime in _runtimes.values():
        runtime.end_training_step_if_done()
        runtime.end_path()


def reset() -> None:
    """Free every graph and every pool; outputs still referenced become invalid."""
    for runtime in _runtimes.values():
        runtime.reset()


# ---------------------------------------------------------------------- introspection
def tree_info(device_index: int) -> TreeInfo:
    """A snapshot of the tree of one device (empty when nothing ran there)."""
    runtime = _runtimes.get(device_index)
    if runtime is None:
        return TreeInfo(device_index, (), None)
    nodes = {}
    for node in runtime.tree.nodes():
        nodes[node.id] = NodeInfo(
            id=node.id,
            function=node.function_name,
            mode=node.mode,
            parent=node.parent.id if node.parent is not None else None,
            children=tuple(c.id for c in node.children),
            input_shapes=tuple(
                tuple(part[1]) if isinstance(part[0], torch.dtype) else None
                for part in node.signature
            ),
            recorded_bytes=node.recorded_bytes,
            pool_growth_bytes=node.pool_growth_bytes,
            replays=node.replays,
            reused_outputs=sum(1 for g, _ in node.plan if g in node.handed_groups),
        )
    functions = []
    for ref in runtime.functions:
        fn = ref()
        if fn is None:
            continue
        functions.append(
            FunctionInfo(
                name=fn.name,
                mode=fn.mode,
                warmups=fn.warmups,
                recordings=fn.recordings,
                replays=fn.replays,
                evictions=fn.evictions,
                live_recordings=len(fn.nodes()),
                eager_reason=fn.eager_reason,
                fallbacks=dict(fn.fallbacks),
                recording_seconds=fn.recording_seconds,
            )
        )
    runtime.live.prune()
    return TreeInfo(
        device_index=device_index,
        roots=tuple(r.id for r in runtime.tree.roots),
        current=runtime.tree.current.id if runtime.tree.current is not None else None,
        nodes=nodes,
        functions=tuple(functions),
        live_outputs=runtime.live.count_alive(),
        checkpoint_restores=runtime.pool.restores,
        pool_reserved_bytes=runtime.layer.reserved_bytes(),
    )


def render(device_index: int, fmt: str = "text") -> str:
    """A picture of one device's tree: ``fmt="text"`` (indented) or ``"dot"`` (Graphviz)."""
    from ._render import render_dot, render_text

    info = tree_info(device_index)
    if fmt == "text":
        text = render_text(info)
        if device_index not in _runtimes:
            why = (
                "CUDA is not available on this machine"
                if not torch.cuda.is_available()
                else "no compiled call has run through the trees on this device yet"
            )
            text += f"\n  (no tree: {why})"
        return text
    if fmt == "dot":
        return render_dot(info)
    raise CudaGraphTreeError(f"fmt must be 'text' or 'dot', got {fmt!r}")
