"""Builtins whose answer depends on the frame that calls them (``locals()``, ``type()`` of a
new class, ``eval``/``exec``/``compile`` of source text, ``warnings.warn``, ...).

Run anywhere else than in the user's frame (at a graph break, from generated code) they would
see the wrong locals, globals, file and line or ``__future__`` flags; the caller then runs the
code eagerly (see :func:`~sapwood_tracer.pymodel.builtins.call_builtin`).
"""

from __future__ import annotations
import __future__

import builtins
import functools
import operator
import sys
import types
import warnings
from typing import Any

from ..values.base import Context, Value
from ..values.containers import DictValue

__all__ = ["reads_callers_frame"]


def reads_callers_frame(tx: Context, fn: Any, args: list[Value], kwargs: dict[str, Value]) -> bool:
    """Builtins whose answer depends on the frame that calls them: run anywhere else (at a
    graph break, from generated code) they would see the wrong locals, globals, file and line
    or ``__future__`` flags."""
    if fn is builtins.locals or fn is builtins.globals or fn in _FRAME_READERS:
        return True
    if fn is builtins.vars or fn is builtins.dir:
        return not args and not kwargs
    if fn is builtins.type:
        # a new class takes ``__module__`` from the calling frame's globals
        return len(args) == 3 and not _names_module(args[2])
    if fn is builtins.eval or fn is builtins.exec:
        if len(args) < 2 and "globals" not in kwargs:
            return True
        # source text compiles with the calling code's ``from __future__`` flags
        source_text = bool(args) and not issubclass(args[0].python_type(), types.CodeType)
        return source_text and _future_flags(tx) != 0
    if fn is builtins.compile:
        inherit = args[4] if len(args) > 4 else kwargs.get("dont_inherit")
        inherits = inherit is None or not (inherit.is_constant() and inherit.as_constant())
        return inherits and _future_flags(tx) != 0
    return False


#: Builtins that read the calling frame whatever their arguments: ``warnings.warn`` takes the
#: file, line, module and warning registry of the frame ``stacklevel`` up.
_FRAME_READERS: frozenset[Any] = frozenset(
    fn
    for fn in (
        sys._getframe,
        getattr(sys, "_getframemodulename", None),
        warnings.warn,
        builtins.breakpoint,
    )
    if fn is not None
)


def _names_module(namespace: Value) -> bool:
    """Whether a class namespace passed to ``type()`` sets ``__module__`` itself."""
    if isinstance(namespace, DictValue):
        return any(
            key.is_constant() and key.as_constant() == "__module__"
            for key, _ in namespace.entries.values()
        )
    return False


def _future_flags(tx: Context) -> int:
    """The ``from __future__`` flags of the code running in the innermost traced frame."""
    frames = tx.frames
    return frames[-1].code.co_flags & _FUTURE_FLAGS if frames else 0


_FUTURE_FLAGS = functools.reduce(
    operator.or_, (getattr(__future__, name).compiler_flag for name in __future__.all_feature_names)
)
