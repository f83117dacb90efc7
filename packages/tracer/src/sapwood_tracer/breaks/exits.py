"""Graph breaks: what a cache entry does when its trace stopped before the function's end.

A trace that met a construct it cannot capture is run again and stopped just before that
construct (the n-th execution of one instruction of the root frame, see :mod:`sapwood_tracer.interpreter.frame`). The
state there — value stack, fast locals, cell contents, open ``with`` blocks — becomes a
:class:`BreakExit`. The cache entry then:

1. runs the graph recorded so far (every open context is closed *in the graph*, so the graph
   leaves torch's global state as it found it) and replays the side effects;
2. rebuilds the stack and locals as real Python objects;
3. runs the construct eagerly, inside the torch contexts that were open (``with`` again);
4. continues in a resume function (see :mod:`.resume`) that starts after the construct, called
   through the compile path so the rest of the function is compiled too.

Three kinds of break:

* ``call`` — a CALL whose callee could not be traced (a C function, ``print``, a disabled
  function, or a Python callee whose own trace broke: that callee is then called through the
  compile path, so its code before and after its own break is compiled as well);
* ``jump`` — a conditional jump on a value whose truth is data-dependent (``if x.sum() > 0``);
  ``bool()`` runs eagerly and one of two resume functions continues;
* value operations (operators, subscripts, comparisons, ``in``/``is``, attribute stores) the
  trace cannot model are run eagerly through ``operator`` as a ``call`` break;
* ``rest`` — any other instruction: the rest of the function from that instruction runs
  eagerly (correct, not fast; ``explain`` reports it).

Invariant: nothing is computed twice and nothing is lost — every value the eager construct or
the resume function can see is rebuilt from the graph's outputs, the inputs, or constants.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from ..interpreter.frame import LazyLocals
from ..interpreter.instructions import Instruction
from ..interpreter.registry import dispatch_table
from ..values.base import NULL, ConstantValue, IteratorValue, Value
from ..values.contexts import ContextExitValue, settle_loose_grad_mode
from ..values.functions import BoundMethodValue, UserFunctionValue
from ..values.modules import ModuleValue
from ..values.tensors import TensorMethodValue
from .layout import TorchContext, passable, resume_layout, torch_context
from .liveness import live_locals
from .resume import resume_code, resume_info, super_self

if TYPE_CHECKING:
    from ..interpreter.frame import SymbolicFrame
    from ..interpreter.session import TraceSession
    from .outputs import OutputCollector

__all__ = ["BreakExit", "break_exit"]

_CALLS = frozenset({"CALL", "CALL_KW", "CALL_FUNCTION_EX"})
_JUMPS_ON_TRUTH = {
    # opname: (jumps when the value is true?, keeps the value on the stack when jumping?)
    "POP_JUMP_IF_TRUE": (True, False),
    "POP_JUMP_IF_FALSE": (False, False),
    "POP_JUMP_FORWARD_IF_TRUE": (True, False),
    "POP_JUMP_FORWARD_IF_FALSE": (False, False),
    "POP_JUMP_BACKWARD_IF_TRUE": (True, False),
    "POP_JUMP_BACKWARD_IF_FALSE": (False, False),
    "JUMP_IF_TRUE_OR_POP": (True, True),
    "JUMP_IF_FALSE_OR_POP": (False, True),
}


class Continuation:
    """One way on after the break: the resume code and the values it receives.

    The code of a way taken only when the eager part raises (``on_error``) is made the first
    time it is needed (``make``): most calls never raise, and a resume code is as long as the
    function it resumes, so a function with many breaks would otherwise assemble each twice.
    """

    __slots__ = ("_code", "_make", "eager", "values")

    def __init__(
        self,
        code: types.CodeType | None,
        values: list[Value],
        eager: bool = False,
        make: Callable[[], types.CodeType] | None = None,
    ) -> None:
        assert (code is None) != (make is None)
        self._code = code
        self._make = make
        self.values = values
        self.eager = eager  # run the rest uncompiled (a ``rest`` break)

    @property
    def made(self) -> bool:
        return self._code is not None

    @property
    def code(self) -> types.CodeType:
        if self._code is None:
            assert self._make is not None
            self._code, self._make = self._make(), None
        return self._code


@dataclass(eq=False)
class BreakExit:
    """The root frame's state at a graph break, and how the entry goes on from there."""

    kind: str  # "call", "jump", "next" or "rest"
    reason: str
    location: str
    contexts: list[TorchContext]
    #: call: the callee, positional and keyword argument values; a ``CALL_FUNCTION_EX``'s
    #: ``*`` and ``**`` operands, which the eager call unpacks (after ``args``)
    callee: Value | None = None
    args: list[Value] = field(default_factory=list)
    kwargs: dict[str, Value] = field(default_factory=dict)
    star_args: Value | None = None
    star_kwargs: Value | None = None
    #: jump: the tested value and whether truth jumps
    tested: Value | None = None
    jump_if_true: bool = False
    #: next: the iterator whose next item the entry asks for
    iterator: Value | None = None
    #: call: one continuation (the result is pushed); jump: [taken, not taken]; next: [an
    #: item (pushed), exhausted]; rest: one
    continuations: list[Continuation] = field(default_factory=list)
    #: call/jump: where an exception raised by the eager part goes (the original's handlers,
    #: run eagerly from the breaking instruction)
    on_error: Continuation | None = None

    def forget_values(self) -> None:
        """Drop the trace's values once the entry is generated: they hold the objects of the
        call that was traced (its inputs among them), which a cache entry must not keep
        alive; what the entry needs of them is in its code."""
        self.callee = self.tested = self.iterator = self.star_args = self.star_kwargs = None
        self.args, self.kwargs = [], {}
        for continuation in [*self.continuations, self.on_error]:
            if continuation is not None:
                continuation.values = []

    def values(self) -> list[Value]:
        """Every value the entry must rebuild (for collecting graph outputs)."""
        out = [v for c in self.continuations for v in c.values]
        out += [*self.args, *self.kwargs.values()]
        for v in (self.callee, self.tested, self.iterator, self.star_args, self.star_kwargs):
            if v is not None:
                out.append(v)
        return out


def break_exit(tx: TraceSession, frame: SymbolicFrame, reason: str) -> BreakExit:
    """Describe the break the root ``frame`` stopped at, and close its contexts in the graph."""
    inst = frame.current
    assert inst is not None
    if frame.is_generator:
        raise Unsupported("a graph break inside a generator")
    settle_loose_grad_mode(tx)  # (the mode it left set: replayed before the eager part)
    code = frame.code
    info = resume_info(code)
    original = info.original if info is not None else code
    if info is not None and inst.index < info.prologue_end:
        raise Unsupported("a graph break inside a resume function's prologue")

    def original_index(index: int) -> int:
        if info is None:
            return index
        found = info.original_index(index)
        if found is None:
            raise Unsupported("a graph break at an instruction a resume function added")
        return found

    stack = list(frame.stack)
    contexts: list[TorchContext] = []
    for value in stack:
        if isinstance(value, ContextExitValue):
            ctx = torch_context(value.context)
            if ctx is not None:
                contexts.append(ctx)

    # (a resume function's own "stack <i>" parameters are dead once its prologue ran)
    def passed_value(name: str) -> Value | None:
        if isinstance(frame.locals, LazyLocals):
            return frame.locals.passed_value(name)
        return frame.locals.get(name)

    local_names = tuple(
        name
        for name in code.co_varnames
        if passed_value(name) is not None and not name.startswith("stack ")
    )
    # every cell variable goes over as a cell object (closures made so far share it)
    cell_names = tuple(name for name in code.co_cellvars if name in frame.cells)
    locals_values = [passed_value(n) for n in local_names]
    cell_values = [frame.cells[n] for n in cell_names]
    # close the open contexts in the graph, innermost first: the graph ends balanced
    for manager in reversed(list(tx.open_contexts)):
        tx.exit_context(manager)

    exit = BreakExit(
        kind="rest",
        reason=reason,
        location=frame.location(),
        contexts=contexts,
    )

    # what else the entry hands on at this break: an iterator a local shares with any of it
    # is passed as itself, never made again
    held = [
        *stack,
        *cell_values,
        *tx.side_effects.values(),
        *(write.value for write in tx.side_effects.final_writes()),
    ]

    def continuation(
        target: int, items: list[Value], eager: bool = False, raises: bool = False
    ) -> Continuation:
        start = original_index(target)
        live = live_locals(original, start)
        names, values = local_names, locals_values
        instance = super_self(original)
        if live is not None:
            kept = [i for i, name in enumerate(local_names) if name in live or name == instance]
            names = tuple(local_names[i] for i in kept)
            values = [locals_values[i] for i in kept]
        if instance is not None:
            if instance not in names:  # a cell, or unbound: no first local to hand super()
                raise Unsupported(
                    f"a graph break in {original.co_qualname}, which calls super() and "
                    f"whose {instance!r} is not a plain local there"
                )
            first = names.index(instance)
            names = (names[first], *names[:first], *names[first + 1 :])
            values = [values[first], *values[:first], *values[first + 1 :]]
        layout, passed, plain_locals = resume_layout(items, names, values, cell_names, held=held)
        if instance is not None:
            if not plain_locals or layout.local_names[0] != instance:
                raise Unsupported(f"a graph break in {original.co_qualname}, which calls super()")
            layout = dataclasses.replace(layout, leading=True)
        values = layout.arguments(passed, plain_locals, cell_values)
        if raises:
            layout = dataclasses.replace(layout, raises=True)
            return Continuation(
                None, values, eager, make=functools.partial(resume_code, original, start, layout)
            )
        return Continuation(resume_code(original, start, layout), values, eager)

    if inst.opname in _CALLS or inst.opname in _JUMPS_ON_TRUTH:
        exit.on_error = continuation(inst.index, stack, eager=True, raises=True)

    if inst.opname in _CALLS:
        read = dispatch_table(frame.version)[inst.opname].operands  # type: ignore[attr-defined]
        star = getattr(read, "star", None)
        if star is not None:  # (f(*xs, **kw): the eager call unpacks them, as Python would)
            callee, args, exit.star_args, exit.star_kwargs, depth = star(frame, inst)
            kwargs = {}
        else:
            callee, args, kwargs, depth = read(frame, inst)
        below = stack[: len(stack) - depth]
        result_slot = _ResultPlaceholder()
        cont = continuation(inst.index + 1, [*below, result_slot])
        exit.kind = "call"
        exit.callee, exit.args, exit.kwargs = callee, args, kwargs
        exit.continuations = [cont]
        return exit
    if (
        inst.opname == "FOR_ITER"
        and stack
        and isinstance(stack[-1], IteratorValue)
        and passable(stack[-1])
    ):
        # the loop's next item: ``next()`` runs eagerly, then the body or the loop's exit
        # goes on in a resume function (the same ones at every iteration)
        exit.kind = "next"
        exit.iterator = stack[-1]
        exit.continuations = [
            continuation(inst.index + 1, [*stack, _ResultPlaceholder()]),
            _loop_exit(frame, inst, stack, continuation),
        ]
        exit.on_error = continuation(inst.index, stack, eager=True, raises=True)
        return exit
    truth = _JUMPS_ON_TRUTH.get(inst.opname)
    if truth is not None and inst.target is not None:
        jump_if_true, keeps = truth
        tested = stack[-1]
        below = stack[:-1]
        taken = continuation(inst.target, [*below, tested] if keeps else below)
        fallthrough = continuation(inst.index + 1, below)
        exit.kind = "jump"
        exit.tested = tested
        exit.jump_if_true = jump_if_true
        exit.continuations = [taken, fallthrough]
        return exit
    operation = _eager_operation(inst, frame.version)
    if operation is not None and len(stack) >= operation.arity:
        # a value operation the trace could not model: the operator runs eagerly, like a call
        operands = stack[len(stack) - operation.arity :]
        below = stack[: len(stack) - operation.arity]
        if not any(v is NULL or isinstance(v, (ContextExitValue, IteratorValue)) for v in operands):
            result_slot = _ResultPlaceholder()
            items = [*below, result_slot] if operation.pushes else below
            cont = continuation(inst.index + 1, items)
            exit.kind = "call"
            exit.callee = ConstantValue(operation.fn)
            exit.args = [
                ConstantValue(inst.argval) if i == "name" else operands[i]  # type: ignore[index]
                for i in operation.order
            ]
            exit.continuations = [cont]
            exit.on_error = continuation(inst.index, stack, eager=True, raises=True)
            return exit
    exit.continuations = [continuation(inst.index, stack, eager=True)]
    return exit


def _loop_exit(
    frame: SymbolicFrame, inst: Instruction, stack: list[Value], continuation: Any
) -> Continuation:
    """Where an exhausted ``FOR_ITER`` goes on, with the stack it leaves (as the running
    Python's FOR_ITER handler of the tracer does it)."""
    assert inst.target is not None
    version = frame.version or sys.version_info[:2]
    if version >= (3, 13):
        # CPython skips END_FOR and POP_TOP; the tracer runs them on a placeholder and the
        # iterator, and so does the resume function
        return continuation(inst.target, [*stack, ConstantValue(None)])  # type: ignore[no-any-return]
    target = inst.target
    if version >= (3, 12) and frame.instructions[target].opname == "END_FOR":
        target += 1  # 3.12 pops the iterator itself and skips the END_FOR
    return continuation(target, stack[:-1])  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class _Operation:
    """An instruction run eagerly as ``fn(*operands in order)``."""

    fn: Any
    arity: int  # stack items it consumes
    order: tuple[Any, ...]  # operand indices (from the deepest), "name" for the argval
    pushes: bool = True


def _not_contains(container: Any, item: Any) -> bool:
    return item not in container


def _slice_get(container: Any, start: Any, stop: Any) -> Any:
    return container[start:stop]


def _slice_set(value: Any, container: Any, start: Any, stop: Any) -> None:
    container[start:stop] = value


def _eager_operation(inst: Instruction, version: tuple[int, int] | None) -> _Operation | None:
    import dis
    import operator

    from ..pymodel import operators as ops

    name = inst.opname
    if name == "BINARY_OP":
        symbol = dis._nb_ops[inst.arg][1]  # type: ignore[attr-defined, index]
        return _Operation(ops.INPLACE.get(symbol) or ops.BINARY[symbol], 2, (0, 1))
    if name == "COMPARE_OP" and inst.argval in ops.COMPARE:
        compare = dispatch_table(version)["COMPARE_OP"].eager_function(inst)  # type: ignore[attr-defined]
        return _Operation(compare, 2, (0, 1))
    unary = {
        "UNARY_NEGATIVE": operator.neg,
        "UNARY_POSITIVE": operator.pos,
        "UNARY_INVERT": operator.invert,
        "UNARY_NOT": operator.not_,
    }
    if name in unary:
        return _Operation(unary[name], 1, (0,))
    table = {
        "IS_OP": _Operation(operator.is_not if inst.arg else operator.is_, 2, (0, 1)),
        "CONTAINS_OP": _Operation(_not_contains if inst.arg else operator.contains, 2, (1, 0)),
        "BINARY_SUBSCR": _Operation(operator.getitem, 2, (0, 1)),
        "STORE_SUBSCR": _Operation(operator.setitem, 3, (1, 2, 0), pushes=False),
        "DELETE_SUBSCR": _Operation(operator.delitem, 2, (0, 1), pushes=False),
        "STORE_ATTR": _Operation(setattr, 2, (1, "name", 0), pushes=False),
        "BINARY_SLICE": _Operation(_slice_get, 3, (0, 1, 2)),
        "STORE_SLICE": _Operation(_slice_set, 4, (0, 1, 2, 3), pushes=False),
    }
    return table.get(name)


class _ResultPlaceholder(Value):
    """Stands for the eager call's result on the rebuilt stack."""

    __slots__ = ()

    def describe(self) -> str:
        return "the result of the call that broke the graph"


# -- the generated tail of an entry -----------------------------------------------------------


def emit_break_tail(
    em: Any,
    exit: BreakExit,
    collector: OutputCollector,
    built: dict[int, str],
    runtime: BreakRuntime,
) -> None:
    """Append to ``em.lines`` the entry's tail: rebuild, run the construct, resume."""
    from .outputs import _emit

    indent = "    "

    def value(v: Value) -> str:
        return _emit(em, v, collector, built, indent)

    lines = em.lines
    # Rebuild everything first (pure construction), then run the eager construct.
    tested = value(exit.tested) if exit.tested is not None else None
    iterator = value(exit.iterator) if exit.iterator is not None else None
    call_expr = None
    if exit.kind == "call":
        assert exit.callee is not None
        call_expr = _call_expression(em, exit, value, runtime)
    continuations = []
    for cont in exit.continuations:
        parts = []
        for v in cont.values:
            parts.append("r" if isinstance(v, _ResultPlaceholder) else value(v))
        continuations.append((cont, parts))
    error_parts = [value(v) for v in exit.on_error.values] if exit.on_error else []

    def resume(cont: Continuation, parts: list[str]) -> str:
        run = runtime.eager if cont.eager else runtime.compiled
        args = ", ".join(parts) + ("," if len(parts) == 1 else "")
        # a code made on first need is read from its continuation then
        code = em.const(cont.code) if cont.made else f"{em.const(cont)}.code"
        return f"{em.const(run)}({code}, ({args}), C, G)"

    inner = indent
    if exit.on_error is not None:
        # the resume functions run after the handlers below closed: the rest of the function
        # must not see their exception as the one being handled (sys.exc_info, __context__)
        lines.append(f"{inner}err = None")
        lines.append(f"{inner}try:")
        inner += "    "
    for ctx in exit.contexts:
        args = ", ".join(em.const(a) for a in ctx.args)
        lines.append(f"{inner}with {em.const(ctx.factory)}({args}):")
        inner += "    "
    if exit.kind == "call":
        lines.append(f"{inner}r = {call_expr}")
    elif exit.kind == "jump":
        lines.append(f"{inner}b = not not {tested}")
    elif exit.kind == "next":
        lines.append(f"{inner}r = next({iterator})")
    else:
        lines.append(f"{inner}pass")
    exhausted = em.const(_EXHAUSTED)
    if exit.kind == "next":
        lines.append(f"{indent}except StopIteration:")  # exhausted, as FOR_ITER sees it
        lines.append(f"{indent}    r = {exhausted}")
    if exit.on_error is not None:
        # raised by the eager part: on in the original code, at the breaking instruction,
        # so the user's except/finally/with handlers see it as they would eagerly
        # The exception goes to the resume function in a list it empties (see _raise_passed):
        # a frame on the way there (this one, the runtime's) that held the exception itself
        # would be reachable from its traceback, a reference cycle keeping the call's
        # values alive. Without this frame in its traceback, the user's traceback shows the
        # instruction in the resume function instead.
        lines.append(f"{indent}except BaseException as e:")
        lines.append(f"{indent}    err = [e.with_traceback(e.__traceback__.tb_next)]")
        lines.append(f"{indent}if err is not None:")
        lines.append(f"{indent}    return {resume(exit.on_error, [*error_parts, 'err'])}")
    if exit.kind == "next":
        lines.append(f"{indent}if r is {exhausted}:")
        lines.append(f"{indent}    return {resume(*continuations[1])}")

    if exit.kind == "jump":
        taken, fallthrough = continuations
        test = "b" if exit.jump_if_true else "not b"
        lines.append(f"{indent}if {test}:")
        lines.append(f"{indent}    return {resume(*taken)}")
        lines.append(f"{indent}return {resume(*fallthrough)}")
    elif exit.kind == "next":
        lines.append(f"{indent}return {resume(*continuations[0])}")
    else:
        lines.append(f"{indent}return {resume(*continuations[0])}")


_EXHAUSTED = object()  # (what the entry's next() gives for an exhausted loop iterator)


@dataclass(frozen=True, slots=True)
class BreakRuntime:
    """The functions a break entry calls (bound by the compile path, with its backend)."""

    compiled: Any  # (code, L, C, G) -> result: through the per-code cache
    eager: Any  # (code, L, C, G) -> result: plain Python
    call: Any  # (fn, args, kwargs) -> result: a Python callee through the compile path


def _call_expression(em: Any, exit: BreakExit, value: Any, runtime: BreakRuntime) -> str:
    callee = exit.callee
    assert callee is not None
    # a ``*``/``**`` operand alone is passed as it is, for the call to unpack (with Python's
    # own errors for one that is no iterable or mapping)
    args = [value(a) for a in exit.args]
    if exit.star_args is not None and not args:
        arg_text = value(exit.star_args)
    else:
        if exit.star_args is not None:
            args.append(f"*{value(exit.star_args)}")
        arg_text = "(" + "".join(f"{a}, " for a in args) + ")"
    if exit.star_kwargs is not None:
        kw_text = value(exit.star_kwargs)
    else:
        kw_text = (
            "{" + ", ".join(f"{em.const(k)}: {value(v)}" for k, v in exit.kwargs.items()) + "}"
        )
    if isinstance(callee, BoundMethodValue) and isinstance(callee.function, UserFunctionValue):
        fn = _function_expression(em, callee.function, value)
        receiver = value(callee.receiver)
        return f"{em.const(runtime.call)}({fn}, ({receiver}, *{arg_text}), {kw_text})"
    if isinstance(callee, UserFunctionValue):
        fn = _function_expression(em, callee, value)
        return f"{em.const(runtime.call)}({fn}, {arg_text}, {kw_text})"
    if isinstance(callee, ModuleValue):
        return f"{em.const(runtime.call)}({value(callee)}, {arg_text}, {kw_text})"
    if isinstance(callee, TensorMethodValue):
        target = f"getattr({value(callee.tensor)}, {em.const(callee.name)})"
        return f"{target}(*{arg_text}, **{kw_text})"
    receiver = getattr(callee, "receiver", None)
    name = getattr(callee, "name", None)
    if receiver is not None and isinstance(name, str):
        target = f"getattr({value(receiver)}, {em.const(name)})"
        return f"{target}(*{arg_text}, **{kw_text})"
    return f"{value(callee)}(*{arg_text}, **{kw_text})"


def _function_expression(em: Any, fn: UserFunctionValue, value: Any) -> str:
    if fn.source is not None:
        return str(em.source(fn.source, "    "))
    real = getattr(fn, "fn", None)
    if isinstance(real, types.FunctionType):
        return str(em.const(real))
    return str(value(fn))


def location_of(exc: Unsupported) -> str:
    return exc.user_location or exc.location or "<unknown>"
