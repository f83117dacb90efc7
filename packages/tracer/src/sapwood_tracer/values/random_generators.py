"""Random number generators (``random.Random`` objects) during a trace.

A Mersenne Twister's draws are a function of its state, which is plain data (624 words and a
position). Once a trace knows a generator's state, every draw can be computed while tracing, on
a private generator that holds the same state: the draws are constants, the same on every call
the cache entry serves. The trace knows the state when it seeded the generator with a constant,
gave it a state with ``setstate``, or read its state at the call (then the entry is guarded on
that state). After the graph, the real generator is given the private one's final state.

Only the C primitives of ``_random.Random`` are modelled (:data:`PRIMITIVES`); the Python methods
of ``random.Random`` (``randrange``, ``shuffle``, ``choice``, ``gauss``, ...) are inlined on top
of them, so their own state (``gauss_next``) is an ordinary attribute of the object.

Invariant: one :class:`GeneratorState` per real generator per trace, keyed by its identity (the
object is guarded by identity where the trace first touches its state).
"""

from __future__ import annotations

import _random
from typing import Any

from sapwood_graph import Source

__all__ = ["PRIMITIVES", "GeneratorState", "is_generator_primitive"]

#: The methods of ``_random.Random`` that read or change the state.
PRIMITIVES = frozenset({"seed", "random", "getrandbits", "getstate", "setstate"})


def is_generator_primitive(raw: Any) -> bool:
    """Whether ``raw`` is one of the modelled method descriptors of ``_random.Random``."""
    return (
        getattr(raw, "__objclass__", None) is _random.Random
        and getattr(raw, "__name__", None) in PRIMITIVES
    )


class GeneratorState:
    """A real generator reached by the trace and the private generator that stands for it."""

    __slots__ = ("changed", "private", "real", "source")

    def __init__(self, real: Any, source: Source, private: Any) -> None:
        self.real = real
        #: where the entry finds the real generator to give it its final state
        self.source = source
        #: a ``_random.Random`` holding the state the real generator has at this point of the
        #: traced program
        self.private = private
        #: whether the trace changed the state (else nothing is written back)
        self.changed = False

    def replay(self) -> tuple[Any, tuple[Any, ...]] | None:
        """``_random.Random.setstate(real, <final state>)`` after the graph, if changed."""
        if not self.changed:
            return None
        return _random.Random.setstate, (_random.Random.getstate(self.private),)
