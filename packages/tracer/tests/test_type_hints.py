# ruff: noqa: UP006, UP007, UP035, UP045 - the typing forms are what is tested
"""Type hints built in a function body: ``torch.jit.annotate(List[torch.Tensor], [])``.

typing's subscription goes through caches keyed by functions (and ``typing_extensions``
reads frames), so traced it was a graph break, or the whole function ran eagerly (timm's
CrossViT: 5 graphs where torch has 1). A hint of exactly known arguments is evaluated while
tracing, with the form's identity guarded.
"""

from __future__ import annotations

import typing
from typing import Dict, List, Optional, Tuple, Union

import torch

import sapwood

HINT = List


def _eager_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    return gm.forward


def test_annotated_empty_list_is_one_graph() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        xs = torch.jit.annotate(List[torch.Tensor], [])
        for i in range(3):
            xs.append(x * i)
        return torch.stack(xs).sum(0)

    x = torch.randn(4)
    report = sapwood.explain(fn)(x)
    assert report.graph_count == 1
    assert not report.breaks and not report.eager_functions
    torch.testing.assert_close(sapwood.compile(fn, backend=_eager_backend)(x), fn(x))


def test_nested_hints_equal_eager() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, object, object, object]:
        mapping = Dict[str, Optional[Tuple[int, int]]]
        either = Union[int, str]
        return x + 1, mapping, either, Tuple[()]

    x = torch.randn(2)
    report = sapwood.explain(fn)(x)
    assert report.graph_count == 1 and not report.breaks
    got = sapwood.compile(fn, backend=_eager_backend)(x)
    expected = fn(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:]
    assert got[1] is expected[1]  # (typing caches its hints: the same object, as in eager)


def test_a_rebound_form_is_seen() -> None:
    global HINT

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, object]:
        return x * 2, HINT[int]

    compiled = sapwood.compile(fn, backend=_eager_backend)
    x = torch.randn(2)
    try:
        for form in (typing.List, typing.Tuple, typing.Set, typing.List):
            HINT = form
            assert compiled(x)[1] == fn(x)[1] == form[int]
    finally:
        HINT = List


def test_a_hint_of_a_value_made_in_the_trace_falls_back_to_eager() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, object]:
        kind = int if x.shape[0] > 1 else str
        return x + 1, Optional[kind]

    for x in (torch.randn(1), torch.randn(3)):
        got, expected = sapwood.compile(fn, backend=_eager_backend)(x), fn(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]


def test_a_bad_hint_raises_as_in_eager() -> None:
    def fn(x: torch.Tensor) -> object:
        return Optional[int, str]  # type: ignore[misc]

    x = torch.randn(2)
    for run in (fn, sapwood.compile(fn, backend=_eager_backend)):
        try:
            run(x)
        except TypeError as error:
            assert "Optional" in str(error)
        else:
            raise AssertionError("no TypeError")
