"""The differential oracle: run a generated program eagerly and compiled, compare everything.

The program's source is executed twice, into two fresh namespaces, so each side has its own
globals, classes, ``Counter`` module and inputs (``make_inputs`` builds equal inputs from the
call's seed on each side). Per call, in order: the eager side runs, then the compiled side;
then the two are compared:

* the exception raised, if any (same type; then the state below is still compared),
* what was printed (stdout, exactly),
* the return value (structure, types, tensors' dtype/shape/requires_grad/values, and which
  returned objects are the caller's own inputs: returning ``xs`` must return the same list),
* the inputs after the call (tensors mutated in place, lists, dicts, ``box``), with the same
  identity rule (``xs.append(a)`` must append the caller's own ``a``),
* the module's state (parameters, buffers, plain attributes such as ``count``, ``training``),
* the module-level globals ``G_*``,
* once the caller dropped the inputs, the result and the exception: which input tensors
  still live (the program may keep some; compiled code must keep no more, e.g. in a
  reference cycle through an exception's frames, which only the garbage collector would
  break; the cyclic collector is off from a call to that check).

A program's verdict is the worst over its calls: ``crash`` (the compiled side raised from
sapwood's own code: one of its error types, or a traceback whose innermost frame that is
either the program's or sapwood's is sapwood's), ``mismatch`` (any other difference),
``both-raise`` (some call raised the same exception type on both sides, nothing differed) or
``match``. Comparison stops at the first call that crashes or mismatches.
"""

from __future__ import annotations

import contextlib
import gc
import io
import linecache
import math
import os
import re
import traceback
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from .generator import Program

__all__ = [
    "BOTH_RAISE",
    "CRASH",
    "MATCH",
    "MISMATCH",
    "Verdict",
    "current_phase",
    "is_sapwood_failure",
    "run_program",
    "sapwood_compiler",
]

MATCH, MISMATCH, CRASH, BOTH_RAISE = "match", "mismatch", "crash", "both-raise"

Compiler = Callable[[Any], Callable[..., Any]]


@dataclass(frozen=True)
class Verdict:
    kind: str  # MATCH, MISMATCH, CRASH or BOTH_RAISE
    call: int | None = None  # index of the call that decided it
    reason: str = ""  # one line
    detail: str = ""  # traceback or values, for the report
    signature: str = ""  # groups failures that likely share a cause


def sapwood_compiler(entry: Any) -> Callable[..., Any]:
    """What the fuzzer tests: ``sapwood.compile`` with the eager backend, default mode."""
    import sapwood

    return sapwood.compile(entry, backend="eager")


def _sapwood_reset() -> None:
    import sapwood

    sapwood.reset()


# ------------------------------------------------------------------ crash detection


def _sapwood_dirs() -> tuple[str, ...]:
    import sapwood
    import sapwood_backend
    import sapwood_cudagraph_trees
    import sapwood_graph
    import sapwood_tracer

    modules = [sapwood, sapwood_backend, sapwood_cudagraph_trees, sapwood_graph, sapwood_tracer]
    return tuple(os.path.dirname(str(m.__file__)) + os.sep for m in modules)


def _sapwood_error_types() -> tuple[type[BaseException], ...]:
    import sapwood_graph.errors
    import sapwood_tracer

    return (sapwood_tracer.TracerError, sapwood_graph.errors.GraphError)


def _is_sapwood_file(filename: str) -> bool:
    # generated guard and glue code is compiled with file names "<sapwood ...>"
    return filename.startswith(_sapwood_dirs()) or filename.startswith("<sapwood")


def _deciding_frame(exc: BaseException, program_file: str) -> traceback.FrameSummary | None:
    """The innermost frame of ``exc``'s traceback that is the program's or sapwood's."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == program_file or _is_sapwood_file(frame.filename):
            return frame
    return None


def is_sapwood_failure(exc: BaseException, program_file: str) -> bool:
    """Whether ``exc`` comes from sapwood itself rather than from the program's own code."""
    if isinstance(exc, _sapwood_error_types()):
        return True
    frame = _deciding_frame(exc, program_file)
    return frame is not None and frame.filename != program_file


# ------------------------------------------------------------------ one side of the run

_phase = ["idle"]  # which side is running: "eager", "compiled" or "idle" (for timeouts)


def current_phase() -> str:
    return _phase[0]


@dataclass
class _Run:
    result: Any
    error: BaseException | None
    stdout: str
    inputs: dict[str, Any]  # name -> object, after the call
    identities: dict[int, str]  # id of an object the caller owned before the call -> its path
    keep_alive: list[Any]  # those objects (so their ids stay theirs)


class _Side:
    """One namespace of the program and its entry point (compiled or not)."""

    def __init__(self, program: Program, code: Any, compiler: Compiler | None) -> None:
        self.phase = "compiled" if compiler else "eager"
        self.namespace: dict[str, Any] = {"__name__": "fuzz_program"}
        exec(code, self.namespace)
        self.program = program
        if program.entry == "module":
            self.module = self.namespace["Program"]()
            self.owned: dict[str, Any] = {"module": self.module}
            self.entry = compiler(self.module) if compiler else self.module
        else:
            self.module = self.namespace["Counter"]()
            self.owned = {"mod": self.module}
            function = self.namespace["program"]
            self.entry = compiler(function) if compiler else function

    def call(self, index: int) -> _Run:
        spec = self.program.calls[index]
        args = self.namespace["make_inputs"](
            spec.shape, getattr(torch, spec.dtype), spec.n, spec.data_seed
        )
        inputs = dict(zip(("a", "b", "n", "xs", "d", "box"), args))
        inputs.update(self.owned)
        identities: dict[int, str] = {}
        keep: list[Any] = []
        for name, value in inputs.items():
            _collect_identities(value, name, identities, keep)
        if self.program.entry == "function":
            args = (*args, self.module)
        out = io.StringIO()
        result, caught = None, []
        _phase[0] = self.phase
        with contextlib.redirect_stdout(out):
            try:
                result = self.entry(*args)
            except Exception as exc:
                caught.append(exc)
            finally:
                _phase[0] = "idle"
        # (the error is handed over, not kept: the program's frames in its traceback reach
        # this frame as their caller, and this frame holding the error would be a reference
        # cycle keeping the inputs alive; see _lifetimes)
        return _Run(
            result, caught.pop() if caught else None, out.getvalue(), inputs, identities, keep
        )

    def globals(self) -> dict[str, Any]:
        return {k: v for k, v in self.namespace.items() if k.startswith("G_")}


def _mutable(value: Any) -> bool:
    return isinstance(value, (torch.Tensor, list, dict, torch.nn.Module)) or (
        hasattr(value, "__dict__") and not isinstance(value, type) and not callable(value)
    )


def _collect_identities(value: Any, path: str, out: dict[int, str], keep: list[Any]) -> None:
    if _mutable(value) and id(value) not in out:
        out[id(value)] = path
        keep.append(value)
    if isinstance(value, torch.nn.Module):
        for name, tensor in [*value.named_parameters(), *value.named_buffers()]:
            _collect_identities(tensor, f"{path}.{name}", out, keep)
        for name, sub in value.named_modules():
            if name:
                _collect_identities(sub, f"{path}.{name}", out, keep)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _collect_identities(item, f"{path}[{i}]", out, keep)
    elif isinstance(value, dict):
        for key, item in value.items():
            _collect_identities(item, f"{path}[{key!r}]", out, keep)
    elif _mutable(value) and not isinstance(value, torch.Tensor):
        for key, item in vars(value).items():
            _collect_identities(item, f"{path}.{key}", out, keep)


# ------------------------------------------------------------------ comparison


class _Difference(Exception):
    def __init__(self, path: str, what: str, detail: str = "") -> None:
        self.path = path
        self.what = what
        self.detail = detail
        super().__init__(f"{path}: {what}")


def _type_name(value: Any) -> str:
    t = type(value)
    return f"{t.__module__}.{t.__qualname__}"


def _module_state(module: torch.nn.Module) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for prefix, sub in module.named_modules():
        where = prefix or "self"
        for key, value in vars(sub).items():
            if not key.startswith("_"):
                state[f"{where}.{key}"] = value
        for name, p in sub._parameters.items():
            state[f"{where}.{name}"] = p
        for name, buf in sub._buffers.items():
            state[f"{where}.{name}"] = buf
    return state


class _Comparer:
    def __init__(self, eager: _Run, compiled: _Run) -> None:
        self.eager_ids = eager.identities
        self.compiled_ids = compiled.identities

    def same(self, e: Any, c: Any, path: str, depth: int = 0) -> None:
        if depth > 20:
            return
        if _mutable(e) or _mutable(c):
            pe, pc = self.eager_ids.get(id(e)), self.compiled_ids.get(id(c))
            if pe != pc:
                raise _Difference(
                    path,
                    "aliasing",
                    f"eager: {'the input ' + pe if pe else 'a new object'}; "
                    f"compiled: {'the input ' + pc if pc else 'a new object'}",
                )
        if _type_name(e) != _type_name(c):
            raise _Difference(path, "type", f"eager {_type_name(e)}, compiled {_type_name(c)}")
        if isinstance(e, torch.Tensor):
            self.same_tensor(e, c, path)
        elif isinstance(e, (list, tuple)):
            if len(e) != len(c):
                raise _Difference(path, "length", f"eager {len(e)}, compiled {len(c)}")
            for i, (x, y) in enumerate(zip(e, c)):
                self.same(x, y, f"{path}[{i}]", depth + 1)
        elif isinstance(e, dict):
            if list(e) != list(c):
                raise _Difference(path, "keys", f"eager {list(e)}, compiled {list(c)}")
            for key in e:
                self.same(e[key], c[key], f"{path}[{key!r}]", depth + 1)
        elif isinstance(e, torch.nn.Module):
            self.same(_module_state(e), _module_state(c), path, depth + 1)
        elif isinstance(e, float):
            if not (
                e == c or (math.isnan(e) and math.isnan(c)) or math.isclose(e, c, rel_tol=1e-6)
            ):
                raise _Difference(path, "value", f"eager {e!r}, compiled {c!r}")
        elif isinstance(e, (int, str, bool, type(None), torch.dtype, torch.device)):
            if e != c:
                raise _Difference(path, "value", f"eager {e!r}, compiled {c!r}")
        elif _mutable(e):
            self.same(dict(vars(e)), dict(vars(c)), f"{path}.__dict__", depth + 1)

    def same_tensor(self, e: torch.Tensor, c: torch.Tensor, path: str) -> None:
        for attr in ("dtype", "shape", "requires_grad", "device"):
            if getattr(e, attr) != getattr(c, attr):
                raise _Difference(
                    path, attr, f"eager {getattr(e, attr)}, compiled {getattr(c, attr)}"
                )
        try:
            torch.testing.assert_close(c.detach(), e.detach(), equal_nan=True)
        except AssertionError as exc:
            raise _Difference(path, "values", str(exc)) from None


def _normalise(text: str) -> str:
    text = re.sub(r"<fuzz program \d+>", "<program>", text)
    text = re.sub(r"\b(inner|fn|helper|eager_only|i|u|v|w|p)\d+\b", r"\1#", text)
    text = re.sub(r"\d+", "N", text)
    return text[:100]


def _exception_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _crash_verdict(index: int, exc: BaseException, program: Program) -> Verdict:
    frames = traceback.extract_tb(exc.__traceback__)
    where = next((f for f in reversed(frames) if _is_sapwood_file(f.filename)), None)
    place = f"{os.path.basename(where.filename)}:{where.name}" if where else "?"
    detail = "".join(traceback.format_exception(exc))
    return Verdict(
        CRASH,
        index,
        f"call {index}: sapwood raised {_exception_line(exc)[:300]}",
        detail,
        f"crash {type(exc).__name__} in {place}: {_normalise(str(exc).split(chr(10))[0])}",
    )


def _compare_call(index: int, eager: _Run, compiled: _Run, sides: list[_Side]) -> Verdict | None:
    """None when the call matched; otherwise the verdict it decides (a both-raise returns
    a BOTH_RAISE verdict only after the state compared equal)."""
    program = sides[0].program
    ee, ce = eager.error, compiled.error
    same_exception = ee is not None and ce is not None and type(ee) is type(ce)
    if ce is not None and not same_exception and is_sapwood_failure(ce, program.filename):
        return _crash_verdict(index, ce, program)
    if (ee is not None or ce is not None) and not same_exception:
        eager_says = _exception_line(ee) if ee else "returned"
        compiled_says = _exception_line(ce) if ce else "returned"
        detail = "".join(traceback.format_exception(ce)) if ce else ""
        return Verdict(
            MISMATCH,
            index,
            f"call {index}: eager {eager_says[:200]}; compiled {compiled_says[:200]}",
            detail,
            f"mismatch exception: eager {type(ee).__name__ if ee else 'returned'}, "
            f"compiled {type(ce).__name__ if ce else 'returned'}",
        )
    comparer = _Comparer(eager, compiled)
    try:
        if eager.stdout != compiled.stdout:
            raise _Difference(
                "stdout", "printed", f"eager:\n{eager.stdout}\ncompiled:\n{compiled.stdout}"
            )
        if ee is None:
            comparer.same(eager.result, compiled.result, "result")
        for name in eager.inputs:
            comparer.same(eager.inputs[name], compiled.inputs[name], name)
        comparer.same(sides[0].globals(), sides[1].globals(), "globals")
    except _Difference as diff:
        where = re.sub(r"\[-?\d+\]", "[i]", diff.path)
        return Verdict(
            MISMATCH,
            index,
            f"call {index}: {diff.path}: {diff.what}: {diff.detail.splitlines()[0][:200] if diff.detail else ''}",
            diff.detail,
            f"mismatch {diff.what} of {where}",
        )
    if ee is not None:
        return Verdict(BOTH_RAISE, index, f"call {index}: both raised {_exception_line(ee)[:200]}")
    return None


@contextlib.contextmanager
def _no_cyclic_collection() -> Iterator[None]:
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _watched_tensors(run: _Run) -> dict[str, weakref.ref]:
    """Weak references to the tensors of a call's inputs, by path."""
    found: dict[str, torch.Tensor] = {}
    inputs = run.inputs
    for name in ("a", "b"):
        found[name] = inputs[name]
    for i, item in enumerate(inputs["xs"]):
        found[f"xs[{i}]"] = item
    found['d["w"]'] = inputs["d"]["w"]
    found["box.v"] = inputs["box"].v
    return {k: weakref.ref(v) for k, v in found.items() if isinstance(v, torch.Tensor)}


def _lifetimes(
    index: int, eager: dict[str, weakref.ref], compiled: dict[str, weakref.ref]
) -> Verdict | None:
    """After a call, once the caller dropped its inputs and the call's result and error:
    the inputs that still live must be the same on both sides (the program may keep some
    in globals or in the module; compiled code must keep no more, e.g. in a reference cycle
    through an exception's frames, which only the garbage collector would break)."""
    alive_eager = {k for k, ref in eager.items() if ref() is not None}
    alive_compiled = {k for k, ref in compiled.items() if ref() is not None}
    if alive_eager == alive_compiled:
        return None
    kept = sorted(alive_compiled - alive_eager)
    freed = sorted(alive_eager - alive_compiled)
    detail = f"kept alive only when compiled: {kept}; freed only when compiled: {freed}"
    return Verdict(
        MISMATCH,
        index,
        f"call {index}: inputs' lifetimes: {detail}",
        detail,
        "mismatch lifetimes of the inputs",
    )


def run_program(
    program: Program,
    compiler: Compiler = sapwood_compiler,
    reset: Callable[[], None] = _sapwood_reset,
) -> Verdict:
    """Run every call of ``program`` eagerly and through ``compiler``; return the verdict."""
    lines = program.source.splitlines(True)
    linecache.cache[program.filename] = (len(program.source), None, lines, program.filename)
    reset()
    try:
        try:
            code = compile(program.source, program.filename, "exec")
            eager = _Side(program, code, None)
            compiled = _Side(program, code, compiler)
        except Exception as exc:
            if is_sapwood_failure(exc, program.filename):
                return _crash_verdict(0, exc, program)
            raise
        both: Verdict | None = None
        for index in range(len(program.calls)):
            with _no_cyclic_collection():  # (it would hide a cycle from the lifetime check)
                eager_run, compiled_run = eager.call(index), compiled.call(index)
                watched = _watched_tensors(eager_run), _watched_tensors(compiled_run)
                verdict = _compare_call(index, eager_run, compiled_run, [eager, compiled])
                del eager_run, compiled_run
                if verdict is None or verdict.kind == BOTH_RAISE:
                    verdict = _lifetimes(index, *watched) or verdict
            if verdict is None:
                continue
            if verdict.kind != BOTH_RAISE:
                return verdict
            both = both or verdict
        return both or Verdict(MATCH)
    finally:
        reset()
        linecache.cache.pop(program.filename, None)
