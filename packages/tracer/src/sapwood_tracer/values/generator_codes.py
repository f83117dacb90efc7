"""The registry of *repositionable* generator codes (see :mod:`sapwood_tracer.breaks.generator_code`).

A generator made during a trace and still suspended when the graph ends is rebuilt as a real
generator of a generated code ``R`` made from the original generator code ``G``. ``R`` runs
``G``'s own instructions, and can be told (through a :class:`GeneratorBox`) to put itself at
any of ``G``'s yields with given locals and stack, or to finish, without running any of
``G``'s code. This module only records what the tracer needs to know of each ``R`` when it
meets one of its generators again as an input; it imports nothing of the tracer.

Invariant: an ``R`` is registered once made and never changes; its yields are ``G``'s, in
``G``'s order.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BOX_NAME",
    "UNBOUND",
    "GeneratorBox",
    "RepositionableCode",
    "register",
    "repositionable",
]

#: the local of ``R`` holding its box (a name no Python source can spell)
BOX_NAME = "generator box"


class _Unbound:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<unbound local>"


#: what a box holds for a local that is not bound at the target
UNBOUND = _Unbound()


class GeneratorBox:
    """Where ``R``'s dispatch reads the state to take: ``mark`` (which yield, or finish, or
    the start), the value of each local of ``G`` (or :data:`UNBOUND`), and the value stack
    below the yield (bottom first)."""

    __slots__ = ("closure", "locals", "mark", "stack")

    def __init__(
        self,
        mark: Any,
        locals_: tuple[Any, ...],
        stack: tuple[Any, ...],
        closure: tuple[Any, ...] = (),
    ) -> None:
        self.mark = mark
        self.locals = locals_
        self.stack = stack
        #: the generator's closure cells (its frame does not show them as cells)
        self.closure = closure

    def set(self, mark: Any, locals_: tuple[Any, ...], stack: tuple[Any, ...]) -> None:
        self.mark, self.locals, self.stack = mark, locals_, stack


@dataclass(frozen=True, slots=True)
class RepositionableCode:
    """What is known of one ``R``."""

    original: types.CodeType
    code: types.CodeType
    #: the locals of ``G`` the box sets, in the box's order
    local_names: tuple[str, ...]
    #: per yield of ``G``: its instruction index in ``G`` (``decode`` order)
    yield_indices: tuple[int, ...]
    #: per yield: how many value-stack items lie below the yielded value there
    depths: tuple[int, ...]
    #: per yield: the offsets of ``R`` a suspended generator's ``f_lasti`` may show there
    #: (that of its YIELD_VALUE, or of the instruction after it, as versions differ)
    lasti: tuple[tuple[int, int], ...]
    #: the marks the box takes: one per yield, then the start and the finish
    marks: tuple[Any, ...]
    start_mark: Any
    finish_mark: Any
    #: the object sent into a suspended ``R`` generator to make it take its box's state
    token: Any

    def yield_at(self, lasti: int) -> int | None:
        """The yield (its number) a generator suspended with ``f_lasti`` is at."""
        for number, offsets in enumerate(self.lasti):
            if lasti in offsets:
                return number
        return None


_by_code: dict[types.CodeType, RepositionableCode] = {}


def register(info: RepositionableCode) -> None:
    _by_code[info.code] = info


def repositionable(code: types.CodeType) -> RepositionableCode | None:
    """What is known of ``code`` when it is a generated ``R``, else None."""
    return _by_code.get(code)
