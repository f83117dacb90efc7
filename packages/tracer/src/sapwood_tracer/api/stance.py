"""``torch.compiler.set_stance``, obeyed by sapwood's compiled functions.

torch keeps the stance in ``torch._dynamo.eval_frame._stance`` and replaces the object at
each change; a compiled call reads it there (without importing torch._dynamo: a program that
set a stance has loaded it) and compares it by identity with the last default one it saw,
so the default costs an attribute read and an identity test per call.

* ``force_eager``: the function runs eagerly; nothing is compiled or looked up.
* ``eager_on_recompile``: a cached entry whose guards hold runs; a call that would trace
  (the first one too, as torch's run-only mode) runs eagerly instead.
* ``fail_on_recompile``: a cached entry whose guards hold runs; a call that would trace
  raises ``RuntimeError`` naming the function and the guard that failed.
* The stances sapwood does not implement (``eager_then_compile``,
  ``aot_eager_then_compile``, ``force_backend=``, ``skip_guard_eval_unsafe=True``) are
  refused: each compiled call raises :class:`StanceNotSupported` while they hold.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["StanceNotSupported", "current_stance", "refusal"]


class StanceNotSupported(NotImplementedError):
    """A ``torch.compiler.set_stance`` setting sapwood does not implement is in force."""


_seen_default: list[Any] = [None]
_eval_frame: list[Any] = [None]
_OBEYED = ("force_eager", "eager_on_recompile", "fail_on_recompile")


def current_stance() -> str | None:
    """The stance in force, or None for the default (the usual case, checked first)."""
    module = _eval_frame[0]
    if module is None:
        module = sys.modules.get("torch._dynamo.eval_frame")
        if module is None:  # (no stance was ever set)
            return None
        _eval_frame[0] = module
    stance = module._stance
    if stance is _seen_default[0]:
        return None
    return _read(stance)


def _read(stance: Any) -> str | None:
    name = getattr(stance, "stance", "default")
    extras = getattr(stance, "backend", None) is not None or getattr(
        stance, "skip_guard_eval_unsafe", False
    )
    if name == "default" and not extras:
        _seen_default[0] = stance
        return None
    if name not in _OBEYED or extras:
        raise StanceNotSupported(_describe(stance))
    return str(name)


def _describe(stance: Any) -> str:
    parts = [repr(getattr(stance, "stance", "default"))]
    if getattr(stance, "backend", None) is not None:
        parts.append(f"force_backend={stance.backend!r}")
    if getattr(stance, "skip_guard_eval_unsafe", False):
        parts.append("skip_guard_eval_unsafe=True")
    return (
        f"sapwood does not implement torch.compiler.set_stance({', '.join(parts)}); it obeys "
        "'default', 'force_eager', 'eager_on_recompile' and 'fail_on_recompile'"
    )


def refusal(code: types.CodeType, failed: str | None) -> RuntimeError:
    """The error of a call that would trace under ``fail_on_recompile``."""
    message = (
        "Detected recompile when torch.compile stance is 'fail_on_recompile'. "
        f"filename: '{code.co_filename}', function name: '{code.co_name}', "
        f"line number: {code.co_firstlineno}"
    )
    if failed:
        message += f"; the guard that failed: {failed}"
    return RuntimeError(message)
