"""What a user's special method returns is checked as CPython checks it, wherever CPython calls
the method implicitly: ``len()`` and truth tests (``__len__`` must give an int >= 0 that fits
a ``Py_ssize_t``), ``bool``/``if``/``not``/``and``/``or`` (``__bool__`` exactly a bool),
``for`` and ``iter()`` (``__iter__`` an iterator), ``hash()``, ``int()``, ``float()``,
``operator.index``, ``str()``/``repr()``; and ``list()``, ``tuple()``, ``sorted()``, ``[*x]``,
``f(*x)``, ``str.join`` and ``list.extend`` run the length hint (``__len__``, else
``__length_hint__``) that CPython sizes their result with. Each case compiles with an eager
backend and must give what eager Python gives: the same result or the same exception (type
and message), after the same calls of the user's methods.

The last test is a property test: classes whose special methods return values of odd types,
used in every implicit context, compiled and compared with eager.
"""

from __future__ import annotations

import collections.abc
import math
import operator
import sys
import warnings
from typing import Any

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given

import sapwood_tracer
from sapwood_tracer import EagerFallbackWarning, Unsupported

CALLS: list[str] = []


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


def _outcome(run: Any) -> tuple[Any, ...]:
    """What a call did: its result (objects by type: their addresses differ between runs) or
    its exception's type and message, and the user's special methods it called."""
    CALLS.clear()
    try:
        result = run()
    except Exception as exc:
        return ("raised", type(exc).__name__, str(exc), tuple(CALLS))
    return ("returned", _shown(result), tuple(CALLS))


def _shown(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_shown(v) for v in value)
    if isinstance(value, torch.Tensor):
        return ("tensor", value.tolist())
    if isinstance(value, (float, complex)):
        return repr(value)  # (a NaN is equal to nothing)
    if type(value).__module__ == __name__ or type(value).__name__.endswith("iterator"):
        return f"<{type(value).__name__}>"
    return value


def _same_as_eager(fn: Any, *args: Any, backend: Any = None) -> tuple[Any, ...]:
    """Compile ``fn`` (a function of a tensor first), compare a call with eager's; returns the
    compiled outcome. No part of it fell back for a failure of sapwood's own; with a counting
    ``backend``, at least one graph was compiled, so the trace ran."""
    eager = _outcome(lambda: fn(*args)[1])
    graphs = backend.count if backend is not None else 0
    compiled = sapwood_tracer.compile(fn, backend=backend or _eager)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        got = _outcome(lambda: compiled(*args)[1])
    assert got == eager
    assert not [w for w in warned if issubclass(w.category, EagerFallbackWarning)]
    assert backend is None or backend.count > graphs
    return got


def _returning(name: str, value: Any, **more: Any) -> Any:
    """An instance of a new class whose special method ``name`` records its call and
    returns ``value``."""

    def method(self: Any, *args: Any) -> Any:
        CALLS.append(name)
        return value

    return type("Odd", (), {name: method, **more})()


X = torch.ones(2)


# ------------------------------------------------------------------ the rows
@pytest.mark.parametrize(
    ("returned", "error"),
    [(-1, "ValueError"), (0.42, "TypeError"), (2**70, "OverflowError"), (-(2**70), "ValueError")],
)
def test_len_refuses_what_cpython_refuses(returned, error, backend):
    got = _same_as_eager(
        lambda x, a: (x + 1, len(a)), X, _returning("__len__", returned), backend=backend
    )
    assert got[:2] == ("raised", error)


def test_bool_refuses_an_int(backend):
    got = _same_as_eager(
        lambda x, a: (x + 1, bool(a)), X, _returning("__bool__", 1), backend=backend
    )
    assert got[:3] == ("raised", "TypeError", "__bool__ should return bool, returned int")


TRUTH_CONTEXTS = {
    "bool": lambda x, a: (x + 1, bool(a)),
    "if": lambda x, a: (x + 1, 1 if a else 2),
    "not": lambda x, a: (x + 1, not a),
    "and": lambda x, a: (x + 1, (a and 7) is a),
    "or": lambda x, a: (x + 1, (a or 7) is a),
    "any": lambda x, a: (x + 1, any([a])),
    "all": lambda x, a: (x + 1, all([a, a])),
    "filter": lambda x, a: (x + 1, len(list(filter(None, [a])))),
    "truth": lambda x, a: (x + 1, operator.truth(a)),
    "not_": lambda x, a: (x + 1, operator.not_(a)),
    "comprehension": lambda x, a: (x + 1, len([v for v in [a] if v])),
}


@pytest.mark.parametrize("context", sorted(TRUTH_CONTEXTS))
@pytest.mark.parametrize("returned", [1, 0, None, "", (), 1.0, NotImplemented, True, False])
def test_every_truth_test_checks_bool(context, returned, backend):
    _same_as_eager(TRUTH_CONTEXTS[context], X, _returning("__bool__", returned), backend=backend)


@pytest.mark.parametrize("context", sorted(TRUTH_CONTEXTS))
@pytest.mark.parametrize("returned", [-1, 0.5, 2**63, 3, 0, True])
def test_every_truth_test_checks_len(context, returned, backend):
    _same_as_eager(TRUTH_CONTEXTS[context], X, _returning("__len__", returned), backend=backend)


def test_valid_results_are_inlined_in_one_graph(backend):
    class Sized:
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __bool__(self):
            return self.n > 1

        def __iter__(self):
            return iter(range(self.n))

        def __hash__(self):
            return -1

        def __index__(self):
            return self.n

    def fn(x, s):
        out = x * len(s)
        if s:
            out = out + sum(s)
        return out, hash(s), operator.index(s), [0, 1, 2, 3][s], list(s)

    compiled = sapwood_tracer.compile(fn, backend=backend, fullgraph=True)
    got, expected = compiled(X, Sized(3)), fn(X, Sized(3))
    assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:] == (-2, 3, 3, [0, 1, 2])
    assert backend.count == 1


def test_a_modules_bool_is_its_own(backend):
    class Gate(torch.nn.Module):
        def __init__(self, on):
            super().__init__()
            self.on = on

        def __bool__(self):
            return self.on

    class Net(torch.nn.Module):
        def __init__(self, on):
            super().__init__()
            self.gate = Gate(on)

        def forward(self, x):
            return x * 2 if self.gate else x - 1

    for on in (False, True):
        net = Net(on)
        got = sapwood_tracer.compile(net, backend=backend, fullgraph=True)(X)
        assert torch.equal(got, net(X))
    net = Net(1)  # an int from __bool__: Python's TypeError
    with pytest.raises(TypeError, match="__bool__ should return bool, returned int"):
        net(X)
    with pytest.raises(TypeError, match="__bool__ should return bool, returned int"):
        sapwood_tracer.compile(net, backend=backend)(X)


@pytest.mark.parametrize("returned", [(), [1], "ab", 3, None])
def test_iter_must_return_an_iterator(returned, backend):
    for context in (
        lambda x, a: (x + 1, iter(a)),
        lambda x, a: (x + 1, [v for v in a]),
        lambda x, a: (x + 1, list(a)),
        lambda x, a: (x + 1, next(iter(a))),
    ):
        got = _same_as_eager(context, X, _returning("__iter__", returned), backend=backend)
        assert got[:2] == ("raised", "TypeError")


@pytest.mark.parametrize("returned", [-1, 2**70, 1.5, "s", True, -(2**64) + 5])
def test_hash_results(returned, backend):
    _same_as_eager(
        lambda x, a: (x + 1, hash(a)), X, _returning("__hash__", returned), backend=backend
    )


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("__index__", operator.index),
        ("__index__", hex),
        ("__index__", lambda a: [1, 2, 3, 4][a]),
        ("__int__", int),
        ("__float__", float),
        ("__str__", str),
        ("__repr__", repr),
    ],
)
@pytest.mark.parametrize("returned", [2, 1.5, "s", None, True, b"b"])
def test_conversion_results(name, call, returned, backend):
    _same_as_eager(lambda x, a: (x + 1, call(a)), X, _returning(name, returned), backend=backend)


FORMAT_CONTEXTS = {
    "f-string": lambda x, a: (x + 1, f"{a}"),
    "f-string spec": lambda x, a: (x + 1, f"{a:>4}"),
    "f-string !r": lambda x, a: (x + 1, f"{a!r:>6}"),
    "format": lambda x, a: (x + 1, format(a, "x")),
    "str.format": lambda x, a: (x + 1, "<{}>".format(a)),  # noqa: UP032 (the method)
}


@pytest.mark.parametrize("context", sorted(FORMAT_CONTEXTS))
@pytest.mark.parametrize(
    ("name", "returned"),
    [("__format__", "ok"), ("__format__", 5), ("__format__", None), ("__str__", "s"),
     ("__str__", 2), ("__repr__", "r")],
)  # fmt: skip
def test_formatting_inlines_and_checks(context, name, returned, backend):
    _same_as_eager(FORMAT_CONTEXTS[context], X, _returning(name, returned), backend=backend)


# ------------------------------------------------------------------ the length hint
def _items(self):
    CALLS.append("__iter__")
    return iter([1, 2])


SIZED_CONSUMERS = {
    "list": lambda x, a: (x + 1, list(a)),
    "tuple": lambda x, a: (x + 1, tuple(a)),
    "sorted": lambda x, a: (x + 1, sorted(a)),
    "unpacked": lambda x, a: (x + 1, [*a]),
    "star call": lambda x, a: (x + 1, max(*a)),
    "extend": lambda x, a: (x + 1, [0].extend(a)),
    "join": lambda x, a: (x + 1, "-".join(map(str, list(a)))),
}


@pytest.mark.parametrize("consumer", sorted(SIZED_CONSUMERS))
@pytest.mark.parametrize("hint", ["__len__", "__length_hint__"])
@pytest.mark.parametrize("returned", [2, 0, -1, 0.5, NotImplemented, 2**70, sys.maxsize])
def test_sized_consumers_run_the_length_hint(consumer, hint, returned, backend):
    odd = _returning(hint, returned, __iter__=_items)
    _same_as_eager(SIZED_CONSUMERS[consumer], X, odd, backend=backend)


def test_a_type_error_in_len_falls_back_to_length_hint(backend):
    def length(self):
        CALLS.append("__len__")
        raise TypeError("no length")

    a = _returning("__length_hint__", -3, __iter__=_items, __len__=length)
    got = _same_as_eager(lambda x, a: (x + 1, list(a)), X, a, backend=backend)
    assert got == (
        "raised",
        "ValueError",
        "__length_hint__() should return >= 0",
        ("__iter__", "__len__", "__length_hint__"),
    )


def test_iterating_a_sequence_does_not_call_its_len(backend):
    class Seq(collections.abc.Sequence):  # (its __iter__: self[0], self[1], ... to IndexError)
        def __len__(self):
            CALLS.append("__len__")
            return 2

        def __getitem__(self, i):
            CALLS.append(i)
            if i >= 3:
                raise IndexError(i)
            return i * 10

    def fn(x, s):
        return x + 1, ([v for v in s], list(s))

    got = _same_as_eager(fn, X, Seq(), backend=backend)
    assert got[1] == ([0, 10, 20], [0, 10, 20])


def test_a_slice_of_an_object_is_not_folded_at_trace_time(backend):
    # (its bounds are the user's objects: slice.indices calls their __index__, once)
    odd = _returning("__index__", 0.5)
    got = _same_as_eager(lambda x, a: (x + 1, slice(a).indices(5)), X, odd, backend=backend)
    assert got[3] == ("__index__",)


def test_a_subclass_of_int_from_index_is_a_graph_break(backend):
    a = _returning("__index__", True)
    with pytest.raises(Unsupported, match="a subclass of int"):
        sapwood_tracer.compile(lambda x, a: x + operator.index(a), backend=backend, fullgraph=True)(
            X, a
        )


# ------------------------------------------------------------------ the property test
class IntSub(int):
    pass


class FloatSub(float):
    pass


class StrSub(str):
    pass


class Indexable:
    def __index__(self):
        CALLS.append("Indexable.__index__")
        return 2


ODD_VALUES = [
    -1, 0, 1, 2, 2**63, sys.maxsize, 2**70, -(2**70), True, False, 0.5, -0.0,
    float("nan"), 1j, None, "", "s", b"b", (), (1,), [], [1], NotImplemented, Ellipsis,
    IntSub(2), FloatSub(1.5), StrSub("x"), Indexable(), object, len,
]  # fmt: skip

SPECIAL_METHODS = [
    "__len__", "__bool__", "__index__", "__int__", "__float__", "__complex__", "__hash__",
    "__iter__", "__length_hint__", "__str__", "__repr__", "__format__", "__bytes__",
    "__contains__", "__eq__", "__lt__",
]  # fmt: skip

#: (nothing that allocates as much as an odd integer says: ``list(range(n))``, ``bytes(n)``
#: or ``tuple(a)`` with a length hint ``n`` of a few billion would fill the machine's memory,
#: eagerly; the integers are small or past what a ``Py_ssize_t`` holds)
USES = [
    "len(a)", "bool(a)", "1 if a else 2", "not a", "(a and 7) is a", "(a or 7) is a",
    "any([a])", "all([a])", "operator.truth(a)", "operator.index(a)", "[1, 2, 3, 4][a]",
    "[1, 2, 3, 4][a:]", "len(range(a))", "hex(a)", "int(a)", "float(a)", "complex(a)",
    "hash(a)", "len({a: 1})", "str(a)", "repr(a)", "f'{a}'", "format(a, '>3')",
    "iter(a) is not None", "list(a)", "tuple(a)", "sorted(a)", "[*a]", "[v for v in a]",
    "operator.length_hint(a, 5)", "1 in a", "a == 1", "a != a", "a < 1", "sorted([a, a])",
    "math.floor(a)", "divmod(7, a)", "'%d' % a",
]  # fmt: skip


@st.composite
def _odd_programs(draw: Any) -> tuple[dict[str, Any], list[str]]:
    names = draw(st.lists(st.sampled_from(SPECIAL_METHODS), min_size=1, max_size=4, unique=True))
    returns = {name: draw(st.sampled_from(ODD_VALUES)) for name in names}
    uses = draw(st.lists(st.sampled_from(USES), min_size=1, max_size=6))
    return returns, uses


def _odd_class(returns: dict[str, Any]) -> type:
    def method(name: str, value: Any) -> Any:
        def special(self, *args):
            CALLS.append(name)
            return value

        return special

    return type("Odd", (), {name: method(name, value) for name, value in returns.items()})


@given(_odd_programs())
def test_odd_special_method_results_match_eager(program):
    """Every use is caught inside the compiled function (so the trace's exception handling
    is exercised too), and its outcome recorded; the function returns them all."""
    returns, uses = program
    lines = ["def fn(x, a):", "    out = [x + 1]"]
    for use in uses:
        lines += [
            "    try:",
            f"        out.append({use})",
            "    except Exception as e:",
            "        out.append((type(e).__name__, str(e)))",
        ]
    lines.append("    return x * 2, out[1:]")
    namespace = {"operator": operator, "math": math}
    exec(compile("\n".join(lines), "<odd program>", "exec"), namespace)
    _same_as_eager(namespace["fn"], X, _odd_class(returns)())
