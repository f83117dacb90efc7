"""Errors a user of the tracer can meet.

Every error names the construct the interpreter met and, when known, the user's source
location (``file:line``), so the message points at the line to change.
"""

from __future__ import annotations

__all__ = ["TracerError", "Unsupported", "UnsupportedPythonWarning"]


class TracerError(Exception):
    """Base class of sapwood-tracer's errors."""


class Unsupported(TracerError):
    """The interpreter met a construct it cannot capture into a whole graph.

    ``construct`` says what it was (an opcode, a call, a data-dependent branch, ...);
    ``location`` is ``file:line`` of the user's code when known. Without ``fullgraph=True`` the
    tracer turns it into a graph break (the construct runs eagerly); with ``fullgraph=True``
    it is raised to the caller.
    """

    def __init__(self, construct: str, location: str | None = None, *, hint: str = "") -> None:
        self.construct = construct
        self.location = location
        self.hint = hint
        #: Locations of the traced frames, innermost first (the user's call chain).
        self.traced_stack: list[str] = []
        #: The innermost traced location in the user's own code, when ``location`` is in a
        #: library (torch, transformers, the standard library).
        self.user_location: str | None = None
        #: Where the root frame of the trace was when this was raised: the instruction index
        #: and how many times it had run (set by the root frame; used to place a graph break).
        self.break_index: int | None = None
        self.break_visit: int = 0
        super().__init__(self._message())

    def _message(self) -> str:
        where = f" at {self.location}" if self.location else ""
        if self.user_location and self.user_location != self.location:
            where += f", reached from {self.user_location}"
        hint = f" {self.hint}" if self.hint else ""
        return (
            f"sapwood cannot capture {self.construct}{where}.{hint} With fullgraph=True this "
            "is an error; without it, the line runs eagerly between two graphs (a graph break)."
        )

    def reached_from(self, user_location: str) -> None:
        """Name the user's line that led into library code where the construct is."""
        if self.user_location is None:
            self.user_location = user_location
            self.args = (self._message(),)

    def located(self, location: str) -> Unsupported:
        """Attach ``location`` if none is known yet (the innermost frame wins)."""
        if self.location is None:
            self.location = location
            self.args = (self._message(),)
        return self


class UnsupportedPythonWarning(UserWarning):
    """The running Python is one whose bytecode sapwood-tracer does not know: ``compile``
    returns functions that run eagerly (``fullgraph=True`` raises :class:`Unsupported` at
    the first call instead). Warned once, at the first ``compile``."""
