"""Leaving out Inductor's size and stride asserts on graph inputs that the front end checks.

The code Inductor generates asserts the sizes and strides of every graph input on every call
(``assert_size_stride``, 0.3 to 1 µs each on the hosts we measured). A graph that takes a
model's parameters as inputs pays it per parameter: ResNet-50's 268 inputs cost about 100 µs
a call, several percent of a host-bound inference call. Where the front end already checks
each input's exact sizes and strides before every call, the asserts check nothing new.

A front end says so per placeholder with ``meta["layout_guarded"] = True`` (sapwood's graph
library sets it on tensor inputs whose guard fixes every size and stride; symbolic dims never
get it). The asserts are left out of one inner compile only when all of these hold:

* it is a forward or inference graph (a backward graph's inputs are saved activations and
  gradients, which no front-end guard sees);
* every tensor input of the front end's graph is marked, and the inner graph's inputs are the
  front end's inputs in order with the same sizes and strides (AOT autograd's deduplication
  or synthetic bases change them, and then nothing is left out);
* no post-grad pass of the user's is configured (see below);
* this torch's Python wrapper code generator has the method that emits them.

The asserts Inductor writes after extern kernels (cuDNN convolutions and the like) stay: they
check Inductor's own assumptions about layouts it did not choose.

Code without the asserts must never be served from Inductor's caches to a compile that relies
on them (torch.compile's own, say). Every Inductor compile of sapwood's backends therefore
carries a post-grad pass that does nothing and whose ``uuid`` names sapwood's code generation
(:func:`cache_key_marker`, set by :mod:`.compile_cache` around the whole compile, so that AOT
autograd's cache key differs too, and here around the inner compile): its cache entries are
keyed apart from torch.compile's. Where the user configured a post-grad pass of their own,
the asserts stay.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator, Sequence
from typing import Any

import torch

__all__ = [
    "Layout",
    "cache_key_marker",
    "guarded_layouts",
    "leaves_out_input_asserts",
    "user_post_grad_pass",
    "without_input_asserts",
]

#: set while an inner compile that leaves the input asserts out generates its code
_LEAVING_OUT: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "sapwood_leaving_out_input_asserts", default=False
)
_installed: bool | None = None


def _install() -> bool:
    """Wrap the wrapper code generator's input-assert method once (it then does nothing while
    :data:`_LEAVING_OUT` is set, and what it always did otherwise); whether that was possible."""
    global _installed
    if _installed is None:
        _installed = False
        try:
            from torch._inductor.codegen.wrapper import PythonWrapperCodegen
        except Exception:  # another torch layout: the asserts stay
            return False
        original = PythonWrapperCodegen.__dict__.get("codegen_input_size_asserts")
        if callable(original):

            def codegen_input_size_asserts(self: Any) -> Any:
                if _LEAVING_OUT.get():
                    return None
                return original(self)

            codegen_input_size_asserts.__wrapped__ = original  # type: ignore[attr-defined]
            PythonWrapperCodegen.codegen_input_size_asserts = codegen_input_size_asserts
            _installed = True
    return _installed


#: names how sapwood changes Inductor's code (bump it when that changes: old cache entries
#: are then never served)
_CODEGEN_KEY = "sapwood-backend: graph input size/stride asserts may be left out, v2"


@functools.cache
def cache_key_marker() -> Any | None:
    """The do-nothing post-grad pass whose ``uuid`` keys sapwood's compiles apart in
    Inductor's caches (one object; ``None`` where this torch has no custom-pass protocol)."""
    try:
        from torch._inductor.custom_graph_pass import CustomGraphPass
    except Exception:
        return None

    class SapwoodCodegen(CustomGraphPass):  # type: ignore[misc]
        def __call__(self, graph: torch.fx.Graph) -> None:
            return None

        def uuid(self) -> str:
            return _CODEGEN_KEY

    return SapwoodCodegen()


def user_post_grad_pass() -> bool:
    """Whether a post-grad pass other than sapwood's marker is configured."""
    from torch._inductor import config

    configured = config.post_grad_custom_post_pass
    return configured is not None and configured is not cache_key_marker()


Layout = tuple[tuple[int, ...], tuple[int, ...]]


def _layout(value: Any) -> Layout | None:
    """The sizes and strides of a strided tensor whose sizes and strides are all plain ints."""
    if not isinstance(value, torch.Tensor) or value.layout is not torch.strided:
        return None
    shape, stride = tuple(value.shape), tuple(value.stride())
    if not all(type(d) is int for d in (*shape, *stride)):
        return None
    return shape, stride


def guarded_layouts(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> tuple[Layout | None, ...] | None:
    """Per input of ``gm``: the sizes and strides a front-end guard checks before every call
    (``None`` for an input that is not a tensor), or ``None`` overall where some tensor input
    is not checked that way."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return None
    layouts: list[Layout | None] = []
    for node, value in zip(placeholders, example_inputs):
        if not isinstance(value, torch.Tensor):
            layouts.append(None)
            continue
        layout = _layout(value)
        if layout is None or not node.meta.get("layout_guarded"):
            return None
        layouts.append(layout)
    return tuple(layouts)


def leaves_out_input_asserts(
    layouts: Sequence[Layout | None] | None, example_inputs: Sequence[Any], is_backward: bool
) -> bool:
    """Whether an inner compile of ``example_inputs`` may leave the input asserts out, given
    the front end's :func:`guarded_layouts`."""
    if layouts is None or is_backward or len(example_inputs) != len(layouts):
        return False
    for layout, value in zip(layouts, example_inputs):
        if layout is None:
            if isinstance(value, torch.Tensor):
                return False
        elif _layout(value) != layout:
            return False
    return not user_post_grad_pass() and _install()


@contextlib.contextmanager
def without_input_asserts() -> Iterator[None]:
    """Generate the code of the inner compile inside without input asserts, keyed apart in
    the FX graph cache."""
    from torch._inductor import config

    marker = cache_key_marker()
    if marker is None:  # nothing to key the cache entry with: keep the asserts
        yield
        return
    token = _LEAVING_OUT.set(True)
    try:
        with config.patch(post_grad_custom_post_pass=marker):
            yield
    finally:
        _LEAVING_OUT.reset(token)
