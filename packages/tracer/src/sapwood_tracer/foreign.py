"""Values of libraries sapwood does not depend on: numpy, recognised without importing it.

A program that uses numpy has imported it; a value of its types cannot exist before that, so
``sys.modules`` answers whether a value is one without sapwood ever importing numpy itself.

May import: the standard library only.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["is_numpy_scalar", "numpy_errors_raise"]


def is_numpy_scalar(value: Any) -> bool:
    """Whether ``value`` is a numpy number or bool (``np.int64(3)``, ``np.sqrt(8)``): immutable,
    and its arithmetic is numpy's C code, so it folds like a Python number."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, (np.number, np.bool_))


@contextlib.contextmanager
def numpy_errors_raise(values: Any) -> Iterator[None]:
    """Around a fold of ``values`` at trace time: where one is a numpy scalar, numpy's
    floating-point warnings (overflow, division by zero, invalid) raise FloatingPointError
    instead, which the folds turn into a graph break. Eagerly the program would warn and go
    on; the trace cannot warn on every call, so the operation runs eagerly."""
    np = sys.modules.get("numpy")
    if np is None or not any(is_numpy_scalar(v) for v in values):
        yield
        return
    with np.errstate(all="raise"):
        yield
