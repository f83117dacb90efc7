"""Which fast locals a resume function needs: those the rest of the code may read before it
writes them (live variables, a backward data-flow over the instructions).

Passing only the live locals keeps a dead local's value from becoming an input of the resume
function, where it would be guarded and make one resume function per value it ever held
(a flag tested before the break, the previous iteration's item of a loop).

Invariant: the answer is a superset of what the code can read. Every edge an instruction may
take is followed (the fall-through, its jump target, the handler of its exception-table
entry); an instruction whose effect on locals is not known here counts its names as read;
code that can see its locals other than by name (``locals()``, ``vars()``, ``dir()``,
``eval``/``exec``, frame objects) keeps every local.
"""

from __future__ import annotations

import types
from collections.abc import Iterable

from ..interpreter.instructions import decode, exception_handler

__all__ = ["live_locals"]

#: jumps that never fall through
_ALWAYS_JUMPS = frozenset(
    {
        "JUMP_FORWARD",
        "JUMP_BACKWARD",
        "JUMP_BACKWARD_NO_INTERRUPT",
        "JUMP_ABSOLUTE",
        "JUMP",
        "JUMP_NO_INTERRUPT",
    }
)
#: instructions after which the frame never goes on to the next one
_ENDS = frozenset({"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"})
_WRITES = frozenset({"STORE_FAST", "STORE_FAST_MAYBE_NULL"})
#: names through which code reaches its frame's locals without naming them
_SEES_FRAME = frozenset(
    {"locals", "vars", "dir", "eval", "exec", "_getframe", "currentframe", "breakpoint"}
)

_cache: dict[types.CodeType, tuple[frozenset[str], ...] | None] = {}


def live_locals(code: types.CodeType, index: int) -> frozenset[str] | None:
    """The fast locals of ``code`` that may be read from instruction ``index`` on, or
    ``None`` when every local must be kept (the code can see its frame's locals)."""
    if code not in _cache:
        _cache[code] = _analyse(code)
    table = _cache[code]
    if table is None:
        return None
    return table[index]


def _names(argval: object) -> Iterable[str]:
    if isinstance(argval, str):
        return (argval,)
    if isinstance(argval, tuple):
        return tuple(a for a in argval if isinstance(a, str))
    return ()


def _effect(opname: str, argval: object) -> tuple[frozenset[str], frozenset[str]]:
    """``(read, written)`` of one instruction; reads happen before writes, except for 3.13's
    ``STORE_FAST_LOAD_FAST``, handled by its caller."""
    if "FAST" not in opname:
        return frozenset(), frozenset()
    if opname in _WRITES or opname == "STORE_FAST_STORE_FAST":
        return frozenset(), frozenset(_names(argval))
    # LOAD_FAST(_CHECK/_AND_CLEAR/_LOAD_FAST), DELETE_FAST (needs the local bound) and any
    # other: a read, never a kill, which can only keep more
    return frozenset(_names(argval)), frozenset()


def _analyse(code: types.CodeType) -> tuple[frozenset[str], ...] | None:
    if _SEES_FRAME & set(code.co_names):
        return None
    instructions = decode(code)
    count = len(instructions)
    successors: list[tuple[int, ...]] = []
    gen: list[frozenset[str]] = []
    kill: list[frozenset[str]] = []
    for ins in instructions:
        nexts: list[int] = []
        if ins.opname not in _ALWAYS_JUMPS and ins.opname not in _ENDS and ins.index + 1 < count:
            nexts.append(ins.index + 1)
        if ins.target is not None:
            nexts.append(ins.target)
        handler = exception_handler(code, ins.offset)
        if handler is not None:
            nexts.append(handler.target)
        successors.append(tuple(nexts))
        if ins.opname == "STORE_FAST_LOAD_FAST":
            stored, loaded = ins.argval
            # the store comes first: the load reads the value just stored when the names agree
            gen.append(frozenset() if loaded == stored else frozenset((loaded,)))
            kill.append(frozenset((stored,)))
            continue
        read, written = _effect(ins.opname, ins.argval)
        gen.append(read)
        kill.append(written - read)
    live: list[frozenset[str]] = [frozenset()] * count
    changed = True
    while changed:
        changed = False
        for i in range(count - 1, -1, -1):
            out: set[str] = set()
            for s in successors[i]:
                out |= live[s]
            new = frozenset((out - kill[i]) | gen[i])
            if new != live[i]:
                live[i] = new
                changed = True
    # zero-argument super() (a method with the __class__ cell) reads the first parameter from
    # the frame, not by name: it stays
    has_super = "__class__" in code.co_freevars and code.co_argcount
    first = code.co_varnames[:1] if has_super else ()
    return tuple(state | frozenset(first) for state in live)
