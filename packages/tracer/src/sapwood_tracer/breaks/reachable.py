"""The instructions of a resume code's body that can run: those reached from where it resumes.

A resume code keeps the original's whole body after its prologue, so that jumps back (loops)
and exception handlers before the resume point still land; but in straight-line code all of
the body before the resume point is dead, and a function that breaks at many places would
otherwise assemble that dead part once per place. What is reached: from the resume point,
each instruction's fall-through (unless it always transfers), its jump target, and the
handler of the try region it lies in. Try regions left without any instruction are dropped
with their markers (an empty exception-table entry is invalid).
"""

from __future__ import annotations

from typing import Any

from bytecode import Instr, Label, TryBegin, TryEnd

__all__ = ["drop_unreachable"]

#: instructions after which the next one is not reached by falling through
_TRANSFERS = frozenset(
    {
        "JUMP_FORWARD",
        "JUMP_BACKWARD",
        "JUMP_BACKWARD_NO_INTERRUPT",
        "JUMP",
        "JUMP_NO_INTERRUPT",
        "RETURN_VALUE",
        "RETURN_CONST",
        "RAISE_VARARGS",
        "RERAISE",
    }
)


def drop_unreachable(
    body: list[Any], origins: list[int | None], start: Label
) -> tuple[list[Any], list[int | None]]:
    """``body`` (instructions, labels and try markers) without the instructions that cannot
    run when execution enters at label ``start``; ``origins`` (one per instruction) kept in
    step."""
    labels = {id(item): i for i, item in enumerate(body) if isinstance(item, Label)}
    region: list[TryBegin | None] = []  # the try region each position lies in
    active: TryBegin | None = None
    for item in body:
        if isinstance(item, TryBegin):
            active = item
        elif isinstance(item, TryEnd) and item.entry is active:
            active = None
        region.append(active)
    reached = [False] * len(body)
    pending = [labels[id(start)]]
    while pending:
        i = pending.pop()
        while i < len(body) and not reached[i]:
            reached[i] = True
            item = body[i]
            if region[i] is not None and isinstance(item, Instr):
                pending.append(labels[id(region[i].target)])  # type: ignore[union-attr]
            if isinstance(item, Instr):
                if isinstance(item.arg, Label):
                    pending.append(labels[id(item.arg)])
                if item.name in _TRANSFERS:
                    break
            i += 1
    kept: list[Any] = []
    kept_origins: list[int | None] = []
    k = 0  # the index of the next instruction's origin
    for i, item in enumerate(body):
        if isinstance(item, Instr):
            if reached[i]:
                kept.append(item)
                kept_origins.append(origins[k])
            k += 1
        else:
            kept.append(item)
    return _without_empty_regions(kept), kept_origins


def _without_empty_regions(items: list[Any]) -> list[Any]:
    """``items`` without try markers that enclose no instruction."""
    empty: set[int] = set()
    open_at: dict[int, bool] = {}  # TryBegin id -> saw an instruction since
    for item in items:
        if isinstance(item, TryBegin):
            open_at[id(item)] = False
        elif isinstance(item, Instr):
            for key in open_at:
                open_at[key] = True
        elif (
            isinstance(item, TryEnd)
            and id(item.entry) in open_at
            and not open_at.pop(id(item.entry))
        ):
            empty.add(id(item.entry))
    return [
        item
        for item in items
        if not (
            (isinstance(item, TryBegin) and id(item) in empty)
            or (isinstance(item, TryEnd) and id(item.entry) in empty)
        )
    ]
