"""Inductor's caches for sapwood's compiles: the warm start torch.compile gets.

Inductor keeps what it compiled on disk, in two caches: AOT autograd's (the forward and
backward graphs of one front-end graph) and the FX graph cache (the generated code of one
graph). A later process compiling the same graph loads the code instead of generating and
compiling it again. Both need the compile to run inside a ``TracingContext`` whose fake mode
has a ``ShapeEnv``: the cache key and the check that an entry applies read the shape guards
there. Without one (a static graph handed over with its real example tensors, as sapwood's
graph library does) Inductor says "Bypassing FX Graph Cache because 'No shape env'" and every
process compiles everything from scratch.

:func:`cacheable_inputs` gives each compile that context:

* a static graph (real example tensors): a fresh fake mode with a ShapeEnv, and the example
  inputs as its fakes with every size static, so nothing becomes symbolic (AOT autograd fakes
  real inputs with symbolic sizes when a ShapeEnv is present; the fakes here are made first,
  static);
* a graph with symbolic sizes (the fakes of its front end's mode): that mode, whose ShapeEnv
  holds the graph's symbols. On a hit, the cache re-checks the entry's shape guards there,
  which adds them to that ShapeEnv, so the front end guards on them as after a compile.

The compile also carries sapwood's cache-key marker
(:func:`~sapwood_backend.input_asserts.cache_key_marker`), so that an entry sapwood's code
generation made is never served to another compiler, nor one of theirs to sapwood.

Left as before (the caches bypassed): a compile already inside a ``TracingContext`` (a graph
from torch.compile, whose front end owns the context and its ShapeEnv), a compile with a
post-grad pass of the user's (the marker would replace it), symbolic inputs with no fake tensor
to find their mode by, and inputs the fake mode cannot copy (a sparse or nested tensor, say).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from .input_asserts import cache_key_marker, user_post_grad_pass

__all__ = ["cacheable_inputs"]

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _fake_inputs(example_inputs: Sequence[Any]) -> tuple[Any, list[Any]] | None:
    """The fake mode to compile in and the inputs to compile on (a static graph's as static
    fakes of a fresh mode with a ShapeEnv), or ``None`` where the compile keeps its inputs
    and runs with no context (see the module docstring)."""
    from torch._guards import TracingContext, detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    if TracingContext.try_get() is not None or user_post_grad_pass():
        return None
    if cache_key_marker() is None:
        return None
    if any(isinstance(value, (FakeTensor, *_SYMBOLIC)) for value in example_inputs):
        # a graph with symbolic sizes comes with the fakes of its front end's mode, whose
        # ShapeEnv holds its symbols: compiled in that mode, a hit's shape guards join them
        shared = detect_fake_mode(list(example_inputs))
        if shared is None or shared.shape_env is None:
            return None
        return shared, list(example_inputs)
    try:
        # (constants of the graph module stay real: the mode converts them when they meet)
        mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
        fakes = [
            mode.from_tensor(value, static_shapes=True)
            if isinstance(value, torch.Tensor)
            else value
            for value in example_inputs
        ]
    except Exception:  # a tensor the mode cannot copy: compile as before, uncached
        return None
    return mode, fakes


@contextlib.contextmanager
def cacheable_inputs(example_inputs: Sequence[Any]) -> Iterator[list[Any]]:
    """The inputs to hand ``compile_fx`` inside this context, where Inductor's caches apply
    (the given inputs unchanged, and no context, where they cannot)."""
    made = _fake_inputs(example_inputs)
    if made is None:
        yield list(example_inputs)
        return
    from torch._guards import TracingContext, tracing
    from torch._inductor import config

    mode, fakes = made
    with tracing(TracingContext(mode)), config.patch(post_grad_custom_post_pass=cache_key_marker()):
        yield fakes
