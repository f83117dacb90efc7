"""Compile entry points routed to an engine, and a count of what each test compiled.

The upstream tests call ``torch.compile``, ``torch._dynamo.optimize`` and
``optimize_assert``, ``torch._dynamo.reset`` and a few markers (``disable``,
``graph_break``, ``allow_in_graph``, ``mark_dynamic``) and the stand-in for untraceable
code, ``torch._dynamo.testing.unsupported``. :func:`install` replaces them, for
the life of the worker process and *before* the test file is imported (``make_dynamo_test``
and ``standard_test`` bind ``optimize_assert`` and ``reset`` when they are imported):

- engine ``dynamo``: each entry point is Dynamo's own, wrapped only to count the calls;
- engine ``sapwood``: ``torch.compile(fn, backend=cnt, fullgraph=...)`` becomes
  ``sapwood.compile(fn, backend=cnt, fullgraph=...)`` with the same backend object, and so
  on; ``reset`` resets both compilers.

Either way :data:`USAGE` counts the compile requests of the running test (``requests``) and,
under sapwood, the code objects sapwood traced or left to run eagerly (``traced``) and the
frames Dynamo started to compile anyway (``dynamo_frames``): a sapwood run in which Dynamo
compiled something did not test sapwood (an entry point that only Dynamo has, such as
``torch._dynamo.export``).

An argument or entry point that has no sapwood meaning (``guard_fail_fn``,
``torch._dynamo.explain``'s Dynamo-shaped report, ``export``) raises :class:`DynamoOnly`,
which the classifier reports as ``internals``, never as a failure of sapwood.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["USAGE", "DynamoOnly", "Usage", "install"]


class DynamoOnly(Exception):
    """The test used a part of Dynamo that sapwood has no counterpart for."""


@dataclass
class Usage:
    """What the running test asked of the compiler; :meth:`clear` before each test."""

    requests: int = 0
    traced: int = 0
    dynamo_frames: int = 0

    def clear(self) -> None:
        self.requests = self.traced = self.dynamo_frames = 0


USAGE = Usage()

# Arguments of torch._dynamo.optimize that sapwood has no counterpart for.
_DYNAMO_ONLY_ARGUMENTS = ("guard_export_fn", "guard_fail_fn", "guard_filter_fn", "package")


def install(engine: str) -> None:
    """Route the compile entry points to ``engine`` (``sapwood`` or ``dynamo``)."""
    import torch
    import torch._dynamo

    _count_dynamo_frames()
    if engine == "dynamo":
        _install_counting(torch)
    elif engine == "sapwood":
        _install_sapwood(torch)
    else:
        raise ValueError(f"unknown engine {engine!r}")


def _count_dynamo_frames() -> None:
    from torch._dynamo.callback import callback_handler

    def started(*args: Any) -> None:
        USAGE.dynamo_frames += 1

    callback_handler.register_start_callback(started)


def _entry_modules(torch: Any) -> list[Any]:
    """The modules whose globals hold the entry points (``test_case`` calls ``reset`` at
    each ``setUp``; it needs ``expecttest``, without which no upstream file imports)."""
    import torch._dynamo.testing

    modules = [torch._dynamo, torch._dynamo.testing]
    try:
        import torch._dynamo.test_case
    except ImportError:
        return modules
    return [*modules, torch._dynamo.test_case]


def _replace(modules: list[Any], name: str, value: Any) -> None:
    for module in modules:
        if hasattr(module, name):
            setattr(module, name, value)


_depth = [0]


def _counted(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, counting its calls that no other counted entry point made (``torch.compile``
    calls ``torch._dynamo.optimize``: one request)."""

    @functools.wraps(fn)
    def entry(*args: Any, **kwargs: Any) -> Any:
        if not _depth[0]:
            USAGE.requests += 1
        _depth[0] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _depth[0] -= 1

    return entry


def _install_counting(torch: Any) -> None:
    modules = _entry_modules(torch)
    torch.compile = _counted(torch.compile)
    for name in ("optimize", "optimize_assert"):
        _replace(modules, name, _counted(getattr(torch._dynamo, name)))


class _SapwoodRoutes:
    """Dynamo's entry points, each as a call of sapwood's."""

    def __init__(self, torch: Any) -> None:
        import sapwood

        self._torch = torch
        self._sapwood = sapwood
        self._dynamo_reset = torch._dynamo.reset

    def backend(self, backend: Any) -> Any:
        """A backend name sapwood does not register is looked up in Dynamo's registry: the
        backend compiles the graph, it is not the front end under test."""
        if isinstance(backend, str) and backend not in self._sapwood.list_backends():
            from torch._dynamo.backends.registry import lookup_backend

            return lookup_backend(backend)
        return backend

    def compile_with(self, fullgraph: bool, **options: Any) -> Callable[[Any], Any]:
        def apply(target: Any) -> Any:
            USAGE.requests += 1
            return self._sapwood.compile(target, fullgraph=fullgraph, **options)

        return apply

    def compile(
        self,
        model: Any = None,
        *,
        fullgraph: bool = False,
        dynamic: bool | None = None,
        backend: Any = "inductor",
        mode: str | None = None,
        options: dict[str, Any] | None = None,
        disable: bool = False,
    ) -> Any:
        if disable:
            return model if model is not None else (lambda target: target)
        apply = self.compile_with(
            fullgraph,
            dynamic=dynamic,
            backend=self.backend(backend),
            mode=mode,
            options=options,
        )
        return apply if model is None else apply(model)

    def optimize(self, backend: Any = "inductor", *, nopython: bool = False, **kwargs: Any) -> Any:
        used = [k for k in _DYNAMO_ONLY_ARGUMENTS if kwargs.get(k) is not None]
        if used:
            raise DynamoOnly(f"torch._dynamo.optimize({', '.join(used)}=...)")
        if kwargs.get("disable"):
            return lambda target: target
        fullgraph = nopython or bool(kwargs.get("error_on_graph_break"))
        return self.compile_with(
            fullgraph, dynamic=kwargs.get("dynamic"), backend=self.backend(backend)
        )

    def optimize_assert(self, backend: Any = "inductor", **kwargs: Any) -> Any:
        if kwargs.get("export") or kwargs.get("hooks") is not None:
            raise DynamoOnly("torch._dynamo.optimize_assert(export=/hooks=...)")
        return self.compile_with(True, dynamic=kwargs.get("dynamic"), backend=self.backend(backend))

    def reset(self) -> None:
        self._dynamo_reset()
        self._sapwood.reset()

    def disable(self, fn: Any = None, recursive: bool = True, **kwargs: Any) -> Any:
        if fn is None:
            return self._sapwood.disable
        return self._sapwood.disable(fn)

    def mark_dynamic(self, tensor: Any, index: Any, **kwargs: Any) -> None:
        self._sapwood.mark_dynamic(tensor, index)

    def mark_static(self, tensor: Any, index: Any = None) -> None:
        if not isinstance(tensor, self._torch.Tensor):
            raise DynamoOnly("torch._dynamo.mark_static on a module or class")
        self._sapwood.mark_static(tensor, range(tensor.dim()) if index is None else index)

    @staticmethod
    def dynamo_only(what: str) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise DynamoOnly(what)

        return refuse


def _install_sapwood(torch: Any) -> None:
    import torch.compiler
    import torch.export

    from sapwood_tracer.api import events

    routes = _SapwoodRoutes(torch)
    modules = _entry_modules(torch)
    torch.compile = routes.compile
    _replace(modules, "optimize", routes.optimize)
    _replace(modules, "optimize_assert", routes.optimize_assert)
    _replace([*modules, torch.compiler], "reset", routes.reset)
    _replace([torch._dynamo, torch.compiler], "disable", routes.disable)
    _replace([torch._dynamo], "graph_break", routes._sapwood.graph_break)
    # The tests' stand-in for code no compiler can trace is a C builtin that adds two tensors,
    # which sapwood would run on fake tensors and put in the graph: the tests then check
    # breaks that never happen. Marked as not to be compiled, it is the break they mean.
    import torch._dynamo.testing

    stand_in = routes._sapwood.disable(torch._dynamo.testing.unsupported)
    _replace([torch._dynamo.testing, torch._dynamo.eval_frame], "unsupported", stand_in)
    for name in ("allow_in_graph", "disallow_in_graph"):
        _replace([torch._dynamo, torch.compiler], name, getattr(routes._sapwood, name))
    _replace([torch._dynamo], "mark_dynamic", routes.mark_dynamic)
    _replace([torch._dynamo], "mark_static", routes.mark_static)
    for name in ("explain", "export"):
        _replace([torch._dynamo], name, routes.dynamo_only(f"torch._dynamo.{name}"))
    torch.export.export = routes.dynamo_only("torch.export.export")

    def traced(kind: str, data: dict[str, Any]) -> None:
        if kind in ("capture", "skip"):
            USAGE.traced += 1

    events.listen(traced)
