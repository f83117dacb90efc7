"""Decoding code objects into instruction lists, through the standard ``dis`` module.

Invariants:

* Instructions are numbered by their position in the list (``index``); every jump carries the
  index of its target in ``target``, resolved from ``dis``'s absolute ``argval`` offsets, so
  handlers never do offset arithmetic and the 3.11 relative/absolute jump forms look alike.
* Inline ``CACHE`` entries are never listed (``dis`` hides them), and ``EXTENDED_ARG`` is folded
  into the next instruction's ``arg`` by ``dis``.
* Decoding is cached per code object; the lists are immutable.
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass
from typing import Any

__all__ = ["Instruction", "decode"]

_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


@dataclass(frozen=True, slots=True)
class Instruction:
    """One decoded instruction. ``target`` is the jump target's index, or ``None``."""

    opname: str
    arg: int | None
    argval: Any
    offset: int
    lineno: int | None
    index: int
    target: int | None


_decoded: dict[types.CodeType, tuple[Instruction, ...]] = {}


def decode(code: types.CodeType) -> tuple[Instruction, ...]:
    """The instructions of ``code`` (cached)."""
    cached = _decoded.get(code)
    if cached is not None:
        return cached
    raw = list(dis.get_instructions(code))
    by_offset = {ins.offset: i for i, ins in enumerate(raw)}
    out = []
    lineno: int | None = code.co_firstlineno
    for i, ins in enumerate(raw):
        positions = ins.positions
        if positions is not None and positions.lineno is not None:
            lineno = positions.lineno
        target = None
        if ins.opcode in _JUMPS:
            target = by_offset[ins.argval]
        out.append(Instruction(ins.opname, ins.arg, ins.argval, ins.offset, lineno, i, target))
    result = tuple(out)
    _decoded[code] = result
    return result
