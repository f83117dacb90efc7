"""Modules imported where first used, not when sapwood is imported.

sympy and torch's symbolic-shapes stack (``torch.fx.experimental.symbolic_shapes``,
``torch.utils._sympy``) take about 0.3 s to import, more than the rest of sapwood together;
a program that imports sapwood and never compiles needs neither. A module reads them through
:func:`lazy`::

    if TYPE_CHECKING:
        import sympy
    else:
        sympy = lazy("sympy")

Invariant: the first attribute read imports the module; its names are then copied onto the
stand-in, so later reads are plain attribute reads (no import machinery per use).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["lazy"]


class _LazyModule:
    def __init__(self, name: str) -> None:
        self.__dict__["_lazy_name"] = name

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self.__dict__["_lazy_name"])
        self.__dict__.update(vars(module))
        return getattr(module, attr)  # (a submodule imported later is still found here)

    def __repr__(self) -> str:
        return f"<lazy module {self.__dict__['_lazy_name']!r}>"


def lazy(name: str) -> Any:
    """A stand-in for the module ``name`` that imports it at the first attribute read."""
    return _LazyModule(name)
