"""Graph breaks: a catalogue of patterns, each with its expected graphs and operations.

Every case runs compiled and eagerly on several inputs (twice each, so the cached entries and
resume functions are exercised) and compares results; ``explain`` gives the number of graphs,
the operations per graph and the breaks of the first call.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import Unsupported
from sapwood_tracer.api.events import listen as _events_listen

from .conftest import assert_same

X = torch.arange(6.0).reshape(2, 3) - 2.0


def _inputs() -> list[tuple[torch.Tensor]]:
    return [(X,), (X + 5,), (-X - 5,)]


def check_breaks(
    fn: Callable[..., Any],
    arg_sets: Sequence[tuple[Any, ...]],
    *,
    ops: list[int],
    breaks: int,
) -> sapwood_tracer.ExplainOutput:
    report = sapwood_tracer.explain(fn)(*arg_sets[0])
    assert report.op_counts == ops, str(report)
    assert report.break_count == breaks, str(report)
    sapwood_tracer.reset()
    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    for args in arg_sets:
        for _ in range(2):
            assert_same(compiled(*args), fn(*args))
    return report


# -- the covered constructs --------------------------------------------------------------------


def test_print_splits_the_graph_and_runs_once_per_call():
    def fn(x):
        a = x + 1
        print("a is", a.shape)
        return a * 2

    report = check_breaks(fn, _inputs(), ops=[1, 1], breaks=1)
    assert "print()" in report.breaks[0].reason
    assert report.breaks[0].location.endswith(f"test_graph_breaks.py:{_line(fn, 'print')}")


def test_data_dependent_if_compiles_both_sides():
    def fn(x):
        y = x * 2
        if y.sum() > 0:
            y = y + 1
        else:
            y = y - 1
        return y.relu()

    check_breaks(fn, _inputs(), ops=[3, 2], breaks=1)


def test_while_on_a_tensor_condition():
    def fn(x):
        y = x.abs() + 1
        while y.sum() < 100:
            y = y * 2
        return y

    # 3.12 also tests the condition at the bottom of the loop: one more resume function
    ops = [4, 3] if sys.version_info < (3, 12) else [4, 3, 3]
    check_breaks(fn, [(X,), (X * 10,)], ops=ops, breaks=len(ops))


def test_item_and_tolist_run_eagerly():
    def fn(x):
        s = x.sum().item()
        values = x[0].tolist()
        return x * s + len(values)

    check_breaks(fn, _inputs(), ops=[1, 1, 2], breaks=2)


def test_bool_of_a_tensor():
    def fn(x):
        flag = bool((x > 0).any())
        return x + 1 if flag else x - 1

    check_breaks(fn, _inputs(), ops=[2, 1], breaks=1)


def test_logging_runs_on_every_call(caplog):
    logger = logging.getLogger("sapwood.tests.breaks")

    def fn(x):
        y = x + 1
        logger.warning("y has %d elements", y.numel())
        return y * 2

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    with caplog.at_level(logging.WARNING, logger="sapwood.tests.breaks"):
        for _ in range(3):
            assert_same(compiled(X), fn(X))
    assert [r.getMessage() for r in caplog.records] == ["y has 6 elements"] * 6


def test_calls_into_c_functions_the_tracer_does_not_model():
    def fn(x):
        y = x * 2
        n = len(os.getcwd()) > 0
        return y + n

    check_breaks(fn, _inputs(), ops=[1, 1], breaks=1)


def test_disabled_functions_run_eagerly():
    seen = []

    @sapwood_tracer.disable
    def eager_only(t):
        seen.append(torch.is_grad_enabled())
        return float(t.numpy().sum())  # could never be traced

    def fn(x):
        y = x + 1
        return y * eager_only(y)

    check_breaks(fn, _inputs(), ops=[1, 1], breaks=1)
    assert seen and all(seen)
    assert sapwood_tracer.compile(eager_only, backend=lambda gm, ex: gm.forward) is eager_only


@pytest.mark.parametrize("recursive", [True, False])
def test_torch_disable_marks_are_honoured(recursive):
    calls = []

    def body(t):
        calls.append(1)
        return t.cos()

    kept_out = torch.compiler.disable(body, recursive=recursive, reason="measured separately")

    def fn(x):
        y = x + 1
        return kept_out(y) * 2

    report = check_breaks(fn, _inputs(), ops=[1, 1], breaks=1)
    assert "torch.compiler.disable: measured separately" in str(report)
    assert sapwood_tracer.compile(kept_out, backend=lambda gm, ex: gm.forward) is kept_out
    calls.clear()
    sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)(X)
    assert calls == [1]  # ran eagerly, once


def test_disable_takes_torchs_forms():
    @sapwood_tracer.disable()
    def called(t):
        return t + 1

    @sapwood_tracer.disable(recursive=False, reason="its own kernel")
    def explained(t):
        return t + 2

    def fn(x):
        return called(x) * explained(x)

    report = check_breaks(fn, _inputs(), ops=[1], breaks=2)
    assert "sapwood.disable: its own kernel" in str(report)
    with pytest.raises(TypeError, match="takes a bool"):
        sapwood_tracer.disable(fn, recursive="no")


def test_graph_break_splits_where_asked():
    def fn(x):
        y = x.sin()
        sapwood_tracer.graph_break()
        return y.cos()

    check_breaks(fn, _inputs(), ops=[1, 1], breaks=1)
    assert sapwood_tracer.graph_break() is None


def test_an_unsupported_opcode_runs_eagerly_and_the_rest_is_compiled(monkeypatch):
    from sapwood_tracer.interpreter import registry as _registry

    table = dict(_registry.dispatch_table())
    del table["UNARY_NEGATIVE"]
    monkeypatch.setattr(_registry, "_tables", {sys.version_info[:2]: table})

    def fn(x):
        y = x * 3
        z = -y
        return z + 1

    report = check_breaks(fn, _inputs(), ops=[1, 1], breaks=1)
    assert "UNARY_NEGATIVE" in report.breaks[0].reason


def test_an_unsupported_instruction_without_an_eager_form_runs_the_rest_eagerly(monkeypatch):
    from sapwood_tracer.interpreter import registry as _registry

    table = dict(_registry.dispatch_table())
    del table["BUILD_TUPLE"]
    monkeypatch.setattr(_registry, "_tables", {sys.version_info[:2]: table})

    def fn(x, n):
        y = x * 3
        pair = (y, n)
        return pair[0] + pair[1]

    report = sapwood_tracer.explain(fn)(X, 2)
    assert report.op_counts == [1] and report.breaks[0].kind == "rest"
    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    assert_same(compiled(X, 2), fn(X, 2))


def test_a_failing_value_operation_raises_into_the_users_handler():
    def fn(x):
        y = x + 1
        pair = (1, 2)
        try:
            pair[0] = 5  # TypeError, raised by the eager STORE_SUBSCR
        except TypeError:
            y = y * 2
        return y

    report = check_breaks(fn, _inputs(), ops=[1], breaks=1)
    assert report.breaks[0].kind == "call"


# -- breaks at any depth -------------------------------------------------------------------


def test_break_inside_a_loop_resumes_inside_the_body():
    def fn(x):
        total = x * 0
        for i in range(3):
            total = total + x * i
            print(i)
            total = total.relu()
        return total

    # [mul, mul, add] up to the first print; [relu, mul, add] from the print through the
    # loop's next step (its item a symbol) to the print again, one graph for every iteration;
    # [relu] once the range is spent
    check_breaks(fn, _inputs(), ops=[3, 3, 1], breaks=2)


def _graph_counting() -> tuple[list[int], Callable[..., Any]]:
    graphs: list[int] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        graphs.append(len(gm.graph.nodes))
        return gm.forward

    return graphs, backend


def test_a_loop_that_breaks_compiles_a_bounded_number_of_graphs():
    # one resume function per break site, serving every iteration: the number of compiled
    # graphs does not grow with the trip count
    def fn(x, n):
        total = x * 0
        for i in range(n):
            total = total + x * i
            print(i, end="")
            total = total.relu()
        return total

    graphs, backend = _graph_counting()
    compiled = sapwood_tracer.compile(fn, backend=backend)
    with contextlib.redirect_stdout(io.StringIO()):
        for x in (X, X + 1, -X):
            assert_same(compiled(x, 200), fn(x, 200))
    # the entry (up to the first break), the body after the break and the body before it
    # (its int item symbolic); each new trip count retraces the entry only (range()
    # specializes on it)
    assert len(graphs) <= 3, graphs


def test_a_generator_loop_that_breaks_resumes_in_one_function():
    def items(n):
        yield from range(n)

    def fn(x, gen):
        for i in gen:
            x = x + i
            print(i, end="")
            x = x * 2
        return x

    graphs, backend = _graph_counting()
    compiled = sapwood_tracer.compile(fn, backend=backend)
    with contextlib.redirect_stdout(io.StringIO()):
        for n in (2, 5, 40):
            gen = items(n)
            assert_same(compiled(X, gen), fn(X, items(n)))
            assert next(gen, "done") == "done"  # the caller's generator was consumed
    assert len(graphs) <= 6, graphs


def test_breaks_on_joined_paths_share_their_resume_functions():
    # 3 break sites on each of 8 paths: a resume function per site, specialized only on the
    # flags it reads (torch.compile: 12 graphs here)
    def fn(x, a, b, c):
        if a:
            x = x + 1
            print("a", end="")
        else:
            x = x - 1
            print("not a", end="")
        if b:
            x = x * 2
            print("b", end="")
        else:
            x = x / 2
            print("not b", end="")
        if c:
            x = x.relu()
            print("c", end="")
        else:
            x = x.abs()
            print("not c", end="")
        return x + 3

    graphs, backend = _graph_counting()
    compiled = sapwood_tracer.compile(fn, backend=backend)
    with contextlib.redirect_stdout(io.StringIO()):
        for a in (0, 1):
            for b in (0, 1):
                for c in (0, 1):
                    for _ in range(2):
                        assert_same(compiled(X, a, b, c), fn(X, a, b, c))
    assert len(graphs) <= 12, graphs


def test_a_dead_local_is_not_passed_to_the_resume_function():
    def fn(x, flag):
        if flag:
            x = x + 1
        print("", end="")
        return x * 2

    report = sapwood_tracer.explain(fn)(X, True)
    resume_guards = [g for name, gs in report.guards if "(resume at" in name for g in gs]
    assert resume_guards and not any("flag" in g for g in resume_guards), str(report)


def test_a_local_read_through_locals_survives_a_break():
    def fn(x, flag):
        y = x + 1
        print("", end="")
        return locals()["y"] * 2, sorted(locals())

    got = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)(X, 3)
    assert_same(got, fn(X, 3))


def test_break_inside_a_with_block_reenters_the_context():
    modes = []

    @sapwood_tracer.disable
    def probe(t):
        modes.append(torch.is_grad_enabled())
        return t

    def fn(x):
        with torch.no_grad():
            y = x * 2
            y = probe(y)
            z = y + 1
        return z * x, z.requires_grad, torch.is_grad_enabled()

    x = X.clone().requires_grad_(True)
    # grad-mode switches are graph nodes: [off, mul, on] then [off, add, on, mul]
    check_breaks(fn, [(x,), (x + 1,)], ops=[3, 4], breaks=1)
    assert modes and not any(modes)
    assert torch.is_grad_enabled()


def test_break_inside_a_try_block_keeps_the_handler():
    def fn(x):
        try:
            y = x + 1
            print("inside try")
            y = y * 2
        except RuntimeError:
            y = x
        return y

    check_breaks(fn, _inputs(), ops=[1, 1], breaks=1)


def test_exception_raised_by_the_eager_part_is_caught_by_the_users_handler():
    @sapwood_tracer.disable
    def fails(t):
        raise KeyError("eager")

    def fn(x):
        y = x + 1
        try:
            y = fails(y)
        except KeyError:
            y = y * 10
        return y

    check_breaks(fn, _inputs(), ops=[1], breaks=1)


def test_exception_from_the_eager_part_inside_a_with_block_exits_it():
    @sapwood_tracer.disable
    def fails(t):
        raise KeyError("eager")

    def fn(x):
        try:
            with torch.no_grad():
                y = fails(x + 1)
        except KeyError:
            return x * 10, torch.is_grad_enabled()
        return y, torch.is_grad_enabled()

    check_breaks(fn, _inputs(), ops=[3], breaks=1)


def test_an_uncaught_exception_from_the_eager_part_reaches_the_caller():
    def fn(x):
        y = x + 1
        if y:  # ambiguous truth value of a tensor with several elements
            y = y * 2
        return y

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    with pytest.raises(RuntimeError, match="ambiguous"):
        compiled(X)


def _helper_that_breaks(t):
    u = t * 3
    print("helper")
    return u + 1


def test_break_inside_an_inlined_callee_compiles_the_callee_too():
    def fn(x):
        a = x.sin()
        b = _helper_that_breaks(a)
        return b.cos()

    report = check_breaks(fn, _inputs(), ops=[1, 1, 1, 1], breaks=2)
    functions = [b.function for b in report.breaks]
    assert functions == [
        "test_break_inside_an_inlined_callee_compiles_the_callee_too.<locals>.fn",
        "_helper_that_breaks",
    ]
    assert "a callee that breaks" in report.breaks[0].reason


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.calls = 0

    def forward(self, x):
        h = self.lin(x)
        self.calls += 1
        if h.mean() > 0:
            h = h * 2
        return h.relu()


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = _Block()
        self.b = _Block()

    def forward(self, x):
        return self.b(self.a(x)) + 1


def test_breaking_submodules_of_a_model():
    torch.manual_seed(0)
    net, ref = _Net(), _Net()
    ref.load_state_dict(net.state_dict())
    compiled = sapwood_tracer.compile(net, backend=lambda gm, ex: gm.forward)
    for x in (X, X + 3, -X):
        assert_same(compiled(x), ref(x))
    assert net.a.calls == ref.a.calls == 3 and net.b.calls == ref.b.calls == 3


def test_closures_made_before_a_break_share_cells_with_the_rest():
    def fn(x):
        k = 2
        scale = lambda t: t * k  # noqa: E731
        print("closure alive")
        y = scale(x)
        k = 5  # seen by the closure made before the break
        return y + scale(x)

    check_breaks(fn, _inputs(), ops=[3], breaks=1)


def test_nonlocal_accumulation_across_a_break():
    def fn(x):
        total = x * 0

        def add(t):
            nonlocal total
            total = total + t

        add(x)
        print("between")
        add(x * 2)
        return total

    check_breaks(fn, _inputs(), ops=[2, 2], breaks=1)


def test_assigning_a_free_variable_of_the_compiled_function_is_written_back():
    def make():
        calls = 0

        def fn(x):
            nonlocal calls
            calls += 1
            return x * 2, calls

        return fn, lambda: calls

    fn, read = make()
    compiled = sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)
    for n in (1, 2, 3):
        out, seen = compiled(X)
        assert torch.equal(out, X * 2) and seen == n and read() == n


def test_a_torch_module_whose_forward_breaks_runs_eagerly_with_its_arguments():
    torch.manual_seed(0)
    model = torch.nn.Transformer(
        d_model=16,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dim_feedforward=32,
        dropout=0.0,
    ).eval()
    src, tgt = torch.randn(5, 2, 16), torch.randn(4, 2, 16)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(4)

    def fn(src, tgt, mask):
        return model(src, tgt, tgt_mask=mask).relu()

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    for _ in range(2):
        torch.testing.assert_close(compiled(src, tgt, mask), fn(src, tgt, mask))
    report = sapwood_tracer.explain(fn)(src, tgt, mask)
    assert report.break_count == 1 and "a callee that breaks" in report.breaks[0].reason


def test_operator_is_between_computed_tensors():
    import operator

    def fn(x):
        y = x.contiguous()  # the very same object when x is contiguous
        z = x + 1
        return operator.is_(y, x), operator.is_not(z, x), y * 2

    # y is x itself, so no node; z only feeds the identity test: the graph is y * 2
    check_breaks(fn, _inputs(), ops=[1], breaks=0)


# -- side effects at each graph exit ---------------------------------------------------------

_GLOBAL_COUNTER = 0


def test_side_effects_before_a_break_happen_in_order():
    class Box:
        pass

    def fn(x, xs, d, box):
        global _GLOBAL_COUNTER
        xs.append(x * 2)
        d["seen"] = len(xs)
        box.value = x + 1
        _GLOBAL_COUNTER = _GLOBAL_COUNTER + 1
        snapshot = (len(xs), d["seen"], _GLOBAL_COUNTER)
        print(snapshot)
        xs.append(box.value)
        made = Box()
        made.t = x * 3
        return made, snapshot

    results = []
    for compiled in (False, True):
        global _GLOBAL_COUNTER
        _GLOBAL_COUNTER = 0
        xs, d, box = [X], {}, Box()
        run = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward) if compiled else fn
        made, snapshot = run(X, xs, d, box)
        _made2, snapshot2 = run(X, xs, d, box)
        results.append((xs, d, box.value, _GLOBAL_COUNTER, made.t, snapshot, snapshot2))
    eager, ours = results
    assert len(ours[0]) == len(eager[0]) == 5
    for a, b in zip(ours[0], eager[0]):
        assert torch.equal(a, b)
    assert ours[1] == eager[1]
    assert torch.equal(ours[2], eager[2]) and ours[3] == eager[3] == 2
    assert torch.equal(ours[4], eager[4])
    assert ours[5:] == eager[5:]


def test_print_runs_once_per_call_even_with_several_breaks():
    def fn(x):
        y = x + 1
        print("first")
        if y.sum() > 0:
            print("positive")
        z = y.sum().item()
        print("last", z)
        return y * z

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    for args in _inputs():
        eager_out, compiled_out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(eager_out):
            expected = fn(*args)
        with contextlib.redirect_stdout(compiled_out):
            got = compiled(*args)
        assert_same(got, expected)
        assert compiled_out.getvalue() == eager_out.getvalue()


# -- API -------------------------------------------------------------------------------------


def test_fullgraph_turns_the_first_break_into_an_error_naming_the_line():
    def fn(x):
        y = x + 1
        print(y)
        return y

    compiled = sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)
    with pytest.raises(Unsupported, match=rf"print\(\).*test_graph_breaks.py:{_line(fn, 'print')}"):
        compiled(X)


def test_allow_in_graph_records_one_node():
    def custom(t):
        try:  # a construct the tracer would refuse to trace into
            raise ValueError
        except ValueError:
            pass
        return t * 2 + 1

    sapwood_tracer.allow_in_graph(custom)

    def fn(x):
        return custom(x.sin()).cos()

    report = check_breaks(fn, _inputs(), ops=[3], breaks=0)
    targets = [n.target for n in report.graphs[0].graph_module.graph.nodes]
    assert custom in targets


def test_disallow_in_graph_breaks_at_each_call():
    from sapwood_tracer import marks as _disable

    def fn(x):
        return torch.sinh(x + 1) * 2

    sapwood_tracer.disallow_in_graph(torch.sinh)
    try:
        check_breaks(fn, _inputs(), ops=[1, 1], breaks=1)
    finally:
        _disable._disallowed.discard(torch.sinh)


def test_explain_prints_graphs_breaks_and_guards():
    def fn(x):
        y = x + 1
        print("hi")
        return y * 2

    text = str(sapwood_tracer.explain(fn)(X))
    assert text.startswith("Graphs: 2   Graph breaks: 1   Ops per graph: [1, 1]")
    assert f"test_graph_breaks.py:{_line(fn, 'print')}: print()" in text
    assert "L['x'] matches Tensor(float32, cpu, [2, 3])" in text


def test_explain_reports_recompiles():
    def fn(x):
        y = x + 1
        print("hi")
        return y * 2

    compiled_report = sapwood_tracer.explain(fn)
    compiled_report(X)
    report = sapwood_tracer.explain(fn)(X)
    assert report.recompiles == []
    assert report.graph_count == 2


def test_log_topics_are_parsed_with_unknown_ones_reported(caplog):
    from sapwood_tracer.api import events as _events

    with caplog.at_level(logging.WARNING, logger="sapwood"):
        topics = _events._parse("graph_breaks, bogus,guards")
    assert topics == {"graph_breaks", "guards"}
    assert "bogus" in caplog.text
    assert _events._parse("all") == set(_events.TOPICS)


def test_graph_break_logging_names_the_line(caplog, monkeypatch):
    from sapwood_tracer.api import events as _events

    monkeypatch.setattr(_events, "_topics", frozenset({"graph_breaks", "bytecode"}))

    def fn(x):
        y = x + 1
        print("hi")
        return y

    with caplog.at_level(logging.INFO, logger="sapwood"), contextlib.redirect_stdout(io.StringIO()):
        sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)(X)
    assert f"test_graph_breaks.py:{_line(fn, 'print')}: print()" in caplog.text
    assert "def sapwood_entry(L, C, G):" in caplog.text
    assert "resume function" in caplog.text
    # the resume function shown as the user's source, its resume line marked
    resume_line = f">>{_line(fn, 'print'):5d}"
    assert any(line.startswith(resume_line) for line in caplog.text.splitlines())


def _line(fn: Callable[..., Any], needle: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if needle in text)


def test_a_break_in_a_function_with_many_locals_resumes_compiled():
    """On 3.13 locals are read in pairs (LOAD_FAST_LOAD_FAST, 4 bits per local): a resume
    function renumbers its locals past 16, so its body splits the pairs and still lines up."""

    def fn(x):
        a0, a1, a2, a3, a4, a5, a6, a7 = x, x + 1, x + 2, x + 3, x + 4, x + 5, x + 6, x + 7
        b0, b1, b2, b3, b4, b5, b6, b7 = a7, a6, a5, a4, a3, a2, a1, a0
        sapwood_tracer.graph_break()
        c0, c1 = b7 * a7, b0 * a0
        sums = (a0 + a1, a2 + a3, a4 + a5, a6 + a7, b0 + b1, b6 + b7, c0 + c1)
        return sums, (b2, b3, b4, b5)

    report = check_breaks(fn, _inputs(), ops=[7, 9], breaks=1)
    assert report.eager_functions == []


def test_a_loop_over_a_list_sees_what_the_loop_stores_into_it(backend, same):
    def fn(xs, x):
        out = []
        for v in xs:
            out.append(v)
            xs[-1] = 10
        return out, x + 1

    compiled = sapwood_tracer.compile(fn, backend=backend)
    for _ in range(2):
        xs, ys = [0, 0], [0, 0]
        same(compiled(xs, torch.ones(1)), fn(ys, torch.ones(1)))
        assert xs == ys == [0, 10]
    assert backend.count == 1


@pytest.mark.parametrize("wrap", ["plain", "enumerate", "zip", "map"])
def test_a_break_in_a_loop_over_a_list_continues_that_very_iteration(wrap):
    """The resume function gets the list itself and the position, not a copy of the rest:
    what the loop appends after the break is still iterated over, as eagerly."""

    def fn(xs, ys, x):
        if wrap == "enumerate":
            items = enumerate(xs)
        elif wrap == "zip":
            items = zip(xs, ys)
        elif wrap == "map":
            items = map(lambda v: v * 2, xs)
        else:
            items = iter(xs)
        out = []
        for item in items:
            sapwood_tracer.graph_break()
            out.append(x * (item[-1] if isinstance(item, tuple) else item))
            if len(xs) < 4:
                xs.append(len(xs))
                ys.append(len(ys))
        return out

    expected = fn([1, 2], [5, 6], torch.ones(1))
    report = sapwood_tracer.explain(fn)([1, 2], [5, 6], torch.ones(1))
    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    got = compiled([1, 2], [5, 6], torch.ones(1))
    assert [t.item() for t in got] == [t.item() for t in expected]
    assert report.eager_functions == []


def test_an_iterator_only_a_local_holds_keeps_its_items_known_after_a_break():
    # made again by the resume function's prologue: the rest of the function traces over it
    def fn(x):
        it = iter([1, 2, 3, 4])
        first = next(it)
        print("", end="")
        second = next(it)
        rest = list(it)
        return x + first + second, rest, next(it, "done")

    report = sapwood_tracer.explain(fn)(X)
    assert report.break_count == 1, str(report)
    got = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)(X)
    assert_same(got, fn(X))


@sapwood_tracer.disable
def _eager_probe(*args: Any) -> None:
    pass


def test_an_iterator_shared_by_a_local_and_a_zip_is_one_object_across_a_break():
    def fn(x):
        a = iter(range(5))
        z = iter(range(5))
        zipped = zip(a, [0], z)
        _eager_probe(zipped)
        return x + 1, list(zipped), next(a), next(z)

    got = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)(X)
    assert_same(got, fn(X))


def test_strict_zip_over_iterators_raises_where_python_does():
    def fn(x):
        a = iter(range(5))
        z = iter(range(5))
        try:  # noqa: SIM105 (try/except traced, as written)
            _eager_probe(list(zip(a, [0], z, strict=True)))
        except ValueError:
            pass
        return x + 1, next(a), next(z)

    got = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)(X)
    assert_same(got, fn(X))


def test_a_long_loop_that_breaks_at_every_iteration_does_not_exhaust_the_stack():
    def fn(x):
        for i in range(3000):
            _eager_probe(i)
            x = x + 1
        return x

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    assert_same(compiled(X), fn(X))
    reasons: list[str] = []
    stop = _events_listen(
        lambda kind, data: reasons.append(data["reason"]) if kind == "skip" else None
    )
    try:
        assert_same(compiled(X), fn(X))
    finally:
        stop()
    assert any("nested" in why for why in reasons), reasons  # never silently eager


def test_code_after_a_caught_eager_exception_sees_no_exception_being_handled():
    @sapwood_tracer.disable
    def fails():
        raise ValueError("eager")

    def fn(x):
        try:  # noqa: SIM105 (try/except traced, as written)
            fails()
        except ValueError:
            pass
        x = x + 1
        _eager_probe(x)
        return x, sys.exc_info()[0]

    got = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)(X)
    assert_same(got, fn(X))


def test_code_after_a_loop_that_breaks_sees_no_stop_iteration():
    def fn(x):
        for i in range(2):
            _eager_probe(i)
            x = x + i
        try:
            raise KeyError("after")
        except KeyError as e:
            return x, type(e.__context__), sys.exc_info()[0]

    got = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)(X)
    assert_same(got, fn(X))


def test_reversed_iterators_keep_their_type_and_read_their_list_live_across_a_break():
    import pickle

    def fn(x):
        same = type(reversed(range(1))) is type(iter(range(1)))
        orig = [4, 5, 6, 7]
        it, a = pickle.loads(pickle.dumps((reversed(orig), orig)))
        a[:] = [10, 11, 12, 13, 14, 15]
        return x + 1, same, list(it), type(reversed([])).__name__

    got = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)(X)
    assert_same(got, fn(X))


def test_graph_break_logging_of_a_loop_whose_next_item_is_taken_eagerly(caplog, monkeypatch):
    from sapwood_tracer.api import events as _events

    monkeypatch.setattr(_events, "_topics", frozenset({"graph_breaks"}))

    @sapwood_tracer.disable
    def check(flag: bool) -> None:
        assert flag

    def fn(x):
        d = {"a": 1, "b": 2}
        for key in d:
            check(key in d)
        return x + 1

    with caplog.at_level(logging.INFO, logger="sapwood"):
        got = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)(X)
    assert_same(got, fn(X))
    assert "the loop's next item taken eagerly" in caplog.text


def test_explain_of_a_compiled_callable_explains_what_it_compiles():
    def fn(x):
        return x.sin()

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward)
    report = sapwood_tracer.explain(compiled)(X)
    assert (report.graph_count, report.break_count) == (1, 0), str(report)
    assert [name for name, _ in report.guards] == [
        "test_explain_of_a_compiled_callable_explains_what_it_compiles.<locals>.fn"
    ]
    module = torch.nn.Linear(3, 2)
    report = sapwood_tracer.explain(
        sapwood_tracer.compile(module, backend=lambda gm, ex: gm.forward)
    )(X)
    assert (report.graph_count, report.break_count) == (1, 0), str(report)


def test_a_fullgraph_error_shows_the_users_frames_only(monkeypatch):
    import traceback

    def fn(x):
        return x.item()

    compiled = sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)
    with pytest.raises(Unsupported) as info:
        compiled(X)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert all("sapwood" not in f.filename for f in frames), frames
    assert "SAPWOOD_VERBOSE_TRACEBACKS=1" in "".join(info.value.__notes__)
    monkeypatch.setenv("SAPWOOD_VERBOSE_TRACEBACKS", "1")
    with pytest.raises(Unsupported) as info:
        sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)(X + 1)
    assert any(
        "sapwood_tracer" in f.filename for f in traceback.extract_tb(info.value.__traceback__)
    )


def test_capture_scalar_outputs_is_refused_in_words():
    import torch._dynamo.config as dynamo_config

    def fn(x):
        return x * x.sum().item()

    old = dynamo_config.capture_scalar_outputs
    dynamo_config.capture_scalar_outputs = True
    try:
        report = sapwood_tracer.explain(fn)(X)
    finally:
        dynamo_config.capture_scalar_outputs = old
    assert "capture_scalar_outputs is set, but sapwood does not capture" in str(report)


def test_torchs_graph_break_and_in_graph_marks_are_honoured():
    import torch._dynamo

    def doubled(t):
        return t.sin() * 2

    def fn(x):
        y = x + 1
        torch._dynamo.graph_break()
        return torch.cosh(y) + doubled(y)

    torch._dynamo.disallow_in_graph(torch.cosh)
    torch.compiler.allow_in_graph(doubled)
    try:
        report = check_breaks(fn, _inputs(), ops=[1, 2], breaks=2)
    finally:
        from torch._dynamo import trace_rules

        trace_rules._disallowed_callable_ids.remove(id(torch.cosh))
        trace_rules._allowed_callable_ids.remove(id(doubled))
    assert "torch._dynamo.graph_break()" in str(report)
    assert "cosh" in str(report)


def test_explain_reports_compile_time_per_stage():
    import time

    def slow_backend(gm, example_inputs):
        time.sleep(0.05)
        return gm.forward

    def fn(x):
        y = x + 1
        print("", end="")
        return y * 2

    report = sapwood_tracer.explain(fn, backend=slow_backend)(X)
    assert len(report.compile_times) == 2
    for _, times in report.compile_times:
        assert times["backend"] >= 0.05
        assert times["total"] >= times["trace"] + times["backend"] + times["entry"]
    assert "Compile time:" in str(report) and "backend" in str(report)
