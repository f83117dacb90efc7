"""unittest's own assertion methods run outside the compiled region.

The conformance run compiles a test's body, not unittest. For the duration of a compiled
run, every ``TestCase`` method named ``assert*`` or ``fail*``, and ``subTest``, is replaced
by the engine's ``disable`` of it. Those that hand back a context manager
(``assertRaises``, ``assertWarns``, ``assertLogs``, ``subTest``, ...) hand back a
:class:`UnittestContext` instead, whose ``__enter__`` and ``__exit__`` are disabled too, so
a ``with self.assertRaises(...)`` block compiles its body and checks the exception eagerly.

The set of methods is the same for every engine; only ``disable`` differs. The qualified
names of the wrappers are registered in :data:`engines.HARNESS_QUALNAMES`, so the graph
breaks they cause are not reported as the test's.
"""

from __future__ import annotations

import contextlib
import functools
import types
import unittest
from collections.abc import Callable, Iterator
from typing import Any

from . import engines

__all__ = ["WRAPPED_METHODS", "assertions_run_eagerly"]

WRAPPED_METHODS: tuple[str, ...] = tuple(
    sorted(
        name
        for name, value in vars(unittest.TestCase).items()
        if isinstance(value, types.FunctionType)
        and (name.startswith(("assert", "fail")) or name == "subTest")
    )
)
_CONTEXT_QUALNAMES = ("UnittestContext.__enter__", "UnittestContext.__exit__")
engines.HARNESS_QUALNAMES.update(f"TestCase.{name}" for name in WRAPPED_METHODS)
engines.HARNESS_QUALNAMES.update(_CONTEXT_QUALNAMES)


def _context_class(disable: Callable[[Any], Any]) -> type:
    def enter(self: Any) -> Any:
        return self.inner.__enter__()

    def exit(self: Any, *exc_info: Any) -> Any:
        return self.inner.__exit__(*exc_info)

    def init(self: Any, inner: Any) -> None:
        self.inner = inner

    enter.__qualname__, exit.__qualname__ = _CONTEXT_QUALNAMES
    return type(
        "UnittestContext",
        (),
        {"__init__": init, "__enter__": disable(enter), "__exit__": disable(exit)},
    )


def _wrap(method: Callable[..., Any], context: type) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        result = method(*args, **kwargs)
        if hasattr(result, "__enter__") and hasattr(result, "__exit__"):
            return context(result)
        return result

    return call


@contextlib.contextmanager
def assertions_run_eagerly(disable: Callable[[Any], Any]) -> Iterator[None]:
    """Within the block, unittest's assertion methods are ``disable(method)``."""
    context = _context_class(disable)
    saved = {name: unittest.TestCase.__dict__[name] for name in WRAPPED_METHODS}
    try:
        for name, method in saved.items():
            setattr(unittest.TestCase, name, disable(_wrap(method, context)))
        yield
    finally:
        for name, method in saved.items():
            setattr(unittest.TestCase, name, method)
