"""A program that replaces a builtin (``builtins.len = ...``) changes what its own code
calls, never what sapwood does: sapwood's modules and generated code keep the builtins they
were imported with, and a call traced while builtins are replaced runs eagerly (the trace
would otherwise use the real ones where the program's code would call the replacement)."""

from __future__ import annotations

import builtins
import functools
from typing import Any

import pytest
import torch

import sapwood_tracer
from sapwood_tracer.pinned import BUILTINS, replaced_builtins


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


@pytest.fixture
def restore_builtins():
    saved = builtins.len
    yield
    builtins.len = saved


class _Marked(list):  # type: ignore[type-arg]
    """A list the replaced ``len`` below refuses."""


def _refusing_len(obj: Any) -> int:
    if type(obj) is _Marked:
        raise TypeError("this len refuses marked lists")
    return BUILTINS["len"](obj)


def test_guards_and_entries_keep_the_real_builtins(restore_builtins):
    def fn(xs, x):
        return [v * 2 for v in xs], x + 1

    compiled = _compiled(fn)
    compiled(_Marked([1, 2]), torch.ones(1))  # traced with the real builtins
    builtins.len = _refusing_len
    got = compiled(_Marked([1, 2]), torch.ones(1))  # the entry's guards read len(xs)
    assert got[0] == [2, 4]


def test_a_call_while_builtins_are_replaced_runs_eagerly(restore_builtins):
    def fn(text):
        return [len(text[:i]) for i in range(4)]

    caching_len = functools.lru_cache(4)(BUILTINS["len"])
    builtins.len = caching_len
    try:  # (put back before pytest's own code runs: it calls len on lists)
        replaced = replaced_builtins()
        got, expected = _compiled(fn)("abcdef"), fn("abcdef")
    finally:
        builtins.len = BUILTINS["len"]
    assert replaced == ["len"]
    assert got == expected == [0, 1, 2, 3]
    assert caching_len.cache_info().hits > 0
