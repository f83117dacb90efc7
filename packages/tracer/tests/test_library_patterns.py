"""Patterns of library code (transformers and others) that must trace into one graph and
behave as eagerly: custom ``torch.autograd.Function`` classes, functions marked as having a
constant result (install probes, version checks)."""

from __future__ import annotations

import copy
import functools
import math

import pytest
import torch

import sapwood_tracer


def _eager(gm, example_inputs):
    return gm.forward


def _aot_eager(gm, example_inputs):
    # AOT autograd traces forward and backward together (the joint graph), as training does
    from torch._dynamo.backends.debugging import aot_eager

    return aot_eager(gm, example_inputs)


BACKENDS = {"eager": _eager, "aot_eager": _aot_eager}


def _compiled_eager(fn):
    return sapwood_tracer.compile(fn, backend=_eager)


# ----------------------------------------------------------------- torch.autograd.Function
class TimesTwoBackwardThree(torch.autograd.Function):
    """Its backward is deliberately not the derivative of its forward: a gradient equal to
    eager's proves the user's backward ran."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 + x


class ScaleWithSetupContext(torch.autograd.Function):
    """The newer style: ``forward`` without ``ctx``, ``setup_context`` separate; a constant
    argument and two outputs, one of them non-differentiable."""

    @staticmethod
    def forward(x, scale):
        return x * scale, (x > 0).to(x.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.scale = inputs[1]
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, grad, _unused):
        return grad * ctx.scale * 10, None


def test_autograd_function_forward_is_one_graph_equal_to_eager(check):
    def fn(x):
        return TimesTwoBackwardThree.apply(x.sin()).cos()

    check(fn, (torch.randn(4),), (torch.randn(2, 3),))


@pytest.mark.parametrize("backend_name", ["eager", "aot_eager"])
def test_autograd_function_backward_is_the_users(backend_name):
    def fn(x):
        return TimesTwoBackwardThree.apply(x.sin()).cos().sum()

    x = torch.randn(5, requires_grad=True)
    fn(x).backward()
    expected = x.grad.clone()
    x.grad = None
    explained = sapwood_tracer.explain(fn)(x)
    assert len(explained.graphs) == 1 and not explained.breaks
    x.grad = None
    sapwood_tracer.reset()
    loss = sapwood_tracer.compile(fn, backend=BACKENDS[backend_name])(x)
    loss.backward()
    torch.testing.assert_close(x.grad, expected)


@pytest.mark.parametrize("backend_name", ["eager", "aot_eager"])
def test_autograd_function_with_setup_context_and_constant_argument(backend_name):
    def fn(x):
        y, positive = ScaleWithSetupContext.apply(x, 0.5)
        return (y * positive).sum(), positive

    x = torch.randn(6, requires_grad=True)
    loss, positive = fn(x)
    loss.backward()
    expected_grad, expected_positive = x.grad.clone(), positive
    x.grad = None
    loss, positive = sapwood_tracer.compile(fn, backend=BACKENDS[backend_name])(x)
    loss.backward()
    torch.testing.assert_close(x.grad, expected_grad)
    torch.testing.assert_close(positive, expected_positive)
    assert not positive.requires_grad


class Box:
    def __init__(self, value):
        self.value = value


class TakesAnObject(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, box):
        box.value += 1  # a side effect the graph could not replay
        return x + box.value

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def test_autograd_function_with_an_object_argument_breaks_and_stays_correct():
    def fn(x, box):
        return TakesAnObject.apply(x * 2, box) + 1

    eager_box, compiled_box = Box(0), Box(0)
    x = torch.randn(3)
    compiled = sapwood_tracer.compile(fn, backend=_eager)
    for _ in range(3):
        torch.testing.assert_close(compiled(x, compiled_box), fn(x, eager_box))
    assert compiled_box.value == eager_box.value == 3


# ----------------------------------------------------------------- constant-result functions
def test_function_marked_constant_runs_once_at_trace_time(backend):
    calls = []

    def probe(name):
        calls.append(name)
        return name == "torch"

    probe._dynamo_marked_constant = True  # what transformers' install probes carry

    def fn(x):
        return x + 1 if probe("torch") else x - 1

    compiled = sapwood_tracer.compile(fn, backend=backend)
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), x + 1)
    assert calls == ["torch"]  # run for real once while tracing, never traced through
    assert backend.count == 1


def test_memoised_marked_function_runs_through_its_cache(backend):
    @functools.lru_cache
    @torch._dynamo.assume_constant_result
    def version_at_least(major):
        return torch.__version__ >= str(major)

    version_at_least(2)  # cached already
    before = version_at_least.cache_info()

    def fn(x):
        if version_at_least(2):
            return x * 2
        return x

    compiled = sapwood_tracer.compile(fn, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), fn(x))
    after = version_at_least.cache_info()
    assert after.misses == before.misses  # the trace took the cached answer
    assert backend.count == 1


def test_marked_function_with_a_tensor_argument_is_traced(check):
    def double(t):
        return t * 2

    double._dynamo_marked_constant = True

    def fn(x):
        return double(x) + 1

    check(fn, (torch.randn(3),), (torch.randn(2, 2),))


def test_marked_function_that_raises_keeps_eager_behaviour():
    def probe(flag):
        if flag:
            raise RuntimeError("no such package")
        return 1

    probe._dynamo_marked_constant = True

    def fn(x, flag):
        try:
            return x + probe(flag)
        except RuntimeError:
            return x - 1

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    x = torch.randn(3)
    for flag in (False, True, False):
        torch.testing.assert_close(compiled(x, flag), fn(x, flag))


# ----------------------------------------------------------------- id() as a dict key
class Plain:
    def __init__(self):
        self.items = [1, 2]


def test_id_of_objects_as_dict_keys_is_one_graph_equal_to_eager(check):
    def fn(x, a, b):
        memo = {}  # the shape of copy.deepcopy's memo
        memo[id(a)] = 1
        fresh = Plain()
        memo[id(fresh)] = 10
        return x + memo.get(id(a), 0) + memo.get(id(b), 100) + memo[id(fresh)] + (id(b) in memo)

    one, other = Plain(), Plain()
    check(fn, (torch.ones(2), one, other), (torch.ones(2), one, one), graphs=2)


def test_id_of_an_input_list_as_a_dict_key_stays_correct():
    def fn(x, obj):
        memo = {id(obj.items): 1}
        return x + memo.get(id(obj.items), 0)

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    obj = Plain()
    torch.testing.assert_close(compiled(torch.ones(2), obj), fn(torch.ones(2), obj))


def test_identity_of_two_object_inputs_is_guarded(check):
    def fn(x, a, b):
        return x + 1 if a is b else x - 1

    one, other = Plain(), Plain()
    check(fn, (torch.ones(2), one, other), (torch.ones(2), one, one), graphs=2)


# ----------------------------------------------------------------- tables keyed by class
class _Plain:
    pass


class _Other:
    pass


_HANDLERS_BY_CLASS = {int: "int", str: "str", _Plain: "plain", torch.Tensor: "tensor"}


def _handler_of(x, value):
    return x + 1, _HANDLERS_BY_CLASS.get(type(value), "none"), len(_HANDLERS_BY_CLASS)


def test_a_table_keyed_by_classes_is_read_in_one_graph():
    # the ``copy`` module's own tables (copiers by type) are such dicts
    x = torch.ones(2)
    for value in (3, "s", _Plain(), _Other()):
        got = _compiled_eager(_handler_of)(x, value)
        want = _handler_of(x, value)
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    report = sapwood_tracer.explain(_handler_of)(x, _Plain())
    assert not report.breaks and not report.eager_functions, str(report)


def test_a_key_added_to_a_table_keyed_by_classes_is_seen_on_the_next_call():
    x = torch.ones(2)
    compiled = _compiled_eager(_handler_of)
    assert compiled(x, _Other())[1] == "none"
    _HANDLERS_BY_CLASS[_Other] = "other"
    try:
        assert compiled(x, _Other())[1:] == ("other", 5)
    finally:
        del _HANDLERS_BY_CLASS[_Other]
    assert compiled(x, _Other())[1:] == ("none", 4)


def test_a_table_keyed_by_local_classes_is_read_in_one_graph():
    class Local:
        pass

    class Other:
        pass

    table = {Local: 1}

    def lookup(x, value):
        return x + table.get(type(value), 0)

    x = torch.ones(1)
    compiled = _compiled_eager(lookup)
    assert torch.equal(compiled(x, Local()), lookup(x, Local()))
    report = sapwood_tracer.explain(lookup)(x, Local())
    assert not report.breaks and report.graph_count == 1, str(report)
    table[Other] = 5  # the keys are guarded: a new key is seen
    assert torch.equal(compiled(x, Other()), lookup(x, Other()))
    del table[Local]
    assert torch.equal(compiled(x, Local()), lookup(x, Local()))


def _copies(x):
    return x + 1, copy.copy([1, 2]), copy.copy(_Plain) is _Plain, copy.copy((1, "a"))


def test_copy_copy_of_builtin_values_and_classes_stays_in_one_graph():
    x = torch.ones(1)
    got = _compiled_eager(_copies)(x)
    want = _copies(x)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    report = sapwood_tracer.explain(_copies)(x)
    assert not report.breaks and not report.eager_functions, str(report)


# ----------------------------------------------------------------- loop items and builtins
@sapwood_tracer.disable
def _same(a, b):
    assert a == b or (a != a and b != b), (a, b)


def _folds_over_loop_items(x):
    out = []
    for n in [324, 2**31, -308, 3]:
        _same(round(123.456, n), round(123.456, n))  # (the break makes n symbolic)
        out.append((round(1.25, n), math.gcd(n, 12)))
    for i in range(-4, 4):
        _same(hash(i), hash(i * 1))
        out.append(hash(i))
    return x + 1, out


def test_a_symbolic_loop_item_given_to_a_folded_builtin_is_specialised():
    x = torch.ones(1)
    got = _compiled_eager(_folds_over_loop_items)(x)
    want = _folds_over_loop_items(x)
    assert torch.equal(got[0], want[0]) and got[1] == want[1]
    report = sapwood_tracer.explain(_folds_over_loop_items)(x)
    assert not report.eager_functions, str(report)
    assert all("non-constant" not in b.reason for b in report.breaks), str(report)


# ----------------------------------------------------------------- property objects
class _WithProperty:
    @property
    def spam(self):
        "the getter's doc"
        return 5

    @spam.setter
    def spam(self, value):
        self._spam = value


def _property_parts(x):
    obj = _WithProperty()
    p = type(obj).spam
    return x + p.fget(obj), p.__doc__, p.fset is not None, p.fdel, type(p).__name__


def test_a_property_read_through_its_class_is_an_input_with_its_parts():
    x = torch.ones(1)
    compiled = _compiled_eager(_property_parts)
    got, want = compiled(x), _property_parts(x)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    report = sapwood_tracer.explain(_property_parts)(x)
    assert not report.breaks, str(report)
    _WithProperty.spam.__doc__ = "changed"  # (a property's doc can be set: read again)
    try:
        assert compiled(x)[1] == "changed"
    finally:
        _WithProperty.spam.__doc__ = "the getter's doc"


def _powers_of_loop_items(x):
    out = []
    for b in False, True:
        for i in 0, 1, 2:
            _same(b**i, int(b) ** i)  # (the break makes i symbolic)
            out.append((b**i, type(b**i).__name__, 0**i, b * i, b + i))
    return x + 1, out


def test_bool_and_power_arithmetic_with_a_symbolic_loop_item_is_exact():
    x = torch.ones(1)
    got = _compiled_eager(_powers_of_loop_items)(x)
    want = _powers_of_loop_items(x)
    assert torch.equal(got[0], want[0]) and got[1] == want[1]
    report = sapwood_tracer.explain(_powers_of_loop_items)(x)
    assert not report.eager_functions, str(report)
    assert all("internal error" not in b.reason for b in report.breaks), str(report)


# ----------------------------------------------------------------- hash() of user objects
_hash_calls: list[int] = []


class _Hashed:
    def __init__(self, value):
        self.value = value

    def __hash__(self):
        _hash_calls.append(self.value)
        return self.value


class _Unhashable:
    __hash__ = None


def _hashes(x, v):
    out = [hash(_Hashed(v)), hash(_Hashed(-1)), hash(_Hashed(2**70))]
    try:
        hash(_Unhashable())
    except TypeError as exc:
        out.append(str(exc))
    return x + 1, out


@pytest.mark.parametrize("v", [3, 2**65, -1])
def test_hash_runs_the_classs_own_hash_method_and_reduces_as_python(v):
    x = torch.ones(1)
    _hash_calls.clear()
    got = _compiled_eager(_hashes)(x, v)
    compiled_calls = list(_hash_calls)
    _hash_calls.clear()
    want = _hashes(x, v)
    assert torch.equal(got[0], want[0]) and got[1] == want[1]
    assert compiled_calls == _hash_calls
    report = sapwood_tracer.explain(_hashes)(x, v)
    assert not report.breaks, str(report)


def _text_of_loop_items(x):
    out = []
    for i in range(0, 30, 7):
        _same(format(i, "04d"), f"{i:04d}")  # (the break makes i symbolic)
        out.append((format(i, "x"), repr(i), str(i), f"{i:03d}", round(i, -1)))
    return x + 1, out


def test_the_text_of_a_symbolic_int_loop_item_is_its_value():
    x = torch.ones(1)
    got = _compiled_eager(_text_of_loop_items)(x)
    want = _text_of_loop_items(x)
    assert torch.equal(got[0], want[0]) and got[1] == want[1]
    report = sapwood_tracer.explain(_text_of_loop_items)(x)
    assert not report.eager_functions, str(report)
    assert all("symbolic" not in b.reason for b in report.breaks), str(report)


class _Plugin:
    pass


class _FirstPlugin(_Plugin):
    pass


def _plugins(x):
    return x + len(_Plugin.__subclasses__()), [c.__name__ for c in _Plugin.__subclasses__()]


def test_subclasses_are_the_live_ones_guarded_and_never_kept_alive():
    import gc
    import weakref

    compiled = _compiled_eager(_plugins)
    x = torch.zeros(1)
    assert compiled(x)[1] == _plugins(x)[1] == ["_FirstPlugin"]

    class _Late(_Plugin):
        pass

    late = weakref.ref(_Late)
    assert compiled(x)[1] == _plugins(x)[1] == ["_FirstPlugin", "_Late"]
    torch.testing.assert_close(compiled(x)[0], torch.full((1,), 2.0))
    del _Late
    gc.collect()
    assert late() is None  # the entry that read it did not keep it alive
    assert compiled(x)[1] == ["_FirstPlugin"]


class _DuckMeta(type):
    """A metaclass deciding isinstance in Python, deferring to type's check first."""

    def __instancecheck__(cls, inst):
        if super().__instancecheck__(inst):
            return True
        return getattr(inst, "quacks", False)


class _Bird(metaclass=_DuckMeta):
    pass


class _Duck:
    quacks = True


def _is_bird(x, obj):
    return x + (1 if isinstance(obj, _Bird) else 0)


def test_a_metaclass_instancecheck_written_in_python_is_inlined_and_guarded():
    compiled = _compiled_eager(_is_bird)
    x = torch.zeros(1)
    for obj in (_Bird(), _Duck(), object(), 3, _Bird(), _Duck()):
        torch.testing.assert_close(compiled(x, obj), _is_bird(x, obj))
    duck = _Duck()
    duck.quacks = False  # what the hook read is guarded
    torch.testing.assert_close(compiled(x, duck), _is_bird(x, duck))
    report = sapwood_tracer.explain(_is_bird)(x, _Duck())
    assert not report.breaks, str(report)
