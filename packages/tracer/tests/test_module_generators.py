"""``nn.Module``'s own generators (``parameters()``, ``named_modules()``, ...) across a graph
break or returned.

They delegate with ``yield from``, which a rebuilt generator cannot resume: a loop over
``model.parameters()`` whose body breaks ran the whole function eagerly. They only read the
module tree, whose structure the entry guards, so the entry now makes the real generator
again and advances it past what the trace took -- unless the trace wrote anything, which
could have changed the tree (then the function still runs eagerly, with that reason).
"""

from __future__ import annotations

import torch

import sapwood


def _eager_backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
    return gm.forward


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def test_a_loop_over_parameters_that_breaks_compiles() -> None:
    model = _model()

    def norms(x: torch.Tensor) -> torch.Tensor:
        total = x.sum()
        for p in model.parameters():
            total = total + p.norm()
            print("graph break inside the loop")
        return total

    x = torch.randn(3)
    report = sapwood.explain(norms)(x)
    assert not report.eager_functions
    assert report.graph_count >= 2
    compiled = sapwood.compile(norms, backend=_eager_backend)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), norms(x))


def test_named_modules_and_buffers_across_a_break() -> None:
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 3))

    def walk(x: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
        names = []
        for name, module in model.named_modules():
            names.append(name)
            print("break at", type(module).__name__)
        for buf in model.buffers():
            x = x + buf.float().sum()
        return x, names

    x = torch.randn(3)
    got, expected = sapwood.compile(walk, backend=_eager_backend)(x), walk(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1]


def test_a_returned_generator_is_where_the_trace_left_it() -> None:
    model = _model()

    def skip_one(x: torch.Tensor) -> tuple[torch.Tensor, object]:
        params = model.named_parameters()
        _, first = next(params)
        return x * first.sum(), params

    def drained(x: torch.Tensor) -> tuple[torch.Tensor, object]:
        children = model.children()
        for _ in children:
            pass
        return x + 1, children

    x = torch.randn(3)
    for fn in (skip_one, drained):
        assert not sapwood.explain(fn)(x).eager_functions
        got = sapwood.compile(fn, backend=_eager_backend)(x)
        expected = fn(x)
        torch.testing.assert_close(got[0], expected[0])
        rest_got = list(got[1])  # type: ignore[call-overload]
        rest_expected = list(expected[1])  # type: ignore[call-overload]
        assert len(rest_got) == len(rest_expected)
        for a, b in zip(rest_got, rest_expected):
            assert a[0] == b[0] and a[1] is b[1] if isinstance(a, tuple) else a is b


def test_a_loop_that_writes_runs_eagerly_and_equals_eager() -> None:
    model = _model()

    def tag(x: torch.Tensor) -> torch.Tensor:
        for i, module in enumerate(model.modules()):
            module.visited = i  # a write: the tree the generator walks could change
            print("break after a write")
            x = x + i
        return x

    x = torch.randn(3)
    got = sapwood.compile(tag, backend=_eager_backend)(x)
    expected = tag(x)
    torch.testing.assert_close(got, expected)
    assert [m.visited for m in model.modules()] == list(range(4))
