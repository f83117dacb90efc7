"""sapwood: one import for the whole stack.

``sapwood.compile`` has torch.compile's signature and defaults (``backend="inductor"``)::

    import sapwood

    compiled = sapwood.compile(model)                           # Inductor
    compiled = sapwood.compile(model, mode="reduce-overhead")   # + CUDA graph trees
    compiled = sapwood.compile(model, backend="eager")          # capture only
    compiled = sapwood.compile(model, dynamic=True)             # symbolic sizes from the start
    sapwood.compile_in_place(model)                             # model.compile(), same object
    sapwood.mark_dynamic(tokens, 1)                             # or per input and dim
    print(sapwood.explain(model)(tokens))                       # graphs, breaks, guards

The packages underneath can be used on their own: ``sapwood_graph`` (graph building),
``sapwood_tracer`` (bytecode capture), ``sapwood_cudagraph_trees`` (the tree runtime) and
``sapwood_backend`` (backends and modes).
"""

from __future__ import annotations

import sapwood_cudagraph_trees as _trees
import sapwood_tracer as _tracer
from sapwood_backend import (
    compile,
    compile_in_place,
    list_backends,
    load_artifacts,
    register_backend,
    save_artifacts,
)
from sapwood_cudagraph_trees import mark_step_begin
from sapwood_tracer import (
    allow_in_graph,
    disable,
    disallow_in_graph,
    explain,
    export,
    graph_break,
    mark_dynamic,
    mark_static,
    mark_static_address,
    maybe_mark_dynamic,
    set_logs,
)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "allow_in_graph",
    "compile",
    "compile_in_place",
    "compile_times",
    "disable",
    "disallow_in_graph",
    "explain",
    "export",
    "graph_break",
    "list_backends",
    "load_artifacts",
    "mark_dynamic",
    "mark_static",
    "mark_static_address",
    "mark_step_begin",
    "maybe_mark_dynamic",
    "register_backend",
    "reset",
    "save_artifacts",
    "set_logs",
]


def reset() -> None:
    """Forget every compiled entry and free every CUDA graph and its memory pool."""
    _tracer.reset()
    _trees.reset()


def compile_times() -> dict[str, float]:
    """Seconds spent compiling so far in this process, by stage: ``trace``, ``backend`` (of
    which ``aot_autograd`` and ``inductor``), ``entry`` (guards and the generated entry
    code), ``total``, and ``cudagraph_recording`` (recording CUDA graphs in the tree modes,
    at the first calls); ``captures`` counts the captures."""
    import torch

    times = _tracer.compile_times()
    devices = range(torch.cuda.device_count()) if torch.cuda.is_available() else range(0)
    recording = sum(f.recording_seconds for d in devices for f in _trees.tree_info(d).functions)
    if recording:
        times["cudagraph_recording"] = recording
    return times
