"""``functools.partial`` in the trace behaves as CPython's: a partial of a partial is
flattened, attributes it lacks raise AttributeError, its own attributes are read for real,
and looking at a partial passed in does not give it a ``__dict__`` (which would stop
``partial(p, ...)`` from flattening it). Each program is compared with eager."""

from __future__ import annotations

import functools
from typing import Any

import torch

import sapwood_tracer


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


def _capture(*args: Any, **kwargs: Any) -> Any:
    return args, kwargs


def test_a_partial_of_a_partial_made_in_the_trace_is_flattened():
    def fn(x):
        inner = functools.partial(_capture, "a")
        nested = functools.partial(inner, bar=True)
        return nested.func is _capture, nested.args, nested.keywords, nested(1), x + 1

    got, expected = _compiled(fn)(torch.ones(1)), fn(torch.ones(1))
    assert got[:4] == expected[:4] == (True, ("a",), {"bar": True}, (("a", 1), {"bar": True}))


def test_a_partial_passed_in_is_flattened_as_eagerly():
    def fn(p):
        return functools.partial(p, 2).args

    assert _compiled(fn)(functools.partial(_capture, 1)) == fn(functools.partial(_capture, 1))
    assert fn(functools.partial(_capture, 1)) == (1, 2)


def test_attributes_of_a_partial_passed_in_are_its_own():
    def fn(p):
        try:
            return p.label
        except AttributeError:
            return "missing"

    labelled = functools.partial(_capture, 1)
    labelled.label = "mine"  # type: ignore[attr-defined]
    compiled = _compiled(fn)
    assert compiled(labelled) == "mine"
    assert compiled(functools.partial(_capture, 2)) == "missing"


def test_a_partial_made_in_the_trace_lacks_unknown_attributes():
    def fn(x):
        p = functools.partial(_capture, x)
        try:
            p.nothing  # noqa: B018
        except AttributeError:
            return "missing"
        return "found"

    assert _compiled(fn)(1) == fn(1) == "missing"


class _PlainPartial(functools.partial):
    pass


def test_a_partial_made_in_the_trace_is_returned_as_a_real_one():
    def fn(x):
        p = functools.partial(pow, 2, mod=5)
        q = _PlainPartial(_capture, x + 1, key=[x])
        p.keywords["mod"] = 7  # (the dict its calls read)
        return p, q, p.args, q.keywords

    report = sapwood_tracer.explain(fn)(torch.ones(1))
    assert report.breaks == [] and report.eager_functions == []
    p, q, args, keywords = _compiled(fn)(torch.ones(1))
    expected_p, expected_q, _, _ = fn(torch.ones(1))
    assert str(q(1)) == str(expected_q(1))  # (tensors inside: compared as text)
    assert type(p) is functools.partial and type(q) is _PlainPartial
    assert p(3) == expected_p(3) == 1 and p.func is pow
    assert p.args is args and q.keywords is keywords  # the very tuple and dict
    assert q.args[0].item() == 2.0 and q.keywords["key"][0].item() == 1.0
    assert not hasattr(q, "spam") and q.__dict__ == {}


def test_a_partial_passed_in_and_returned_is_the_same_object():
    def fn(p):
        return p, p(1)

    p = functools.partial(_capture, "a")
    got = _compiled(fn)(p)
    assert got[0] is p and got[1] == fn(p)[1]
