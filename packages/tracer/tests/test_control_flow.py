"""Control flow on Python values, assert, grad-mode and autocast contexts, try/except.

PYTEST_DONT_REWRITE: the traced functions here contain ``assert`` statements, which must stay
plain Python asserts.
"""

from __future__ import annotations

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import Unsupported

X = torch.randn(3, 4)


def test_if_elif_else_on_python_values(check):
    def fn(x, mode):
        if mode == "a":
            return x + 1
        elif mode == "b" and x.shape[0] > 2:
            return x * 2
        else:
            return -x

    check(fn, (X, "a"), (X, "b"), (X, "c"))


def test_for_while_break_continue(check):
    def fn(x):
        total = x
        for i in range(10):
            if i % 2:
                continue
            if i > 6:
                break
            total = total + i
        n = 0
        while n < 3:
            total = total * 1.5
            n += 1
        else:
            total = total - 1
        return total, n

    check(fn, (X,))


def test_conditional_expressions_and_boolean_operators(check):
    def fn(x, flag):
        a = x if flag else -x
        b = (flag and 3) or 4
        c = None or x
        return a, b, c, not flag

    check(fn, (X, True), (X, False))


def test_assert_on_python_values(check):
    def fn(x):
        assert x.dim() == 2, "2-d only"
        return x

    check(fn, (X,))


def test_failing_assert_is_unsupported():
    def fn(x):
        assert x.dim() == 3
        return x

    with pytest.raises(Unsupported, match="AssertionError"):
        sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)(X)


def test_no_grad_and_enable_grad_blocks(check):
    w = torch.randn(4, requires_grad=True)

    def fn(x, w):
        with torch.no_grad():
            a = x * w
            with torch.enable_grad():
                b = x * w
        c = x * w
        return a, b, c, torch.is_grad_enabled()

    check(fn, (X, w))


def test_set_grad_enabled_block(check):
    w = torch.randn(4, requires_grad=True)

    def fn(x, w):
        with torch.set_grad_enabled(False):
            a = x * w
        return a, x * w

    check(fn, (X, w))


def test_grad_mode_at_call_time_is_guarded(backend, same):
    w = torch.randn(4, requires_grad=True)

    def fn(x, w):
        return x * w

    compiled = sapwood_tracer.compile(fn, backend=backend)
    same(compiled(X, w), fn(X, w))
    with torch.no_grad():
        same(compiled(X, w), fn(X, w))
    assert backend.count == 2


def test_autocast_block(check):
    def fn(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = x @ y
        return z, z.float() + 1

    check(fn, (X, torch.randn(4, 2)))


def test_try_except_not_taken(check):
    def fn(x):
        try:
            y = x * 2
        except ValueError:
            y = x
        finally:
            y = y + 1
        return y

    check(fn, (X,))


def test_raise_is_unsupported_with_location():
    def fn(x):
        if x.dim() == 2:
            raise ValueError("no")
        return x

    with pytest.raises(Unsupported, match=r"ValueError.*test_control_flow\.py:\d+"):
        sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)(X)


class _Scaled:
    def __init__(self, factor):
        self.factor = factor
        self.entered = False

    def __enter__(self):
        self.entered = True
        return self.factor

    def __exit__(self, *exc):
        self.entered = False
        return False


def test_user_context_managers_are_inlined(check):
    def fn(x):
        with _Scaled(3.0) as f:
            y = x * f
        return y

    check(fn, (X,))


def test_library_context_managers_without_python_enter_are_refused():
    import threading

    lock = threading.RLock()  # (a plain Lock is modelled: see test_hook_registration)

    def fn(x):
        with lock:
            return x

    with pytest.raises(Unsupported):
        sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)(X)


def test_no_grad_as_a_decorator_of_a_helper(check):
    @torch.no_grad()
    def frozen(x, w):
        return x * w

    w = torch.randn(4, requires_grad=True)

    def fn(x, w):
        return frozen(x, w), x * w

    check(fn, (X, w))
