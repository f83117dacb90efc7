"""The bounds on tracing: instructions per frame and per trace, depth of inlined calls, and
Python's own recursion limit. Past each, the frame that caused it runs eagerly (or its call
is a graph break), with the reason in explain(); results always equal eager's."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import torch

import sapwood_tracer
from sapwood_tracer.interpreter import budget
from sapwood_tracer.interpreter.instructions import decode


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any, **kwargs: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager, **kwargs)


@pytest.fixture(autouse=True)
def _fresh():
    sapwood_tracer.reset()
    yield
    sapwood_tracer.reset()


def _long_loop(x, n):
    s = 0
    for i in range(n):
        s += i
    return x + s


def _summing(n):
    s = 0
    for i in range(n):
        s += i
    return s


def _calls_a_long_loop(x, n):
    y = x * 2
    return y + _summing(n)


def _rec(n):
    return 0 if n == 0 else 1 + _rec(n - 1)


def _calls_recursion(x, n):
    return x + _rec(n)


def _at_depth(depth, fn, *args):
    if depth == 0:
        return fn(*args)
    return _at_depth(depth - 1, fn, *args)


def test_a_loop_past_the_frame_budget_runs_the_function_eagerly_with_the_reason():
    x = torch.ones(3)
    assert torch.equal(_compiled(_long_loop)(x, 200_000), _long_loop(x, 200_000))
    report = sapwood_tracer.explain(_long_loop)(x, 200_000)
    assert report.graph_count == 0
    [(name, why)] = report.eager_functions
    assert name.endswith("_long_loop")
    assert f"more than {budget.FRAME_BUDGET:,} instructions" in why


def test_a_short_loop_is_still_traced():
    x = torch.ones(3)
    report = sapwood_tracer.explain(_long_loop)(x, 100)
    assert report.graph_count == 1 and not report.eager_functions and not report.breaks


def test_a_loop_over_a_long_range_stops_at_the_budget_without_making_every_item(monkeypatch):
    # the iterator over range(10**9) makes items as they are reached: the trace reaches the
    # frame budget after a few thousand iterations, not after a billion items
    monkeypatch.setattr(budget, "FRAME_BUDGET", 2_000)

    def fn(x):
        for i in range(10**9):
            if i == 10**6:
                break
        return x + i

    x = torch.ones(2)
    assert torch.equal(_compiled(fn)(x), fn(x))
    assert "instructions" in sapwood_tracer.explain(fn)(x).eager_functions[0][1]


def test_a_graph_break_in_a_loop_over_a_range_resumes_with_the_rest_of_the_range():
    def fn(x):
        out = []
        for i in range(3, 9, 2):
            x = x + i
            sapwood_tracer.graph_break()
            out.append(i)
        return x, out

    x = torch.zeros(1)
    compiled = _compiled(fn)
    for _ in range(2):
        got, want = compiled(x), fn(x)
        assert torch.equal(got[0], want[0]) and got[1] == want[1]


def test_a_callee_past_the_frame_budget_breaks_the_graph_at_its_call():
    x = torch.ones(3)
    assert torch.equal(_compiled(_calls_a_long_loop)(x, 200_000), _calls_a_long_loop(x, 200_000))
    report = sapwood_tracer.explain(_calls_a_long_loop)(x, 200_000)
    assert any("_summing" in b.reason and "instructions" in b.reason for b in report.breaks)
    # the caller is still compiled (x * 2 is in a graph); the callee runs eagerly whole
    assert report.graph_count >= 1
    assert [name for name, _ in report.eager_functions] == ["_summing"]


def test_a_code_that_overran_is_not_traced_again_from_another_caller():
    x = torch.ones(3)
    _compiled(_calls_a_long_loop)(x, 200_000)

    def other(x):
        return x - _summing(5)

    compiled = _compiled(other)
    assert torch.equal(compiled(x), other(x))
    assert budget.overrun_reason(_summing.__code__) is not None
    sapwood_tracer.reset()
    assert budget.overrun_reason(_summing.__code__) is None


def test_the_trace_budget_names_the_callee_that_spent_it(monkeypatch):
    # each iteration of many_calls runs few instructions itself but many in its callees
    monkeypatch.setattr(budget, "TRACE_BUDGET", 20_000)

    def leaf(i):
        return i + 1

    def many_calls(n):
        s = 0
        for i in range(n):
            s += leaf(i)
        return s

    def fn(x, n):
        return x * 2 + many_calls(n)

    x = torch.ones(2)
    assert torch.equal(_compiled(fn)(x, 5_000), fn(x, 5_000))
    report = sapwood_tracer.explain(fn)(x, 5_000)
    assert any("many_calls" in b.reason for b in report.breaks)
    [(name, why)] = report.eager_functions
    assert name.endswith("many_calls") and "20,000" in why


def test_the_trace_budget_past_in_the_root_runs_it_eagerly(monkeypatch):
    monkeypatch.setattr(budget, "TRACE_BUDGET", 20_000)

    def leaf(i):
        return i + 1

    def fn(x, n):
        s = 0
        for i in range(n):
            s += leaf(i)
        return x + s

    x = torch.ones(2)
    assert torch.equal(_compiled(fn)(x, 5_000), fn(x, 5_000))
    [(name, why)] = sapwood_tracer.explain(fn)(x, 5_000).eager_functions
    assert name.endswith("fn") and "20,000" in why


@pytest.mark.parametrize("n", [10, 100, 500])
def test_recursion_deeper_than_the_inline_depth_runs_the_recursive_function_eagerly(n):
    x = torch.ones(1)
    assert torch.equal(_compiled(_calls_recursion)(x, n), _calls_recursion(x, n))
    report = sapwood_tracer.explain(_calls_recursion)(x, n)
    if n <= budget.MAX_INLINE_DEPTH:
        assert not report.breaks and not report.eager_functions
    else:
        assert any("recursion of _rec" in b.reason for b in report.breaks)
        assert [name for name, _ in report.eager_functions] == ["_rec"]


@pytest.mark.parametrize("depth", [0, 400, 800])
def test_a_compiled_call_near_the_recursion_limit_gives_eagers_result(depth):
    # the tracer's own frames meet Python's limit before the inline depth: no RecursionError
    # reaches the program where eager has none
    assert sys.getrecursionlimit() >= 1000
    x = torch.ones(1)
    compiled = _compiled(_calls_recursion)
    want = _at_depth(depth, _calls_recursion, x, 100)
    assert torch.equal(_at_depth(depth, compiled, x, 100), want)


def test_recursion_that_fails_eagerly_fails_the_same_way_compiled():
    x = torch.ones(1)
    with pytest.raises(RecursionError):
        _calls_recursion(x, 5_000)
    with pytest.raises(RecursionError):
        _compiled(_calls_recursion)(x, 5_000)


def test_fullgraph_raises_the_budget_reason():
    with pytest.raises(sapwood_tracer.Unsupported, match="instructions"):
        _compiled(_long_loop, fullgraph=True)(torch.ones(1), 200_000)


def _many_breaks(lines: int) -> Any:
    body = "".join(f"    x = x + {i}\n    graph_break()\n" for i in range(lines))
    namespace = {"graph_break": sapwood_tracer.graph_break}
    exec(f"def many_breaks(x):\n{body}    return x\n", namespace)
    return namespace["many_breaks"]


def test_a_long_function_with_many_graph_breaks_runs_its_rest_eagerly_past_the_break_cost(
    monkeypatch,
):
    # each break traces a resume code as long as the rest of the function: past
    # BREAK_COST_LIMIT instructions of them, the rest of the call runs eagerly
    from sapwood_tracer.api import cache

    monkeypatch.setattr(cache, "BREAK_COST_LIMIT", 5_000)
    fn = _many_breaks(200)
    size = len(decode(fn.__code__))  # (instructions: inline caches are not counted)
    x = torch.zeros(1)
    compiled = _compiled(fn)
    for _ in range(2):
        assert torch.equal(compiled(x), fn(x))
    report = sapwood_tracer.explain(fn)(x)
    # the rests add up to ~ n * size / 2 for the first n breaks
    assert len(report.breaks) <= 2 * (2 * cache.BREAK_COST_LIMIT // size + 2)
    assert len(report.breaks) < 200
    [(name, why)] = report.eager_functions
    assert "many_breaks" in name and "graph breaks in many_breaks" in why


def test_a_short_function_with_a_few_graph_breaks_compiles_every_piece():
    fn = _many_breaks(5)
    x = torch.zeros(1)
    report = sapwood_tracer.explain(fn)(x)
    assert len(report.breaks) == 5 and not report.eager_functions
    assert torch.equal(_compiled(fn)(x), fn(x))


def test_a_function_with_many_breaks_stops_compiling_past_the_break_cost(monkeypatch):
    # each break site is a resume code as long as the function: the cost adds up per site
    from sapwood_tracer.api import cache

    monkeypatch.setattr(cache, "BREAK_COST_LIMIT", 3_000)
    body = "".join(f"    sapwood_tracer.graph_break()\n    x = x + data[{i}]\n" for i in range(60))
    namespace = {"sapwood_tracer": sapwood_tracer}
    exec(f"def fn(x, data):\n{body}    return x\n", namespace)
    fn = namespace["fn"]

    data = list(range(300))
    x = torch.zeros(1)
    assert torch.equal(_compiled(fn)(x, data), fn(x, data))
    report = sapwood_tracer.explain(fn)(x, data)
    assert any("graph breaks in" in why for _, why in report.eager_functions)
    assert len(report.breaks) < 60


def test_a_loop_whose_body_breaks_does_not_recompile_per_iteration(monkeypatch):
    # one resume code per break site serves every iteration: the cost stays under a small limit
    from sapwood_tracer.api import cache

    monkeypatch.setattr(cache, "BREAK_COST_LIMIT", 3_000)

    def fn(x, data):
        for i in range(60):
            sapwood_tracer.graph_break()
            x = x + i * data[0]  # (the item symbolic; data[i] would specialise on it)
        return x

    data = list(range(300))
    x = torch.zeros(1)
    assert torch.equal(_compiled(fn)(x, data), fn(x, data))
    report = sapwood_tracer.explain(fn)(x, data)
    assert not report.eager_functions, str(report)
    # (the loop's variable is a symbol from the first trace; the loop's last step, which
    # finds the range spent, is the other graph of that resume function)
    assert len(report.recompiles) <= 1, str(report)
    assert report.graph_count <= 3, str(report)
