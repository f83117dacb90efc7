"""sapwood-graph: build FX graphs with fake-tensor metadata, symbolic shapes, nested subgraphs
and guard records, then hand them to any ``torch.compile``-style backend.

The graph-building API knows nothing of bytecode; any frontend can use it:

* :class:`OutputGraph` — one per traced region: inputs keyed by :class:`Source`, attributes,
  guards, cleanup hooks, :meth:`OutputGraph.compile`.
* :class:`SubgraphTracer` — records nodes (``meta["example_value"]`` from fake propagation);
  nested tracers lift free variables and symbols automatically.
* Sources, guards, :class:`CompiledGraph` and the errors a frontend handles.
* :func:`split_at_buckets` — a backend wrapper that cuts graphs at data-parallel gradient
  buckets (:class:`BucketPlan`), so gradient all-reduces can overlap the backward.
"""

from sapwood_graph.buckets import BucketPlan, GradientBucket, split_at_buckets
from sapwood_graph.compiled import STAGE_TIMES_META_KEY, Backend, CompiledGraph, OutputSpec
from sapwood_graph.errors import (
    BackendCompilerFailed,
    FakePropagationError,
    GraphError,
    GraphInputError,
    SubgraphError,
)
from sapwood_graph.guards import Guard, GuardKind, GuardSet, TensorSpec
from sapwood_graph.output_graph import GraphInput, OutputGraph
from sapwood_graph.sources import (
    AttrSource,
    ClosureCellSource,
    DefaultArgSource,
    FunctionSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    Source,
    SyntheticSource,
    TensorPropertySource,
    TypeSource,
)
from sapwood_graph.tracer import SubgraphTracer

__version__ = "0.1.0"

__all__ = [
    "STAGE_TIMES_META_KEY",
    "AttrSource",
    "Backend",
    "BackendCompilerFailed",
    "BucketPlan",
    "ClosureCellSource",
    "CompiledGraph",
    "DefaultArgSource",
    "FakePropagationError",
    "FunctionSource",
    "GlobalSource",
    "GradientBucket",
    "GraphError",
    "GraphInput",
    "GraphInputError",
    "Guard",
    "GuardKind",
    "GuardSet",
    "ItemSource",
    "LocalSource",
    "OutputGraph",
    "OutputSpec",
    "Source",
    "SubgraphError",
    "SubgraphTracer",
    "SyntheticSource",
    "TensorPropertySource",
    "TensorSpec",
    "TypeSource",
    "__version__",
    "split_at_buckets",
]
