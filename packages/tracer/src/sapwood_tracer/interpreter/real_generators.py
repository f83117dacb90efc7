"""A real generator of a repositionable code, met as an input, traced as a generator.

A generator the trace could not keep symbolic past the graph is rebuilt as a generator of a
repositionable code ``R`` (see :mod:`sapwood_tracer.breaks.generator_code`). When a later
trace (the resume function after a graph break, typically) meets such a generator again, its
state is readable where it is suspended at a yield: which yield (``gi_frame.f_lasti``), its
locals (``gi_frame.f_locals``), and the value stack below the yield, which the generator's box
holds while the generator stays where the box put it (none below: nothing to know). It
is then a :class:`~sapwood_tracer.values.generators.GeneratorValue` over a symbolic frame of
the original code at that yield, and runs lazily like one the trace made; once advanced, the
entry puts the real generator in the state the trace left it in (its code can take any state
without running the original's code again).

Guards: the generator's type, its code (identity), that it is not running, where it is
suspended, the names of its bound locals, each local as an input of its own, and where there
is a stack below the yield, the box's mark (identity) and each stack item as an input.
Its closure cells come from the box too (guarded by identity). Anything else (a generator
of any other code, one with a value stack below a yield it reached by running) stays a :class:`~sapwood_tracer.values.iterators.LiveIteratorValue`.
"""

from __future__ import annotations

import types
from typing import Any

from sapwood_graph import AttrSource, GuardKind, ItemSource, Source

from ..guards.sources import KeysSource
from ..values.base import Value
from ..values.generator_codes import BOX_NAME, repositionable
from ..values.generators import GeneratorValue
from .frame import SymbolicFrame
from .real_iterators import RANGE_ITERATOR, wrap_range_iterator
from .wrapping_session import WrappingSession

__all__ = ["wrap_repositionable_generator"]


def wrap_repositionable_generator(
    tx: WrappingSession, gen: types.GeneratorType, source: Source
) -> Value | None:
    """``gen`` as a generator the trace runs, or None where it cannot be."""
    info = repositionable(gen.gi_code)
    frame = gen.gi_frame
    if info is None or frame is None or gen.gi_running:
        return None
    lasti = frame.f_lasti
    number = info.yield_at(lasti)
    if number is None:
        return None
    f_locals = frame.f_locals
    keys = tuple(f_locals.keys())
    known = {*info.local_names, *info.original.co_freevars, BOX_NAME}
    if any(name not in known for name in keys):
        return None
    box = f_locals.get(BOX_NAME)
    depth = info.depths[number]
    if depth and (box is None or box.mark is not info.marks[number]):
        return None  # (it reached this yield by running: its stack is not known)
    freevars = info.original.co_freevars
    if freevars and (box is None or len(box.closure) != len(freevars)):
        return None
    frame_source = AttrSource(source, "gi_frame")
    locals_source = AttrSource(frame_source, "f_locals")
    tx.guard(GuardKind.TYPE_MATCH, source, types.GeneratorType)
    tx.hold(gen.gi_code)
    tx.guard(GuardKind.ID_MATCH, AttrSource(source, "gi_code"), id(gen.gi_code))
    tx.guard(GuardKind.CONSTANT_MATCH, AttrSource(source, "gi_running"), False)
    tx.guard(GuardKind.CONSTANT_MATCH, AttrSource(frame_source, "f_lasti"), lasti)
    tx.guard(GuardKind.CONSTANT_MATCH, KeysSource(locals_source), keys)
    made: dict[int, Value] = {}

    def value_of(obj: Any, where: Source) -> Value:
        # a range iterator of the generator (its loop's) gives its numbers to the trace; one
        # object held in two places is one value
        if type(obj) is RANGE_ITERATOR:
            known = made.get(id(obj))
            if known is None:
                known = wrap_range_iterator(tx, obj, where) or tx.wrap(obj, where)
                made[id(obj)] = known
            return known
        return tx.wrap(obj, where)

    fast: dict[str, Any] = {
        name: value_of(f_locals[name], ItemSource(locals_source, name))
        for name in info.local_names
        if name in f_locals
    }
    box_source = ItemSource(locals_source, BOX_NAME)
    cells: dict[str, Value] = {}
    for index, (name, cell) in enumerate(zip(freevars, box.closure if freevars else ())):
        # its closure cells, each the very cell (one cell is one value, wherever it is read)
        cell_source = ItemSource(AttrSource(box_source, "closure"), index)
        tx.hold(cell)
        tx.guard(GuardKind.ID_MATCH, cell_source, id(cell))
        cells[name] = tx.real_cell(cell, AttrSource(cell_source, "cell_contents"))
    symbolic = SymbolicFrame(tx, info.original, frame.f_globals, None, fast, cells, None)
    if depth:
        # the stack below the yield, as the dispatch put it there (the box says so)
        tx.hold(box.mark)
        tx.guard(GuardKind.ID_MATCH, AttrSource(box_source, "mark"), id(box.mark))
        stack_source = AttrSource(box_source, "stack")
        symbolic.stack = [
            value_of(item, ItemSource(stack_source, index)) for index, item in enumerate(box.stack)
        ]
    symbolic.is_generator = True
    symbolic.ip = info.yield_indices[number] + 1  # just after the yield, as one suspended
    return GeneratorValue(symbolic, source, backing=info)
