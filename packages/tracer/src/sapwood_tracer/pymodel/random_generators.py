"""The C primitives of ``random``'s generators: ``seed``, ``random``, ``getrandbits``,
``getstate`` and ``setstate`` of ``_random.Random``, called on a generator of the inputs (the
``random`` module's own, whose bound methods the module's functions are, or any other).

Each call runs for real on the trace's private copy of the generator
(:class:`~sapwood_tracer.values.random_generators.GeneratorState`), so its result is exactly the
real call's at this point of the program, and errors are Python's own. The copy starts from:

* ``seed(n)`` with a constant ``n``, or ``setstate(state)``: the state they set;
* otherwise, the real generator's state at the call, read while tracing and guarded. A function
  traced again and finding its generator in another state (it draws on every call without
  seeding) is not specialised again: the draw becomes a graph break, so that the function does
  not recompile on every call.

``seed()`` without a seed draws from the operating system: a graph break.
"""

from __future__ import annotations

import _random
import types
import weakref
from typing import Any

from sapwood_graph import GuardKind

from ..errors import Unsupported
from ..guards.sources import ReaderSource
from ..values.base import ConstantValue, Context, Value
from ..values.exceptions import python_error
from ..values.random_generators import GeneratorState
from ..values.symbolic import specialised_int
from .builtins import _HANDLERS, Handler

__all__ = ["forget_specialised_states"]

#: The state each function (its code) was specialised on when a trace of it first read a
#: generator's state: a later trace finding another state breaks instead.
_SPECIALISED: weakref.WeakKeyDictionary[types.CodeType, tuple[int, ...]] = (
    weakref.WeakKeyDictionary()
)


def forget_specialised_states() -> None:
    """Forget which states functions were specialised on (``reset()``)."""
    _SPECIALISED.clear()


#: Primitives that set the whole state, so need not know it first.
_SETTERS = frozenset({"seed", "setstate"})


def _generator_of(tx: Context, receiver: Value, name: str) -> Any:
    obj = getattr(receiver, "obj", None)
    if not isinstance(obj, _random.Random) or receiver.source is None:
        raise Unsupported(f"calling Random.{name} on {receiver.describe()}")
    return obj


def _known_state(tx: Context, receiver: Value, real: Any, name: str) -> GeneratorState:
    """The trace's model of ``real``, starting from its state at the call (guarded)."""
    state = tx.side_effects.state_of(real)
    if state is not None:
        return state  # type: ignore[no-any-return]
    assert receiver.source is not None
    current = _random.Random.getstate(real)
    code = tx.frames[0].code
    earlier = _SPECIALISED.get(code)
    if earlier is not None and earlier != current:
        raise Unsupported(
            f"calling Random.{name} on a generator whose state changed since "
            f"{code.co_name} was last compiled",
            hint="Seed the generator (random.seed(n)) in the function to compile its draws.",
        )
    _SPECIALISED[code] = current
    tx.pin_identity(receiver)
    tx.guard(
        GuardKind.CONSTANT_MATCH, ReaderSource(receiver.source, _random.Random.getstate), current
    )
    private = _random.Random()
    private.setstate(current)
    state = GeneratorState(real, receiver.source, private)
    tx.side_effects.track_state(real, state)
    return state


def _primitive(name: str) -> Handler:
    method = getattr(_random.Random, name)

    def handler(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if not args:
            raise Unsupported(f"calling Random.{name} without a generator")
        receiver = args[0]
        real = _generator_of(tx, receiver, name)
        rest = [specialised_int(a) for a in args[1:]]
        named = {k: specialised_int(v) for k, v in kwargs.items()}
        if not all(v.is_constant() for v in (*rest, *named.values())):
            raise Unsupported(f"calling Random.{name} with arguments unknown while tracing")
        consts = [v.as_constant() for v in rest]
        kw_consts = {k: v.as_constant() for k, v in named.items()}
        if name == "seed" and not kw_consts and (not consts or consts[0] is None):
            raise Unsupported(
                "seeding a random generator from the operating system's randomness",
                hint="Pass a seed (random.seed(n)) to compile the draws that follow it.",
            )
        if name in _SETTERS:
            state = tx.side_effects.state_of(real)
            private = state.private if state is not None else _random.Random()
        else:
            state = _known_state(tx, receiver, real, name)
            private = state.private
        try:
            result = method(private, *consts, **kw_consts)
        except Exception as exc:  # (the real call raises the same, and changes nothing)
            raise python_error(type(exc), *exc.args) from None
        if state is None:
            # the state is set, not read: no guard on it, but on which generator it is
            tx.pin_identity(receiver)
            assert receiver.source is not None
            state = GeneratorState(real, receiver.source, private)
            tx.side_effects.track_state(real, state)
        if name != "getstate":
            state.changed = True
        return ConstantValue(result)

    return handler


for _name in ("seed", "random", "getrandbits", "getstate", "setstate"):
    _HANDLERS[getattr(_random.Random, _name)] = _primitive(_name)
