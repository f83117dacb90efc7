"""The engines a test body runs under, behind one interface.

An engine compiles a callable, marks a callable as never compiled (``disable``), forgets
everything it compiled (``reset``), reports the parts of a call that ran eagerly
(``watch``), and tells its own errors from the program's (``is_own_error``). The
classifier and the worker only ever use this interface, so sapwood and TorchDynamo go
through the same code.

What counts as "ran eagerly":

- sapwood: a ``capture`` event (``sapwood_tracer.api.events``) whose cache entry has an
  ``exit`` (a graph break: the rest, or one call, ran eagerly), or a ``skip`` event (a
  whole code object ran eagerly). A ``next`` exit (a loop's next item taken eagerly) is
  counted only when the call broke nowhere else: otherwise it is the consequence of the
  break in the loop's body, which is counted (or left out) itself.
- TorchDynamo: ``torch._dynamo.utils.counters``, read before and after the call. A key of
  ``counters["graph_break"]`` whose count grew is a graph break. ``counters["frames"]``
  counts every frame Dynamo tried (``total``) and those it converted (``ok``); when
  ``total`` grew more than ``ok``, a frame ran eagerly as a whole, and the keys of
  ``counters["unimplemented"]`` that grew say why. ``reset`` does not clear the counters,
  which is why they are compared, never read as absolute numbers. Dynamo's own resume
  functions are traced even where they hold no tensor (Dynamo would skip them, leaving the
  rest of the body untraced and uncounted: see ``_DynamoWatch``).

Graph breaks at the harness's own disabled assertion wrappers are left out (their reason
names the wrapped function, :func:`is_harness_break`): every engine meets them, and they
say nothing about the test body.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = ["ENGINES", "Engine", "make_engine"]

# Qualified names of the callables the harness disables (filled by ``assertions``).
HARNESS_QUALNAMES: set[str] = set()


def is_harness_break(reason: str) -> bool:
    """Whether a break's reason names one of the harness's disabled wrappers."""
    return any(re.search(rf"\b{re.escape(q)}\b", reason) for q in HARNESS_QUALNAMES)


def _innermost_file(exc: BaseException) -> str:
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last.tb_frame.f_code.co_filename if last is not None else ""


def _short(text: str, limit: int = 300) -> str:
    """A reason on one line: the first line, and Dynamo's ``Explanation:`` line if any."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    out = lines[0]
    explanation = next((line for line in lines[1:] if line.startswith("Explanation:")), None)
    if explanation:
        out += " — " + explanation.removeprefix("Explanation:").strip()
    return out[:limit]


class Engine:
    """The eager engine: compiles nothing. Its runs check the harness itself."""

    name = "eager"

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return fn

    def disable(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return fn

    def reset(self) -> None:
        pass

    def watch(self) -> Watch:
        return Watch()

    def own_exception(self, exc: BaseException) -> bool:
        """Whether ``exc`` is of one of the compiler's own exception classes."""
        return False

    def package_dirs(self) -> Iterable[str]:
        return ()

    def is_own_error(self, exc: BaseException | None) -> bool:
        """Raised by the compiler itself: its own class, or raised in its own code.

        The package folders are worked out once, at the first call (the worker makes it before
        any test runs): a test may replace builtins such as ``len`` that pathlib needs.
        """
        dirs = self.__dict__.get("_dirs")
        if dirs is None:
            dirs = self.__dict__["_dirs"] = tuple(self.package_dirs())
        if exc is None:
            return False
        if self.own_exception(exc):
            return True
        where = _innermost_file(exc)
        return any(where.startswith(d) for d in dirs)


class Watch:
    """Collects the reasons why parts of one call ran eagerly; a context manager."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def add(self, reason: str) -> None:
        if not is_harness_break(reason):
            self.reasons.append(_short(reason))


def _eager_backend(gm: Any, example_inputs: Any) -> Callable[..., Any]:
    return gm.forward


class SapwoodEngine(Engine):
    name = "sapwood"

    def __init__(self) -> None:
        import sapwood_tracer

        self._tracer = sapwood_tracer

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return self._tracer.compile(fn, backend=_eager_backend)

    def disable(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return self._tracer.disable(fn)

    def reset(self) -> None:
        self._tracer.reset()

    def watch(self) -> Watch:
        return _SapwoodWatch()

    def own_exception(self, exc: BaseException) -> bool:
        return isinstance(exc, (self._tracer.TracerError, self._tracer.Unsupported))

    def package_dirs(self) -> Iterable[str]:
        import sapwood_backend
        import sapwood_graph

        for module in (self._tracer, sapwood_graph, sapwood_backend):
            yield str(Path(module.__file__).parent) + "/"


class _SapwoodWatch(Watch):
    """A loop's next item taken eagerly (a ``next`` exit) is the consequence of a break in
    the loop's body, counted (or left out, at a harness wrapper) itself; it is counted only
    when the call broke nowhere else, which is the case of an iterator from the caller."""

    def __enter__(self) -> Watch:
        from sapwood_tracer.api import events

        self._next_exits: list[str] = []
        self._other_breaks = 0
        self._stop = events.listen(self._event)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()
        if not self._other_breaks:
            for reason in self._next_exits:
                self.add(reason)

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "skip":
            self._other_breaks += 1
            self.add(f"runs eagerly: {data['reason']}")
        elif kind == "capture" and data["entry"].exit is not None:
            exit = data["entry"].exit
            reason = f"graph break at {exit.location}: {exit.reason}"
            if exit.kind == "next":
                self._next_exits.append(reason)
            else:
                self._other_breaks += 1
                self.add(reason)


class DynamoEngine(Engine):
    name = "dynamo"

    def __init__(self) -> None:
        import torch
        import torch._dynamo

        self._torch = torch

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return self._torch.compile(fn, backend="eager")

    def disable(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return self._torch._dynamo.disable(fn)

    def reset(self) -> None:
        self._torch._dynamo.reset()

    def watch(self) -> Watch:
        return _DynamoWatch()

    def own_exception(self, exc: BaseException) -> bool:
        return type(exc).__module__.startswith("torch._dynamo")

    def package_dirs(self) -> Iterable[str]:
        yield str(Path(self._torch._dynamo.__file__).parent) + "/"


_RESUME_PREFIX = "torch_dynamo_resume_in_"


class _DynamoWatch(Watch):
    """Dynamo skips a frame in which it finds no tensor (``has_tensor_in_frame``), and so
    the resume functions of a body without tensors: everything after its first graph break
    would run eagerly untraced, and uncounted. While watching, resume functions are taken
    as frames to trace, so the whole body is compiled, as sapwood compiles it."""

    def __enter__(self) -> Watch:
        from torch._dynamo import convert_frame
        from torch._dynamo.utils import counters

        self._counters = counters
        self._before = self._snapshot()
        self._convert_frame = convert_frame
        self._has_tensor = has_tensor = convert_frame.has_tensor_in_frame

        def resume_or_tensor(frame: Any) -> bool:
            return frame.f_code.co_name.startswith(_RESUME_PREFIX) or has_tensor(frame)

        convert_frame.has_tensor_in_frame = resume_or_tensor
        return self

    def _snapshot(self) -> dict[str, dict[str, int]]:
        return {
            group: dict(self._counters[group])
            for group in ("graph_break", "frames", "unimplemented")
        }

    def __exit__(self, *exc: object) -> None:
        self._convert_frame.has_tensor_in_frame = self._has_tensor
        after = self._snapshot()

        def grew(group: str) -> list[str]:
            old = self._before[group]
            return [k for k, n in after[group].items() if n > old.get(k, 0)]

        for reason in grew("graph_break"):
            self.add(f"graph break: {reason}")
        frames_before, frames_after = self._before["frames"], after["frames"]
        eager_frames = (frames_after.get("total", 0) - frames_before.get("total", 0)) - (
            frames_after.get("ok", 0) - frames_before.get("ok", 0)
        )
        if eager_frames > 0:
            why = grew("unimplemented") or ["not converted"]
            self.add(f"{eager_frames} frame(s) ran eagerly: {why[0]}")


ENGINES: dict[str, type[Engine]] = {
    "sapwood": SapwoodEngine,
    "dynamo": DynamoEngine,
    "eager": Engine,
}


def make_engine(name: str) -> Engine:
    return ENGINES[name]()
