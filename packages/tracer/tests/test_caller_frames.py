"""Callables whose result depends on the frame that calls them (its globals, file and line,
``__future__`` flags) give, compiled, what they give eagerly: a graph break would call them
from generated code, so the calling function runs eagerly as a whole instead."""

from __future__ import annotations

import collections
import textwrap
import warnings
from typing import Any

import torch

import sapwood_tracer


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


def _same(fn: Any, *args: Any) -> None:
    expected = fn(*args)
    got = _compiled(fn)(*args)
    assert type(got) is type(expected)
    assert repr(got) == repr(expected)


def test_a_class_made_by_type_takes_its_module_from_the_callers_globals():
    def fn(x):
        y = x + 1
        cls = type("Made", (), {"a": 1})
        return y, cls.__module__, cls.__qualname__

    _same(fn, torch.ones(2))


def test_a_class_made_by_type_with_its_own_module_name_keeps_it():
    def fn(x):
        cls = type("Made", (), {"__module__": "elsewhere"})
        return x * 2, cls.__module__

    _same(fn, torch.ones(2))


def test_a_namedtuple_takes_its_module_from_the_callers_globals():
    def fn(x):
        point = collections.namedtuple("Point", "x y")
        return x - 1, point.__module__, point(1, 2)._asdict()

    _same(fn, torch.ones(2))


def test_a_warning_names_the_users_file_and_line():
    def fn(x):
        y = x + 1
        warnings.warn("careful", UserWarning, stacklevel=1)
        return y

    def caught(f: Any) -> list[tuple[str, int, str]]:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            f(torch.ones(2))
        return [(w.filename, w.lineno, str(w.message)) for w in seen if "careful" in str(w.message)]

    assert caught(_compiled(fn)) == caught(fn)
    assert caught(fn)[0][0] == __file__


def test_exec_of_a_string_does_not_inherit_sapwoods_future_flags():
    # ``fn`` is compiled without ``from __future__ import annotations`` (this module has it),
    # so the annotation exec runs is evaluated; sapwood's generated code must not lend it its
    # own flags at the graph break
    text = textwrap.dedent(
        """
        def fn(x):
            namespace = {}
            exec(source, namespace, namespace)
            flags = compile(source, "<s>", "exec").co_flags
            return x + 1, namespace["__annotations__"], flags
        """
    )
    scope: dict[str, Any] = {"source": "x: int = 5\n", "__name__": __name__}
    exec(compile(text, __file__, "exec", dont_inherit=True), scope)
    fn = scope["fn"]
    _same(fn, torch.ones(2))
    assert fn(torch.ones(2))[1] == {"x": int}


def test_exec_of_a_string_inherits_the_users_future_flags():
    def fn(x):
        namespace: dict[str, Any] = {}
        exec("y: int = 5\n", namespace, namespace)
        return x + 1, namespace["__annotations__"]

    # this module has ``from __future__ import annotations``: the annotation stays a string
    _same(fn, torch.ones(2))
    assert fn(torch.ones(2))[1] == {"y": "int"}
