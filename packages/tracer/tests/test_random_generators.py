"""Draws of ``random``'s generators in compiled code are the draws eager Python makes, and the
generator ends in the state eager Python leaves it in: the draws are computed while tracing on
a copy of a generator whose state the trace knows (seeded in the function, or read at the call
and guarded), and the real generator gets the final state after the graph."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sapwood_tracer


def _eager(gm: Any, example_inputs: list[Any]) -> Any:
    return gm.forward


def _compiled(fn: Any) -> Any:
    return sapwood_tracer.compile(fn, backend=_eager)


@pytest.fixture(autouse=True)
def _fresh():
    state = random.getstate()
    yield
    random.setstate(state)


def _seeded_draws(xs: list[int]) -> list[Any]:
    random.seed(0)
    random.shuffle(xs)
    return [
        random.random(),
        random.randint(-100, 100),
        random.randrange(3, 1000, 7),
        random.choice("abcdefgh"),
        random.sample(range(50), 5),
        random.uniform(1.0, 2.0),
        random.gauss(0.0, 1.0),
        random.getrandbits(70),
    ]


def test_draws_after_a_seed_in_the_function_are_compiled_and_match_eager_python():
    eager_list, compiled_list = list(range(20)), list(range(20))
    expected = _seeded_draws(eager_list)
    expected_state = random.getstate()
    random.seed(12345)  # (the seed in the function decides: the state at the call does not)
    report = sapwood_tracer.explain(_seeded_draws)(list(range(20)))
    assert report.breaks == [] and report.eager_functions == []
    random.seed(999)
    assert _compiled(_seeded_draws)(compiled_list) == expected
    assert compiled_list == eager_list  # shuffled in place, as eagerly
    assert random.getstate() == expected_state  # gauss_next included


def _draws() -> list[Any]:
    return [random.random() for _ in range(3)] + [random.randrange(10), random.getrandbits(5)]


def test_draws_without_a_seed_start_from_the_state_at_the_call():
    random.seed(7)
    expected = _draws()
    expected_state = random.getstate()
    random.seed(7)
    report = sapwood_tracer.explain(_draws)()
    assert report.breaks == [] and report.eager_functions == []
    assert random.getstate() == expected_state
    random.seed(7)
    compiled = _compiled(_draws)
    assert compiled() == expected
    assert random.getstate() == expected_state


def test_a_function_finding_another_state_on_a_later_call_draws_eagerly_and_right():
    compiled = _compiled(_draws)
    for seed in (1, 2, 3, 1):
        random.seed(seed)
        expected = _draws()
        expected_state = random.getstate()
        random.seed(seed)
        assert compiled() == expected
        assert random.getstate() == expected_state


def test_a_function_traced_again_on_another_state_breaks_instead_of_specialising():
    reasons: list[str] = []

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "capture" and data["entry"].exit is not None:
            reasons.append(data["entry"].exit.reason)

    compiled = _compiled(_draws)
    stop = sapwood_tracer.api.events.listen(on_event)
    try:
        random.seed(1)
        compiled()
        assert reasons == []  # specialised on the state after seed(1)
        random.seed(2)
        compiled()
    finally:
        stop()
    # (on 3.12+ the comprehension is part of _draws: its loop resumes after the break too)
    assert reasons and "state changed since _draws was last compiled" in reasons[0]


def test_a_generator_passed_in_is_modelled_and_left_in_its_eager_state():
    def f(rng: random.Random, xs: list[int]) -> Any:
        rng.shuffle(xs)
        return rng.random(), rng.randrange(100), rng.choice(xs)

    compiled = _compiled(f)
    for seed in (3, 3, 4):
        a, b = random.Random(seed), random.Random(seed)
        xs, ys = list(range(10)), list(range(10))
        assert compiled(b, ys) == f(a, xs)
        assert ys == xs and b.getstate() == a.getstate()


def test_two_generators_passed_in_keep_their_own_states():
    def f(a: random.Random, b: random.Random) -> Any:
        a.seed(1)
        return b.random()

    compiled = _compiled(f)
    rng, expected_rng = random.Random(5), random.Random(5)
    assert compiled(rng, rng) == f(expected_rng, expected_rng)  # (traced with one object)
    assert rng.getstate() == expected_rng.getstate()
    one, other = random.Random(5), random.Random(6)
    expected_one, expected_other = random.Random(5), random.Random(6)
    expected = f(expected_one, expected_other)
    assert compiled(one, other) == expected
    assert one.getstate() == expected_one.getstate()
    assert other.getstate() == expected_other.getstate()
    same, expected_same = random.Random(9), random.Random(9)
    assert compiled(same, same) == f(expected_same, expected_same)
    assert same.getstate() == expected_same.getstate()


def test_getstate_and_setstate_are_modelled():
    def f() -> Any:
        state = random.getstate()
        first = random.random()
        random.setstate(state)
        return first == random.random(), random.getstate() == state

    random.seed(11)
    expected = f()
    expected_state = random.getstate()
    random.seed(11)
    report = sapwood_tracer.explain(f)()
    assert report.breaks == []
    assert random.getstate() == expected_state
    random.seed(11)
    assert _compiled(f)() == expected


def test_errors_of_the_primitives_are_pythons_own():
    def f() -> Any:
        random.seed(3)
        try:
            random.getrandbits(-1)
        except ValueError as exc:
            message = str(exc)
        try:
            random.setstate((3, (1, 2), None))
        except ValueError as exc:
            message += "|" + str(exc)
        return message, random.random()

    expected = f()
    report = sapwood_tracer.explain(f)()
    assert report.breaks == []
    assert _compiled(f)() == expected


def test_seeding_from_the_operating_system_is_a_graph_break():
    def f() -> Any:
        random.seed()
        return random.random()

    report = sapwood_tracer.explain(f)()
    assert any("operating system" in b.reason for b in report.breaks)


_operations = st.lists(
    st.one_of(
        st.tuples(st.just("random"), st.none()),
        st.tuples(st.just("randint"), st.tuples(st.integers(-50, 0), st.integers(0, 50))),
        st.tuples(st.just("getrandbits"), st.integers(0, 100)),
        st.tuples(st.just("shuffle"), st.integers(0, 8)),
        st.tuples(st.just("choice"), st.integers(1, 8)),
        st.tuples(st.just("seed"), st.integers(0, 2**40)),
    ),
    max_size=8,
)


def _run(ops: list[tuple[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for name, arg in ops:
        if name == "random":
            out.append(random.random())
        elif name == "randint":
            out.append(random.randint(arg[0], arg[1]))
        elif name == "getrandbits":
            out.append(random.getrandbits(arg))
        elif name == "shuffle":
            xs = list(range(arg))
            random.shuffle(xs)
            out.append(xs)
        elif name == "choice":
            out.append(random.choice(range(arg)))
        else:
            random.seed(arg)
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), ops=_operations)
def test_any_sequence_of_draws_matches_eager_python(seed: int, ops: list[tuple[str, Any]]):
    sapwood_tracer.reset()
    random.seed(seed)
    expected = _run(ops)
    expected_state = random.getstate()
    random.seed(seed)
    assert _compiled(_run)(ops) == expected
    assert random.getstate() == expected_state


def test_sorting_symbolic_ints_and_tuples_of_them_keeps_the_objects():
    def f(xs: list[int]) -> Any:
        plain = sorted(xs)
        by_tuple = [t[1] for t in sorted([(0, x) for x in xs])]
        return plain, by_tuple

    compiled = _compiled(f)
    for xs in ([1, 1.1], [1 << 70, 1.1], [1.1, 1 << 70], [1 << 71, 5, 1 << 72]):
        plain, by_tuple = compiled(xs)
        assert plain == sorted(xs)
        assert all(a is b for a, b in zip(plain, by_tuple))
        assert all(any(a is x for x in xs) for a in plain)
    report = sapwood_tracer.explain(f)([1 << 75, 2])
    assert report.breaks == []


@sapwood_tracer.disable
def _draw_eagerly() -> float:
    return random.random()


def test_code_running_eagerly_at_a_break_sees_the_state_the_trace_left():
    def f() -> Any:
        random.seed(4)
        first = random.random()
        between = _draw_eagerly()  # (a graph break: the generator's state is written first)
        return first, between, random.random()

    expected = f()
    expected_state = random.getstate()
    report = sapwood_tracer.explain(f)()
    assert len(report.breaks) == 1
    assert random.getstate() == expected_state
    assert _compiled(f)() == expected
    assert random.getstate() == expected_state
