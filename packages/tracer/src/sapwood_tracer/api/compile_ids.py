"""Compile ids for torch's structured trace (``TORCH_TRACE``, read by tlparse).

Each capture runs inside torch's compile context with a ``CompileId``: ``frame_id`` numbers
the code objects in the order they are first captured, ``frame_compile_id`` counts the
captures of that code (0 first, then one per recompile). A capture starts with a
``dynamo_start`` event whose stack is the function's file, line and name, so tlparse lays
the trace out in one folder per frame and compile, with the user's source, as it does for
Dynamo's. What AOT autograd and Inductor log during the capture carries the same id.

Cost: a dictionary lookup and a context switch per capture (captures are rare); torch checks
whether its structured trace is on before building an event.
"""

from __future__ import annotations

import contextlib
import itertools
import traceback
import types
import weakref
from collections.abc import Iterator

import torch
import torch._guards

__all__ = ["compile_context"]

_frame_ids: weakref.WeakKeyDictionary[types.CodeType, int] = weakref.WeakKeyDictionary()
_captures: weakref.WeakKeyDictionary[types.CodeType, int] = weakref.WeakKeyDictionary()
_next_frame_id = itertools.count()


@contextlib.contextmanager
def compile_context(code: types.CodeType) -> Iterator[torch._guards.CompileId]:
    """torch's compile context for a capture of ``code``, with its ``dynamo_start`` event."""
    frame_id = _frame_ids.get(code)
    if frame_id is None:
        frame_id = _frame_ids[code] = next(_next_frame_id)
    count = _captures.get(code, 0)
    _captures[code] = count + 1
    compile_id = torch._guards.CompileId(frame_id=frame_id, frame_compile_id=count)
    with torch._guards.compile_context(torch._guards.CompileContext(compile_id)):
        torch._logging.trace_structured("dynamo_start", lambda: {"stack": _stack_of(code)})
        yield compile_id


def _stack_of(code: types.CodeType) -> list[dict[str, object]]:
    from torch._logging.structured import from_traceback

    frame = traceback.FrameSummary(
        code.co_filename, code.co_firstlineno, code.co_name, lookup_line=False
    )
    return from_traceback([frame])
