"""A doctest example as the body of a function an engine can compile.

An example is one statement typed at the interactive prompt, compiled by doctest in
``"single"`` mode and run in the doctest's globals. An engine compiles functions, so
:func:`wrap_example` turns the example into a function with the same effect:

- every name of the example's top-level scope is declared ``global``, so what the example
  binds stays in the doctest's globals for the examples after it, as at the prompt (a
  ``def`` or ``class`` of a name declared ``global`` keeps its plain ``__qualname__``);
- an expression statement of the top-level scope (the statements whose values
  ``"single"`` mode shows through ``sys.displayhook``: those not inside a ``def``, a
  ``class`` or a ``lambda``) is shown the same way: the last top-level statement is
  returned, and the caller shows the value; any other goes to a ``display`` function the
  function takes as its one parameter (the harness passes one that the engine leaves
  eager);
- ``<example>.<locals>.`` is removed from the qualified names of the code objects nested
  in the function (lambdas, generator expressions), as they are at the prompt.

An example that cannot be wrapped keeps running as doctest runs it, uncompiled: one that
does not compile in ``"single"`` mode (a syntax error the test expects, which must stay
one), or whose function does not compile (``yield``, ``await`` or ``return`` at the top
level, ``from m import *``, an annotated name, ...).
"""

from __future__ import annotations
import __future__

import ast
import symtable
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["EXAMPLE_FUNCTION", "WrappedExample", "future_flags", "wrap_example"]

EXAMPLE_FUNCTION = "__doctest_example__"
_DISPLAY = "__doctest_display__"
_LOCALS_PREFIX = f"{EXAMPLE_FUNCTION}.<locals>."


@dataclass(frozen=True)
class WrappedExample:
    """The function of one example, and how to show what it returns."""

    function: types.FunctionType
    returns_value: bool  # its last statement was an expression: show the returned value
    takes_display: bool  # it shows other expression statements through its parameter

    def run(self, call: Any, display: Any) -> None:
        """Run through ``call(function, *args)`` and show values as the prompt would."""
        args = (display,) if self.takes_display else ()
        value = call(self.function, *args)
        if self.returns_value:
            sys.displayhook(value)


def future_flags(globs: dict[str, Any]) -> int:
    """The compiler flags of the ``__future__`` features imported into ``globs``."""
    flags = 0
    for name in __future__.all_feature_names:
        feature = getattr(__future__, name)
        if globs.get(name) is feature:
            flags |= feature.compiler_flag
    return flags


def _scope_names(source: str, filename: str) -> list[str]:
    table = symtable.symtable(source, filename, "exec")
    return sorted(symbol.get_name() for symbol in table.get_symbols())


def _top_level_statements(body: list[ast.stmt]) -> Iterator[tuple[list[ast.stmt], int]]:
    """(list, index) of every statement of the top-level scope, nested blocks included."""
    for index, statement in enumerate(body):
        yield body, index
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            block = getattr(statement, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield from _top_level_statements(block)
        for handler in getattr(statement, "handlers", ()):
            yield from _top_level_statements(handler.body)
        for case in getattr(statement, "cases", ()):
            yield from _top_level_statements(case.body)


def _display_call(expression: ast.expr) -> ast.stmt:
    call = ast.Call(func=ast.Name(id=_DISPLAY, ctx=ast.Load()), args=[expression], keywords=[])
    return ast.copy_location(ast.Expr(value=ast.copy_location(call, expression)), expression)


def _strip_wrapper_qualnames(code: types.CodeType) -> types.CodeType:
    consts = tuple(
        _strip_wrapper_qualnames(c) if isinstance(c, types.CodeType) else c for c in code.co_consts
    )
    qualname = code.co_qualname.removeprefix(_LOCALS_PREFIX)
    return code.replace(co_consts=consts, co_qualname=qualname)


def wrap_example(source: str, filename: str, globs: dict[str, Any]) -> WrappedExample | None:
    """The function of the example ``source`` in ``globs``; ``None`` where it cannot be
    wrapped (it then runs as doctest runs it)."""
    flags = future_flags(globs)
    try:
        compile(source, filename, "single", flags, True)
        names = _scope_names(source, filename)
        module = ast.parse(source, filename, "exec")
    except (SyntaxError, ValueError):
        return None
    body = module.body
    returns_value = bool(body) and isinstance(body[-1], ast.Expr)
    takes_display = False
    for block, index in list(_top_level_statements(body)):
        statement = block[index]
        if not isinstance(statement, ast.Expr):
            continue
        if block is body and index == len(body) - 1:
            block[index] = ast.copy_location(ast.Return(value=statement.value), statement)
        else:
            block[index] = _display_call(statement.value)
            takes_display = True
    template = ast.parse(f"def {EXAMPLE_FUNCTION}({_DISPLAY if takes_display else ''}): pass")
    function = template.body[0]
    assert isinstance(function, ast.FunctionDef)
    declared: list[ast.stmt] = [ast.Global(names=names)] if names else []
    function.body = declared + body
    ast.fix_missing_locations(template)
    try:
        code = compile(template, filename, "exec", flags, True)
    except SyntaxError:
        return None
    inner = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    fn = types.FunctionType(_strip_wrapper_qualnames(inner), globs, EXAMPLE_FUNCTION)
    return WrappedExample(fn, returns_value, takes_display)
