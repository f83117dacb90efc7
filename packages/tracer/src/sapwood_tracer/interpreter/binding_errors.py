"""The ``TypeError`` CPython raises when a call's arguments do not fit a function's
parameters (``f() missing 1 required positional argument: 'x'``, ``takes 2 positional
arguments but 3 were given``, ...), raised in the traced program as CPython raises it, so a
handler of the program (``assertRaises(TypeError, s.add)``) sees it.

The message is CPython's own: a stub with the same parameters, names, defaults and
qualified name (its body empty) is called with as many positional arguments and the same
keywords, and binding them fails in the interpreter's own code. Where the stub cannot be made
(a parameter name that is not an identifier, as in generated code) or binds after all, the
call is a graph break with ``reason`` instead.
"""

from __future__ import annotations

import inspect
import keyword
import types
from collections.abc import Iterable
from typing import Any

from ..errors import Unsupported
from ..values.exceptions import python_error

__all__ = ["binding_error"]


def binding_error(
    code: types.CodeType,
    nargs: int,
    keywords: Iterable[str],
    ndefaults: int,
    kwdefault_names: Iterable[str],
    qualname: str | None,
    reason: str,
) -> Unsupported:
    """What a call of ``code`` with ``nargs`` positional arguments and ``keywords`` raises,
    given ``ndefaults`` positional defaults and keyword-only defaults for ``kwdefault_names``;
    ``qualname``: the function's ``__qualname__``, which CPython's message names (None where
    the trace cannot tell it)."""
    stub = _stub(code, ndefaults, frozenset(kwdefault_names))
    if stub is None or qualname is None:
        return Unsupported(reason)
    stub.__qualname__ = qualname
    try:
        stub(*([None] * nargs), **dict.fromkeys(keywords))
    except TypeError as exc:
        return python_error(TypeError, str(exc))
    return Unsupported(reason)


def _stub(code: types.CodeType, ndefaults: int, kwdefault_names: frozenset[str]) -> Any:
    argc, posonly, kwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    varargs = bool(code.co_flags & inspect.CO_VARARGS)
    varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    names = code.co_varnames[: argc + kwonly + varargs + varkw]
    if not all(n.isidentifier() and not keyword.iskeyword(n) for n in names):
        return None
    params: list[str] = []
    for i in range(argc):
        params.append(names[i] + ("=None" if i >= argc - ndefaults else ""))
        if i == posonly - 1:
            params.append("/")
    if varargs:
        params.append("*" + names[argc + kwonly])
    elif kwonly:
        params.append("*")
    for name in names[argc : argc + kwonly]:
        params.append(name + ("=None" if name in kwdefault_names else ""))
    if varkw:
        params.append("**" + names[argc + kwonly + varargs])
    namespace: dict[str, Any] = {}
    exec(f"def stub({', '.join(params)}):\n    pass\n", {"__builtins__": {}}, namespace)
    stub = namespace["stub"]
    return stub
