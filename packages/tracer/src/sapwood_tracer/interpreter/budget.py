"""How long and how deep one trace may run: the instruction budgets, the depth of inlined
calls, and the codes that overran them.

The interpreter runs Python one instruction at a time, thousands of times slower than
CPython: a loop of a million iterations, eagerly a fraction of a second, would take minutes
to unroll. Two budgets bound the cost of tracing:

* :data:`FRAME_BUDGET`: instructions one frame activation may run itself (callees not
  counted): a long Python loop meets it.
* :data:`TRACE_BUDGET`: instructions of one whole trace, every inlined frame counted: a
  short loop over calls that each run many instructions meets it.

and :data:`MAX_INLINE_DEPTH` bounds how deeply calls are inlined (each inlined frame costs
several of Python's own frames: without it, deep recursion would raise RecursionError
inside the tracer). A recursive function that goes deeper is the cause, like an overrun:
it runs eagerly from then on, so its recursion costs Python one frame per level, as it does
without sapwood, instead of a compiled entry per level.

Invariants:

* A trace that overruns names one frame as the cause (:func:`over_budget`): the frame
  itself for the frame budget; for the trace budget, the innermost frame that ran at least
  half of the trace (it, with its callees, spent the budget).
* The cause's code is remembered (until ``reset()``): it is never traced again. Inlining it
  is a graph break at the call at once, and compiling it on its own runs it eagerly as a
  whole, so a code costs at most one overrun, not one per caller or per recompile.
* When the cause is the root frame, the code runs eagerly as a whole (a graph break in the
  middle of the loop would only move the overrun to the resume function); when it is a
  callee, the root breaks its graph at the call leading to it.
* The reason, with the code's name, reaches ``explain()`` and the ``graph_breaks`` logs like
  any other graph break or eager frame.
"""

from __future__ import annotations

import types
from typing import Protocol

from ..errors import Unsupported

__all__ = [
    "FRAME_BUDGET",
    "MAX_INLINE_DEPTH",
    "TRACE_BUDGET",
    "forget_overruns",
    "over_budget",
    "overrun_reason",
    "python_too_deep",
    "too_deep",
]

#: Instructions one frame activation may run itself before the trace stops.
FRAME_BUDGET = 50_000
#: Instructions one trace (all its frames) may run before it stops.
TRACE_BUDGET = 500_000
#: How many calls deep the trace inlines.
MAX_INLINE_DEPTH = 64

_HINT = (
    "The code runs eagerly from now on (tracing it would cost far more than running it); "
    "move the loop out of the compiled code, or shorten it, to compile it."
)

# code -> why it is not traced any more
_overruns: dict[types.CodeType, str] = {}


class BudgetFrame(Protocol):
    """What the budget reads of a frame."""

    code: types.CodeType
    parent: BudgetFrame | None
    #: the trace's remaining budget when the frame began
    budget_at_entry: int


def over_budget(frame: BudgetFrame, remaining: int, *, own: bool) -> Unsupported:
    """The error that stops a trace that overran while running ``frame``.

    ``own``: ``frame`` itself ran past :data:`FRAME_BUDGET`; otherwise the trace ran past
    :data:`TRACE_BUDGET` (``remaining`` is the trace's budget left, below zero).
    """
    cause = frame
    if own:
        reason = f"a loop in {frame.code.co_qualname} that runs more than {FRAME_BUDGET:,} instructions when traced"
    else:
        root = frame
        while root.parent is not None:
            root = root.parent
        spent = root.budget_at_entry - remaining
        candidate: BudgetFrame | None = frame
        while candidate is not None:
            if candidate.budget_at_entry - remaining >= spent // 2:
                cause = candidate
                break
            candidate = candidate.parent
        reason = (
            f"a call of {cause.code.co_qualname} whose trace runs more than "
            f"{TRACE_BUDGET:,} instructions"
        )
    _overruns.setdefault(cause.code, reason)
    exc = Unsupported(reason, hint=_HINT)
    # the root frame itself overran: no graph break can help, the code runs eagerly whole
    exc.frame_bound = cause.parent is None
    return exc


def too_deep(parent: BudgetFrame, code: types.CodeType) -> Unsupported:
    """The error for inlining ``code`` in ``parent``, which is already
    :data:`MAX_INLINE_DEPTH` calls deep; recursion (``code`` is running further up) makes
    ``code`` the cause: it is not traced again."""
    frame: BudgetFrame | None = parent
    while frame is not None and frame.code is not code:
        frame = frame.parent
    if frame is None:
        return Unsupported(f"calls nested deeper than {MAX_INLINE_DEPTH}")
    reason = (
        f"the recursion of {code.co_qualname}, deeper than {MAX_INLINE_DEPTH} calls when traced"
    )
    _overruns.setdefault(code, reason)
    return Unsupported(reason, hint=_HINT)


def python_too_deep(frame: BudgetFrame) -> Unsupported:
    """The error for Python's recursion limit, met inside the tracer while it ran ``frame``
    (the program was already deep when it called the compiled function). A code running
    twice on the trace's stack is the recursion that got there: it is not traced again."""
    seen: set[types.CodeType] = set()
    recursive = None
    walk: BudgetFrame | None = frame
    while walk is not None:
        if walk.code in seen:
            recursive = walk.code
        seen.add(walk.code)
        walk = walk.parent
    if recursive is None:
        return Unsupported("calls nested deeper than Python's recursion limit lets sapwood trace")
    reason = (
        f"the recursion of {recursive.co_qualname}, deeper than Python's recursion limit "
        "lets sapwood trace"
    )
    _overruns.setdefault(recursive, reason)
    return Unsupported(reason, hint=_HINT)


def overrun_reason(code: types.CodeType) -> str | None:
    """Why ``code`` is not traced any more, or None when it may be."""
    return _overruns.get(code)


def forget_overruns() -> None:
    """Trace every code again (``reset()``)."""
    _overruns.clear()
