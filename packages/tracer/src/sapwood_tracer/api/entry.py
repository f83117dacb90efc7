"""The entry point: ``compile`` returns a wrapper that looks up the per-code cache.

No frame-evaluation hook is installed: the wrapper binds the call's arguments to the
function's parameters (a tuple in binding order), tries the cache entries of the function's
code, and traces on a miss (see ARCHITECTURE.md, "Frame entry without a global hook").

A module compiles to a :class:`~.compiled_module.CompiledModule` (an ``nn.Module`` whose
``forward`` runs the original's, compiled); options of one compile call (its recompile
limit, isolation, name) travel as a :class:`~.cache.Region`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import sysconfig
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch

from sapwood_graph import BackendCompilerFailed, LocalSource

from ..breaks.exits import BreakRuntime
from ..breaks.resume import resume_info
from ..errors import (
    EagerFallbackWarning,
    Unsupported,
    UnsupportedPythonWarning,
    forget_frames,
    user_stacklevel,
)
from ..guards.emitter import Miss
from ..interpreter.frame import internal_error
from ..interpreter.registry import unsupported_python
from ..interpreter.shape_plan import ShapePlan
from ..marks import is_disabled
from . import cache as _cache
from . import events as _events
from . import torch_config
from .binding import binder, call_bound
from .capture import capture
from .compiled_module import CompiledModule
from .distributed import (
    CompiledDDP,
    bucketed_backend,
    call_with_forward,
    is_ddp,
)
from .dynamic import plan_after_miss
from .forwards import caller_of
from .frozen_modules import GUARD_MODES
from .modes import device_modes_set_aside, eager_for_now
from .recompile_reasons import seen_at
from .stance import current_stance, refusal
from .tracebacks import to_user_frames

__all__ = ["CompiledModule", "compile"]


def _compiled_function(
    fn: types.FunctionType,
    backend: Any,
    receiver: Any = None,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    region: _cache.Region | None = None,
) -> Callable[..., Any]:
    code = fn.__code__
    closure = fn.__closure__ or ()
    f_globals = fn.__globals__
    bind = binder(fn)
    lookup = _cache.lookup
    runtime = None if fullgraph else _break_runtime(backend, dynamic)
    if region is None:
        region = _cache.region(backend, fullgraph)
    key, asked = region.key, "inputs" if region.frozen_modules else "all"

    def eager(L: tuple[Any, ...]) -> Any:
        return call_bound(fn, L)

    def miss(L: tuple[Any, ...]) -> Any:
        return _miss(code, closure, f_globals, L, backend, runtime, eager, dynamic, region)

    if receiver is None:

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                L = bind(args, kwargs)
                stance = current_stance()
                if stance is not None:
                    return _under_stance(stance, code, closure, f_globals, key, L, eager)
                cache = lookup(code)
                if cache is not None:
                    for entry in cache.entries:
                        if entry.key is key:
                            result = entry.fn(L, closure, f_globals)
                            if type(result) is not Miss:
                                return result
                return miss(L)
            except BaseException as exc:
                to_user_frames(exc)
                raise

        functools.update_wrapper(wrapper, fn)
        wrapper.__sapwood_original__ = fn  # type: ignore[attr-defined]
        wrapper.__sapwood_guards__ = asked  # type: ignore[attr-defined]
        return wrapper

    def method(*args: Any, **kwargs: Any) -> Any:
        try:
            L = bind((receiver, *args), kwargs)
            stance = current_stance()
            if stance is not None:
                return _under_stance(stance, code, closure, f_globals, key, L, eager)
            cache = lookup(code)
            if cache is not None:
                for entry in cache.entries:
                    if entry.key is key:
                        result = entry.fn(L, closure, f_globals)
                        if type(result) is not Miss:
                            return result
            return miss(L)
        except BaseException as exc:
            to_user_frames(exc)
            raise

    method.__sapwood_guards__ = asked  # type: ignore[attr-defined]
    return method


def _load_torch_compiler_modules() -> None:
    """Load what the first trace needs of torch's compiler stack (torch's ShapeEnv loads
    torch._dynamo) here, when the program compiles, rather than inside the first compiled
    call: imported there, it would run with that call's frames on the stack, and what it
    keeps of them kept the call's arguments alive (``import sapwood`` itself loads none of
    it)."""
    import torch._dynamo
    import torch.fx.experimental.symbolic_shapes  # noqa: F401


def _under_stance(
    stance: str,
    code: types.CodeType,
    closure: tuple[types.CellType, ...],
    f_globals: dict[str, Any],
    key: object,
    L: tuple[Any, ...],
    eager: Callable[[tuple[Any, ...]], Any],
) -> Any:
    """A call while ``torch.compiler.set_stance(stance)`` holds (see :mod:`.stance`)."""
    if stance == "force_eager":
        return eager(L)
    failed = None
    cache = _cache.lookup(code)
    for entry in cache.entries if cache is not None else ():
        if entry.key is key:
            result = entry.fn(L, closure, f_globals)
            if type(result) is not Miss:
                return result
            failed = failed or entry.describe_guard(result.index)
    if stance == "eager_on_recompile":
        return eager(L)
    raise refusal(code, failed)


def _miss(
    code: types.CodeType,
    closure: tuple[types.CellType, ...],
    f_globals: dict[str, Any],
    L: tuple[Any, ...],
    backend: Any,
    runtime: BreakRuntime | None,
    eager: Callable[[tuple[Any, ...]], Any],
    dynamic: bool | None,
    region: _cache.Region,
) -> Any:
    """No cache entry of ``code`` for the compile ``region`` took the call: run one that
    does, trace a new one, or (past the recompile limit, or for code that cannot be traced)
    run eagerly."""
    key = region.key
    try:  # (the arguments are dropped as the call leaves: see run_eagerly)
        cache = _cache.cache_for(code)
        if cache.eager_reason is not None:
            if runtime is None:  # fullgraph=True: a whole graph was asked for
                raise Unsupported(f"{code.co_qualname}, which runs eagerly: {cache.eager_reason}")
            return eager(L)
        unsupported = unsupported_python()
        if unsupported is not None:
            if runtime is None:  # fullgraph=True: a whole graph was asked for
                raise Unsupported(f"{code.co_qualname}: {unsupported}")
            cache.eager_reason = unsupported
            _events.skipped(code, unsupported)
            return eager(L)
        reason = eager_for_now(code)  # (replaced builtins, an active mode: see api.modes)
        if reason is not None:
            if runtime is None:
                raise Unsupported(f"{code.co_qualname} while {reason}")
            _events.skipped(code, reason)
            return eager(L)
        failed = []
        own = [entry for entry in cache.entries if entry.key is key]
        for entry in own:
            result = entry.fn(L, closure, f_globals)
            if type(result) is not Miss:
                return result
            reason = entry.describe_guard(result.index)
            if 0 <= result.index < len(entry.guards):
                seen = seen_at(entry.guards[result.index], code, L, closure, f_globals)
                reason = reason if seen is None else f"{reason}; seen: {seen}"
            failed.append((entry.guarded_source(result.index), reason))
        cache.note_failures(failed)
        limit = _cache.limit_for(code, region)
        if len(own) >= limit:
            if runtime is None or torch_config.fails_on_limit():
                message = cache.limit_message(code, limit)
                raise _cache.RecompileLimitExceeded(f"{message}.")
            cache.warn_limit(code, limit)
            return eager(L)
        if failed:
            _events.recompile(code, failed[0][1])
            if torch_config.error_on_recompile():
                raise _recompile_error(code, failed[0][1])
        torch_config.warn_unread()
        too_costly = _cache.over_break_cost(code)
        if too_costly is not None:
            if runtime is None:
                raise Unsupported(too_costly)
            return _fall_back(code, cache, Unsupported(too_costly), eager, L)
        try:
            # dynamic shapes: which sizes the new trace makes symbolic (see _dynamic)
            mode = torch_config.shape_mode(dynamic)
            shape_plan = plan_after_miss(code, own, L, closure, f_globals, mode)
            if not own and mode is None:
                shape_plan = _loop_item_plan(code) or shape_plan
            _events.tracing(code)
            with device_modes_set_aside():  # (see api.modes)
                entry = capture(
                    code,
                    f_globals,
                    closure,
                    L,
                    backend,
                    fullgraph=runtime is None,
                    runtime=runtime,
                    shape_plan=shape_plan,
                    frozen_modules=region.frozen_modules,
                )
        except BackendCompilerFailed:
            raise  # the backend's own failure is the backend's error, as in torch.compile
        except Exception as error:
            exc = error if isinstance(error, Unsupported) else internal_error(error, None)
            if runtime is None:
                if exc is error:
                    raise
                raise exc from error
            failure = exc
        else:
            failure = None
        if failure is not None:
            # Not even a graph break can place this (e.g. the return value cannot be rebuilt):
            # the code runs eagerly from now on, and explain()/the logs say why. (Outside the
            # handler: the user's code must not see sapwood's error in sys.exc_info().)
            forget_frames(failure, sys.exc_info()[1])
            return _fall_back(code, cache, failure, eager, L)
        entry.key = key
        entry.region_name = region.name
        added = cache.add(entry)
        _cache.count_break_cost(code, entry)
        _events.captured(code, entry)
        result = entry.fn(L, closure, f_globals)
        if type(result) is Miss:
            # (a guard that can never hold, e.g. on an object rebuilt at each read: a sapwood bug)
            if added and entry in cache.entries:
                cache.entries.remove(entry)
            exc = Unsupported(
                f"a trace of {code.co_qualname} whose own guards fail on the traced call "
                f"({entry.describe_guard(result.index)})",
                hint="This is a sapwood bug; the code runs eagerly. Please report it.",
            )
            if runtime is None:
                raise exc
            return _fall_back(code, cache, exc, eager, L)
        return result
    finally:
        del L


def _recompile_error(code: types.CodeType, failed: str) -> Exception:
    """torch's ``RecompileError`` (``torch._dynamo.config.error_on_recompile``)."""
    from torch._dynamo.exc import RecompileError

    return RecompileError(
        f"sapwood: {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}) would "
        f"recompile while torch._dynamo.config.error_on_recompile is set; {failed}"
    )


def _fall_back(
    code: types.CodeType,
    cache: _cache.CodeCache,
    exc: Unsupported,
    eager: Callable[[tuple[Any, ...]], Any],
    L: tuple[Any, ...],
) -> Any:
    """Default mode, where no trace of ``code`` can be used: it runs eagerly from now on,
    with the reason in explain(), the ``skip`` event and the logs; a failure of sapwood's
    own code also warns, once per code."""
    cache.eager_reason = str(exc)
    _events.skipped(code, cache.eager_reason)
    if "sapwood bug" in exc.hint and not cache.warned:
        cache.warned = True
        warnings.warn(
            f"sapwood: {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}) runs "
            f"eagerly: {cache.eager_reason}",
            EagerFallbackWarning,
            stacklevel=user_stacklevel(),
        )
    return eager(L)


_runtimes: dict[tuple[int, bool | None], tuple[Any, BreakRuntime]] = {}


# Callees from these places run eagerly at a graph break instead of being compiled on their
# own: the standard library, torch itself and sapwood (model code from installed packages,
# e.g. transformers, is compiled: site-packages sits inside the standard library's folder).
_STDLIB_DIR = os.path.dirname(os.__file__) + os.sep
_TORCH_DIR = os.path.dirname(str(torch.__file__)) + os.sep
_SAPWOOD_DIR = os.path.dirname(os.path.dirname(__file__)) + os.sep  # the package root
_INSTALLED_DIRS = tuple(
    {sysconfig.get_paths()["purelib"] + os.sep, sysconfig.get_paths()["platlib"] + os.sep}
)


def _runs_uncompiled(filename: str) -> bool:
    if filename.startswith((_TORCH_DIR, _SAPWOOD_DIR)):
        return True
    return filename.startswith(_STDLIB_DIR) and not filename.startswith(_INSTALLED_DIRS)


#: How many resume functions may run nested in one another (see ``run_code``); each level
#: takes two Python frames, well inside the default recursion limit of 1000.
RESUME_DEPTH_LIMIT = 200
_resume_depth = [0]


def _break_runtime(backend: Any, dynamic: bool | None = None) -> BreakRuntime:
    """The functions break entries call to go on, for ``backend`` and the ``dynamic`` policy
    (one set per pair: resume functions and broken callees compile like their caller)."""
    known = _runtimes.get((id(backend), dynamic))
    if known is not None and known[0] is backend:
        return known[1]
    wrappers: weakref.WeakKeyDictionary[Any, Callable[..., Any]] = weakref.WeakKeyDictionary()
    region = _cache.region(backend, False)
    key = region.key

    def run_code(
        code: types.CodeType, L: tuple[Any, ...], C: tuple[Any, ...], G: dict[str, Any]
    ) -> Any:
        # each resume function is called from the entry before it (a loop that breaks at
        # every iteration nests one level per iteration): past a depth, the rest of the
        # function runs eagerly, in one frame, instead of exhausting Python's stack
        if _resume_depth[0] >= RESUME_DEPTH_LIMIT:
            _events.skipped(
                code,
                f"resume functions nested {RESUME_DEPTH_LIMIT} deep (a loop that breaks the"
                " graph at every iteration): the rest of this call runs eagerly",
            )
            return run_eagerly(code, L, C, G)
        _resume_depth[0] += 1
        try:  # (the arguments are dropped as the call leaves: see run_eagerly)
            cache = _cache.lookup(code)
            if cache is not None:
                for entry in cache.entries:
                    if entry.key is key:
                        result = entry.fn(L, C, G)
                        if type(result) is not Miss:
                            return result

            def eager(L: tuple[Any, ...]) -> Any:
                return run_eagerly(code, L, C, G)

            return _miss(code, C, G, L, backend, runtime, eager, dynamic, region)
        finally:
            _resume_depth[0] -= 1
            del L

    def call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        module = isinstance(fn, torch.nn.Module)
        target: Any = type(fn).forward if module else fn
        try:  # (the arguments are dropped as the call leaves: see run_eagerly)
            if (
                not isinstance(target, types.FunctionType)
                or is_disabled(target)
                or _runs_uncompiled(target.__code__.co_filename)
                or (module and "forward" in fn.__dict__)  # a forward of the instance's own
            ):
                return fn(*args, **kwargs)  # eagerly, as called
            if "<locals>" in target.__qualname__:
                # a function made by a call (a closure, defaults of its own): its wrapper
                # refers to it, so a table keyed by it weakly would keep it (and what it
                # holds) forever
                compiled = _compiled_function(target, backend, None, False, dynamic)
            else:
                known = wrappers.get(target)
                if known is None:
                    known = _compiled_function(target, backend, None, False, dynamic)
                    wrappers[target] = known
                compiled = known
            if not module:
                return compiled(*args, **kwargs)
            if _has_hooks(fn):
                # hooks the trace did not inline (e.g. FSDP2's): nn.Module.__call__ runs them
                # eagerly, as it would, around the compiled forward
                return call_with_forward(fn, functools.partial(compiled, fn), args, kwargs)
            return compiled(fn, *args, **kwargs)  # the module's forward, with it as self
        finally:
            del fn, target, args, kwargs

    runtime = BreakRuntime(compiled=run_code, eager=run_eagerly, call=call)
    _runtimes[(id(backend), dynamic)] = (backend, runtime)
    return runtime


def _has_hooks(module: torch.nn.Module) -> bool:
    """Whether ``nn.Module.__call__`` would run any hook around ``module.forward``."""
    if (
        module._forward_hooks
        or module._forward_pre_hooks
        or module._backward_hooks
        or module._backward_pre_hooks
    ):
        return True
    table = torch.nn.modules.module
    return bool(
        table._global_forward_hooks
        or table._global_forward_pre_hooks
        or table._global_backward_hooks
        or table._global_backward_pre_hooks
    )


def run_eagerly(
    code: types.CodeType, L: tuple[Any, ...], C: tuple[Any, ...], G: dict[str, Any]
) -> Any:
    """Run a (resume) code object as plain Python."""
    fn = types.FunctionType(code, G, code.co_name, None, C or None)
    try:
        return fn(*L)
    finally:
        del L  # (kept, a reference cycle through a passed exception: see _clearing)


_python_warned = False


def _warn_once_if_python_is_unsupported() -> None:
    global _python_warned
    reason = unsupported_python()
    if reason is None or _python_warned:
        return
    _python_warned = True
    warnings.warn(f"sapwood: {reason}.", UnsupportedPythonWarning, stacklevel=user_stacklevel())


def compile(
    fn_or_module: Any,
    *,
    backend: Any,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    ddp_split: bool = True,
    recompile_limit: int | None = None,
    isolate_recompiles: bool = False,
    name: str | None = None,
    guards: str = "all",
) -> Any:
    """Compile a function or ``nn.Module`` into graphs handed to ``backend``.

    ``backend(gm, example_inputs) -> callable`` is torch.compile's backend protocol. Without
    ``fullgraph``, a construct the tracer cannot capture becomes a graph break: it runs
    eagerly between two compiled graphs, and the code after it is compiled in a resume
    function. With ``fullgraph=True`` it raises :class:`Unsupported` naming the construct and
    the user's file:line. ``dynamic``: ``None`` traces static shapes first and makes the
    sizes that vary between calls symbolic on a recompile; ``True`` makes every input size
    symbolic from the start; ``False`` never (:func:`mark_dynamic`/:func:`mark_static` on a
    tensor override all three).

    ``recompile_limit``: how many variants of the function this compile may trace before
    calls that match none run eagerly (``fullgraph=True``: raise
    :class:`RecompileLimitExceeded`); ``None``, torch's
    ``torch._dynamo.config.recompile_limit`` if set, else 8. By default every compile of one
    function with the same backend and ``fullgraph`` shares its variants (and the limit);
    ``isolate_recompiles=True`` gives this compile its own. ``name`` labels this compile's
    captures in the logs (``TORCH_LOGS``/``set_logs`` topics).

    ``guards="inputs"`` (never the default): each ``nn.Module`` passed in is declared frozen;
    entries check its identity, not its tree (the contract: :mod:`.frozen_modules`).

    A ``DistributedDataParallel`` module compiles to a :class:`CompiledDDP`: DDP's own
    ``forward`` runs eagerly and the model it wraps is compiled, each graph cut at DDP's
    gradient-bucket boundaries so the all-reduce of a bucket overlaps the rest of the
    backward (``ddp_split=False``: one graph, every gradient at the end of the backward).
    """
    if dynamic not in (None, True, False):
        raise TypeError(f"dynamic must be None, True or False, not {dynamic!r}")
    if recompile_limit is not None and (type(recompile_limit) is not int or recompile_limit < 0):
        raise TypeError(f"recompile_limit must be an int >= 0 or None, not {recompile_limit!r}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, not {type(name).__name__}")
    if guards not in GUARD_MODES:
        raise ValueError(
            f"guards must be one of {', '.join(map(repr, GUARD_MODES))}, not {guards!r}"
        )
    _warn_once_if_python_is_unsupported()
    if not callable(backend):
        raise TypeError("backend must be a callable: backend(gm, example_inputs) -> callable")
    _load_torch_compiler_modules()
    region = _cache.region(
        backend,
        fullgraph,
        recompile_limit=recompile_limit,
        isolate=bool(isolate_recompiles),
        name=name,
        frozen_modules=guards == "inputs",
    )

    split = torch_config.ddp_split(ddp_split)
    return _compile_target(fn_or_module, backend, fullgraph, dynamic, split, region)


def _compile_target(
    target: Any,
    backend: Any,
    fullgraph: bool,
    dynamic: bool | None,
    ddp_split: bool,
    region: _cache.Region,
) -> Any:
    """``compile`` of one target, its arguments checked."""

    def compiled(fn: types.FunctionType, receiver: Any = None) -> Callable[..., Any]:
        return _compiled_function(fn, backend, receiver, fullgraph, dynamic, region)

    if isinstance(target, torch.nn.Module):
        if is_ddp(target) and not getattr(
            type(target.module), "__sapwood_compiled_module__", False
        ):
            ddp_backend = bucketed_backend(target, backend) if ddp_split else backend
            ddp_region = dataclasses.replace(
                region, key=_cache.compile_key(ddp_backend, fullgraph, region.frozen_modules)
            )

            def compile_forward(function: Any) -> Callable[..., Any]:
                return _compiled_function(
                    function, ddp_backend, None, fullgraph, dynamic, ddp_region
                )

            return CompiledDDP(target, compile_forward)
        return CompiledModule(target, compiled, fullgraph)
    fn = target
    if type(fn) is functools.partial:
        inner = _compile_target(fn.func, backend, fullgraph, dynamic, ddp_split, region)
        return functools.partial(inner, *fn.args, **fn.keywords)
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return compiled(fn.__func__, fn.__self__)
    if isinstance(fn, types.FunctionType):
        if is_disabled(fn):
            return fn
        return compiled(fn)
    if not callable(fn):
        raise TypeError(f"cannot compile {fn!r}: it is not callable")
    call = next((k.__dict__["__call__"] for k in type(fn).__mro__ if "__call__" in vars(k)), None)
    if not isinstance(fn, type) and isinstance(call, types.FunctionType):
        return compiled(call, fn)  # a callable object
    # a builtin, a class, a C method: a Python function calling it is compiled, so what the
    # call runs of the user's (a __bool__, an __init__, a callback) is traced like any code
    return compiled(caller_of(fn))


def _loop_item_plan(code: types.CodeType) -> ShapePlan | None:
    """A resume code inside a loop body sees a new item at each iteration: its first trace
    already makes an int item symbolic (the item ``FOR_ITER`` just took, and the loop's own
    variables), instead of tracing once for the first item's value, then again symbolic."""
    info = resume_info(code)
    if info is None:
        return None
    names = (*info.loop_targets, *([info.loop_item] if info.loop_item is not None else []))
    if not names:
        return None
    return ShapePlan(None, {}, frozenset(LocalSource(name) for name in names))
