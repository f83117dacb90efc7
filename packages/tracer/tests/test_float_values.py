"""Floats where the trace needs their value: ``float.__getformat__`` (read with a guard),
and a symbolic float made from symbolic ints (``i / 1000`` of a loop item) given to
``format()``, ``round()``, ``repr()``: computed again by Python's own arithmetic from the
ints' values (the ints specialised), so the text is eager's, bit for bit."""

from __future__ import annotations

import torch

import sapwood_tracer

X = torch.ones(2)


def _eager(gm, example_inputs):
    return gm.forward


def test_float_getformat_is_read_and_bad_arguments_raise_pythons_errors(check):
    def fn(x):
        out = [float.__getformat__("double"), float.__getformat__("float")]
        for bad in ("chicken", 1):
            try:
                float.__getformat__(bad)
            except (ValueError, TypeError) as exc:
                out.append((type(exc).__name__, str(exc)))
        return x + 1, out

    check(fn, (X,))
    report = sapwood_tracer.explain(fn)(X)
    assert not report.breaks and not report.eager_functions, str(report)


def _texts_of_loop_floats(x):
    out = []
    for i in range(5, 5000, 1000):
        y = i / 1000.0
        z = -(i * 3 + 0.5) / 7
        out.append((format(y, ".2f"), round(y, 2), repr(z), str(y), float(format(z, ".3f"))))
        _breaks(out)  # (the loop's next item arrives in a resume function: i is symbolic)
    return x + 1, out


@sapwood_tracer.disable
def _breaks(out):
    pass


def test_a_symbolic_float_made_from_symbolic_ints_is_specialised():
    x = torch.ones(1)
    compiled = sapwood_tracer.compile(_texts_of_loop_floats, backend=_eager)
    got, want = compiled(x), _texts_of_loop_floats(x)
    assert torch.equal(got[0], want[0]) and got[1] == want[1]
    report = sapwood_tracer.explain(_texts_of_loop_floats)(x)
    assert not report.eager_functions, str(report)
    assert all("symbolic" not in b.reason for b in report.breaks), str(report)
