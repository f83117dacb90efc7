"""Comprehensions whose body breaks the graph build what they build eagerly. From 3.12 on a
comprehension is inlined into its function (PEP 709): after a break inside one, the list, set
or dict being built comes into the resume function from the entry, and what the rest adds to
it must reach the real object."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import sapwood_tracer


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _list_filtered(a, b, c):
    return [t for t in (a, b, c) if t.sum() > 0]  # a data-dependent branch: a break


def _list_mapped(a, b, c):
    return [sapwood_tracer.graph_break() or t * 2 for t in (a, b, c)]


def _set_of_signs(a, b, c):
    return {int(t.sum() > 0) for t in (a, b, c) if t.sum() != 0}


def _dict_filtered(a, b, c):
    return {i: t + 1 for i, t in enumerate((a, b, c)) if t.sum() > 0}


def _nested(a, b, c):
    return [[u for u in (t, -t) if u.sum() > 0] for t in (a, b, c)]


def _count(a, b, c):
    return len([t for t in (a, b, c) if t.sum() > 0]), sum([1 for t in (a, b, c) if t.sum() < 0])


PROGRAMS = [_list_filtered, _list_mapped, _set_of_signs, _dict_filtered, _nested, _count]


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, torch.Tensor):
        return isinstance(got, torch.Tensor) and torch.equal(got, want)
    if isinstance(want, (list, tuple)):
        return type(got) is type(want) and len(got) == len(want) and all(map(_same, got, want))
    if isinstance(want, dict):
        return list(got) == list(want) and all(_same(got[k], want[k]) for k in want)
    return got == want


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("signs", [(1, 1, 1), (1, -1, 1), (-1, -1, -1), (-1, 1, 0)])
def test_a_comprehension_that_breaks_builds_what_it_builds_eagerly(fn, signs):
    a, b, c = (torch.full((2,), float(s)) for s in signs)
    got = sapwood_tracer.compile(fn, backend=_eager)(a, b, c)
    assert _same(got, fn(a, b, c))
    report = sapwood_tracer.explain(fn)(a, b, c)
    assert not report.eager_functions, str(report)
