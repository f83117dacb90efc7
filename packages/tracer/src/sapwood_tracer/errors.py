"""Errors a user of the tracer can meet, and where its warnings point.

Every error names the construct the interpreter met and, when known, the user's source
location (``file:line``), so the message points at the line to change; every warning is
attributed to the innermost frame of the user's (:func:`user_stacklevel`).
"""

from __future__ import annotations

import sys
import types

__all__ = [
    "EagerFallbackWarning",
    "SpecializedDimWarning",
    "TracedException",
    "TracerError",
    "Unsupported",
    "UnsupportedPythonWarning",
    "forget_frames",
    "forget_handled",
    "is_sapwood_frame",
    "user_stacklevel",
    "weakly_referenced",
]


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
        #: The construct reads the frame it runs in (``locals()``, ``eval`` without
        #: namespaces): no graph break can run it elsewhere, so the code runs eagerly whole.
        self.frame_bound = False
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


class TracedException(Unsupported):
    """The traced program raises an exception here (``value``, an exception value of the
    trace). A frame whose exception table covers the raising instruction catches it and runs
    the handler symbolically, as CPython would; one that nothing in the trace catches is an
    :class:`Unsupported` like any other: a graph break at the raising instruction, which then
    raises for real, eagerly."""

    #: whether Python's implicit chaining (``__context__``) was applied to it already, or
    #: needs none (a re-raise: a bare ``raise``, ``RERAISE``)
    chained = False

    def __init__(
        self, value: object = None, *, cls: type | None = None, args: tuple[object, ...] = ()
    ) -> None:
        #: the exception value; until a frame needs it, the model of an operation that
        #: raises gives only its class and argument values (``cls``, ``values``)
        self.value = value
        self.cls = cls
        self.values = args
        describe = getattr(value, "describe", None)
        if callable(describe):
            what = describe()
        else:
            what = f"a {getattr(cls, '__qualname__', cls)} exception"
        super().__init__(f"{what} raised by the traced code and not caught there")


def forget_handled(exc: Unsupported) -> None:
    """``exc``, sapwood's own exception (a traced raise, a refusal), was handled inside the
    trace and is done with: drop its traceback, and those of the sapwood exceptions chained to
    it. Its traceback holds the tracer's frames it went through, and a frame that caught and
    re-raised it (``except ... as e: raise``) holds it: a reference cycle that would keep the
    whole trace, the call's arguments among its values, alive until the cyclic garbage
    collector runs. Exceptions of other kinds in the chain keep theirs (the program's own)."""
    current: BaseException | None = exc
    seen: set[int] = set()
    while isinstance(current, Unsupported) and id(current) not in seen:
        seen.add(id(current))
        current.__traceback__ = None
        current = current.__cause__ or current.__context__


def weakly_referenced(what: str) -> Unsupported:
    """A weak reference made by traced code: it sees when its object dies, and values the
    trace passes around (to graph breaks, resume functions) can keep an object alive longer
    than Python would, so the code runs eagerly as a whole."""
    exc = Unsupported(
        f"making a weak reference ({what})",
        hint="The function runs eagerly as a whole (the trace cannot promise when the "
        "referenced object dies).",
    )
    exc.frame_bound = True
    return exc


def forget_frames(exc: BaseException, caller_exception: BaseException | None) -> None:
    """Drop the tracebacks of ``exc`` and of the exceptions chained to it, up to the
    exception the caller of the compiled function was handling (``caller_exception``: the
    program's own, chained to sapwood's because sapwood raised while it was handled).

    For an exception sapwood keeps after handling it (the reason of a graph break, of an
    eager fallback): its traceback holds the frames it went through, which hold the call's
    arguments, and the frame that keeps the exception is one of them. That reference cycle
    would keep the arguments alive until the cyclic garbage collector runs.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or current is caller_exception or id(current) in seen:
            continue
        seen.add(id(current))
        current.__traceback__ = None
        todo += [current.__cause__, current.__context__]


class UnsupportedPythonWarning(UserWarning):
    """The running Python is one whose bytecode sapwood-tracer does not know: ``compile``
    returns functions that run eagerly (``fullgraph=True`` raises :class:`Unsupported` at
    the first call instead). Warned once, at the first ``compile``."""


class SpecializedDimWarning(UserWarning):
    """A dim marked with ``mark_dynamic`` was specialised to one size by the traced code."""


class EagerFallbackWarning(UserWarning):
    """sapwood's own code failed on a function (a sapwood bug), so the function runs eagerly:
    the result is the one Python gives; ``explain()`` and ``SAPWOOD_LOGS=graph_breaks`` say
    why. Warned once per code object."""


def is_sapwood_frame(frame: types.FrameType) -> bool:
    """Whether ``frame`` runs sapwood's code: generated (a file name ``<sapwood ...>``) or of
    one of sapwood's packages (its globals' ``__name__``)."""
    if frame.f_code.co_filename.startswith("<sapwood "):
        return True
    module = frame.f_globals.get("__name__")
    return isinstance(module, str) and module.partition(".")[0] in _SAPWOOD_PACKAGES


_SAPWOOD_PACKAGES = frozenset(
    {"sapwood", "sapwood_tracer", "sapwood_graph", "sapwood_backend", "sapwood_cudagraph_trees"}
)


def user_stacklevel() -> int:
    """The ``stacklevel`` for a warning raised by the caller of this function that names the
    innermost frame of the user's (past sapwood's layers and generated code)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and is_sapwood_frame(frame):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level
