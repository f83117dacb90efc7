"""sapwood-tracer: a symbolic interpreter of CPython 3.11, 3.12 and 3.13 bytecode that
captures PyTorch programs as FX graphs, guarded and cached per code object, with graph breaks
where it cannot.

Public API:

* :func:`compile` — wrap a function or ``nn.Module``; calls trace on a cache miss.
* :func:`reset` — drop every cache entry.
* :func:`explain` — run once and report graphs, graph breaks (reason, file:line), guards.
* :func:`export` — a module captured whole, as torch.export's ``ExportedProgram``.
* :func:`disable`, :func:`graph_break`, :func:`allow_in_graph`, :func:`disallow_in_graph` —
  tell the tracer what not to trace, where to split, what to keep as one graph node.
* :func:`mark_dynamic` (optionally bounded), :func:`maybe_mark_dynamic`, :func:`mark_static`
  — make a tensor's dim symbolic, or keep it static, whatever ``compile(dynamic=...)`` says
  (:class:`SpecializedDimWarning`: code specialised a marked dim); :func:`mark_static_address` — a tensor that
  keeps its storage (a static key/value cache), read and written in place by CUDA graphs.
* :func:`set_logs` — switch the log topics (graph breaks, recompiles, guards, ...) from code;
  :func:`compile_times` — seconds spent compiling so far, by stage.
* :class:`Unsupported` — a construct the tracer cannot capture (names it and ``file:line``).
* :class:`RecompileLimitWarning` — a function that kept recompiling now runs eagerly;
  :class:`RecompileLimitExceeded` — raised instead under ``fullgraph=True``.
* :class:`TorchConfigWarning` — a changed ``torch._dynamo.config`` value sapwood does not
  implement (warned once per value).
* :class:`StanceNotSupported` — a ``torch.compiler.set_stance`` setting sapwood does not
  implement is in force (compiled calls raise it).
* :class:`UnsupportedPythonWarning` — the running Python's bytecode is unknown; code runs
  eagerly.
* :class:`EagerFallbackWarning` — sapwood's own code failed on a function (a bug), which
  runs eagerly instead.
* :class:`ModeFallbackWarning` — a compiled function ran eagerly because a torch function
  or dispatch mode of the program's was active.
* :class:`CompiledModule` — what :func:`compile` returns for a module;
  :class:`CompiledDDP` — for a ``DistributedDataParallel`` module (DDP eager, model compiled).
"""

from .api.cache import RecompileLimitExceeded, RecompileLimitWarning, reset
from .api.compiled_module import CompiledModule
from .api.distributed import CompiledDDP
from .api.entry import compile
from .api.events import compile_times, set_logs
from .api.explain import BreakReport, ExplainOutput, GraphReport, explain
from .api.export import export
from .api.modes import ModeFallbackWarning
from .api.stance import StanceNotSupported
from .api.torch_config import TorchConfigWarning
from .errors import (
    EagerFallbackWarning,
    SpecializedDimWarning,
    TracerError,
    Unsupported,
    UnsupportedPythonWarning,
)
from .marks import (
    allow_in_graph,
    disable,
    disallow_in_graph,
    graph_break,
    mark_dynamic,
    mark_static,
    mark_static_address,
    maybe_mark_dynamic,
)
from .pinned import pin_modules

__version__ = "0.1.0"

# sapwood's own code keeps the builtins it was imported with (see .pinned)
pin_modules("sapwood_tracer", "sapwood_graph")

__all__ = [
    "BreakReport",
    "CompiledDDP",
    "CompiledModule",
    "EagerFallbackWarning",
    "ExplainOutput",
    "GraphReport",
    "ModeFallbackWarning",
    "RecompileLimitExceeded",
    "RecompileLimitWarning",
    "SpecializedDimWarning",
    "StanceNotSupported",
    "TorchConfigWarning",
    "TracerError",
    "Unsupported",
    "UnsupportedPythonWarning",
    "__version__",
    "allow_in_graph",
    "compile",
    "compile_times",
    "disable",
    "disallow_in_graph",
    "explain",
    "export",
    "graph_break",
    "mark_dynamic",
    "mark_static",
    "mark_static_address",
    "maybe_mark_dynamic",
    "reset",
    "set_logs",
]
