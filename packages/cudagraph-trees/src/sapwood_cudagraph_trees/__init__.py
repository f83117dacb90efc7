"""sapwood-cudagraph-trees: a CUDA graph tree runtime any compiler can use.

``cudagraphify(model, example_inputs, static_input_idxs, device_index=..., mode=...)`` wraps a
boxed callable (a list in, a list out). All graphs of a device share one memory pool; recording
a new branch restores the allocator's checkpoint of the path it grows from, so a tree of paths
costs the memory of its largest path. See the package README for the rules.
"""

from ._api import (
    CudaGraphTreeError,
    FunctionInfo,
    NodeInfo,
    TreeInfo,
    cudagraphify,
    mark_step_begin,
    new_generation,
    render,
    reset,
    tree_info,
)

__version__ = "0.1.0"

__all__ = [
    "CudaGraphTreeError",
    "FunctionInfo",
    "NodeInfo",
    "TreeInfo",
    "__version__",
    "cudagraphify",
    "mark_step_begin",
    "new_generation",
    "render",
    "reset",
    "tree_info",
]
