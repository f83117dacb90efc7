"""Guards, each kind both ways: changing a guarded thing recompiles (and stays right);
changing something unguarded never changes the result."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import RecompileLimitWarning

X = torch.randn(3, 4)
SCALE = 2.0
UNUSED = 1


def _run(fn, backend, *args):
    compiled = sapwood_tracer.compile(fn, backend=backend)
    return compiled, compiled(*args)


def _scaled(x):
    return x * SCALE


def test_tensor_values_are_not_guarded(backend, same):
    compiled, _ = _run(lambda x: x * 2, backend, X)
    other = torch.randn(3, 4)
    same(compiled(other), other * 2)
    assert backend.count == 1


@pytest.mark.parametrize(
    "changed",
    [
        torch.randn(3, 4, dtype=torch.float64),
        torch.randn(5, 4),
        torch.randn(4, 3).t(),
        torch.randn(3, 4, requires_grad=True),
        torch.nn.Parameter(torch.randn(3, 4)),
        torch.randn(3, 4, dtype=torch.complex64).conj(),
    ],
    ids=["dtype", "shape", "stride", "requires_grad", "type", "dispatch_keys"],
)
def test_tensor_properties_are_guarded(backend, same, changed):
    fn = lambda x: x * 2  # noqa: E731
    compiled, _ = _run(
        fn, backend, X if not changed.is_complex() else torch.randn(3, 4, dtype=torch.complex64)
    )
    same(compiled(changed), fn(changed))
    assert backend.count == 2


@pytest.mark.parametrize(
    "first,second", [(1, 2), (True, False), ("a", "b"), (1.5, 2.5), (None, 3), (1, 1.0), (1, True)]
)
def test_python_constants_are_guarded(backend, same, first, second):
    def fn(x, c):
        return x * 2 if c is None else (x, c, type(c).__name__)

    compiled, _ = _run(fn, backend, X, first)
    same(compiled(X, second), fn(X, second))
    same(compiled(X, first), fn(X, first))
    assert backend.count == 2


def test_globals_read_are_guarded(backend, same):
    global SCALE
    compiled, _ = _run(_scaled, backend, X)
    try:
        SCALE = 3.0
        same(compiled(X), X * 3.0)
    finally:
        SCALE = 2.0
    assert backend.count == 2


def test_globals_not_read_are_not_guarded(backend):
    global UNUSED
    compiled, _ = _run(_scaled, backend, X)
    try:
        UNUSED = 2
        compiled(X)
    finally:
        UNUSED = 1
    assert backend.count == 1


def test_closure_cells_read_are_guarded(backend, same):
    factor = 2.0

    def fn(x):
        return x * factor

    compiled, _ = _run(fn, backend, X)
    factor = 5.0
    same(compiled(X), X * 5.0)
    assert backend.count == 2


def test_functions_called_are_guarded_by_identity(backend, same):
    holder = {"f": lambda t: t + 1}

    def fn(x, h):
        return h["f"](x)

    compiled, _ = _run(fn, backend, X, holder)
    holder["f"] = lambda t: t - 1
    same(compiled(X, holder), X - 1)
    assert backend.count == 2


def test_modules_are_guarded_by_structure_not_identity(backend, same):
    a, b = torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)
    wider = torch.nn.Linear(4, 3)

    def fn(m, x):
        return m(x)

    compiled, _ = _run(fn, backend, a, X)
    same(compiled(b, X), b(X))  # other weights, same structure: the same trace
    same(compiled(a, X), a(X))
    assert backend.count == 1
    same(compiled(wider, X), wider(X))  # another weight shape: a new trace
    assert backend.count == 2


def test_object_types_are_guarded(backend, same):
    class A:
        def value(self):
            return 1

    class B:
        def value(self):
            return 2

    def fn(o, x):
        return x * o.value()

    compiled, _ = _run(fn, backend, A(), X)
    same(compiled(B(), X), X * 2)
    assert backend.count == 2


def test_object_attributes_read_are_guarded_and_others_not(backend, same):
    class Cfg:
        pass

    cfg = Cfg()
    cfg.scale = 2
    cfg.name = "unused"

    def fn(c, x):
        return x * c.scale

    compiled, _ = _run(fn, backend, cfg, X)
    cfg.name = "changed"
    compiled(cfg, X)
    assert backend.count == 1
    cfg.scale = 3
    same(compiled(cfg, X), X * 3)
    assert backend.count == 2


def test_method_replaced_on_the_instance_is_seen(backend, same):
    class A:
        def value(self):
            return 1

    a = A()

    def fn(o, x):
        return x * o.value()

    compiled, _ = _run(fn, backend, a, X)
    a.value = lambda: 5
    same(compiled(a, X), X * 5)


def test_class_attribute_changes_are_seen(backend, same):
    class A:
        k = 1

    a = A()

    def fn(o, x):
        return x * o.k

    compiled, _ = _run(fn, backend, a, X)
    A.k = 4
    same(compiled(a, X), X * 4)


def test_container_lengths_and_dict_keys_are_guarded(backend, same):
    def fn(xs, d):
        return [t + 1 for t in xs], {k: v * 2 for k, v in d.items()}

    compiled, _ = _run(fn, backend, [X], {"a": X})
    same(compiled([X, X], {"a": X}), fn([X, X], {"a": X}))
    same(compiled([X], {"b": X}), fn([X], {"b": X}))
    same(compiled([X], {"a": X}), fn([X], {"a": X}))
    assert backend.count == 3


def test_default_arguments_are_guarded(backend, same):
    def fn(x, k=2):
        return x * k

    compiled, _ = _run(fn, backend, X)
    same(compiled(X, 3), X * 3)
    assert backend.count == 2


def test_aliased_inputs_get_their_own_entry(backend, same):
    def fn(x, y):
        x.add_(1)
        return x + y

    a, b = torch.zeros(3), torch.zeros(3)
    compiled = sapwood_tracer.compile(fn, backend=backend)
    same(compiled(a, b), torch.ones(3))
    c = torch.zeros(3)
    same(compiled(c, c), torch.full((3,), 2.0))
    assert backend.count == 2


def test_shadowing_a_builtin_is_seen(backend, same):
    namespace = {"torch": torch}
    exec("def fn(x):\n    return x * len([1, 2])\n", namespace)
    fn = namespace["fn"]
    compiled, _ = _run(fn, backend, X)
    namespace["len"] = lambda v: 10
    same(compiled(X), X * 10)
    assert backend.count == 2


def test_default_dtype_is_guarded(backend, same):
    def fn(x):
        return x + torch.ones(4)

    compiled, _ = _run(fn, backend, X)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        same(compiled(X), fn(X))
    finally:
        torch.set_default_dtype(old)
    assert backend.count == 2


def test_deterministic_algorithms_are_guarded_by_every_entry(backend, same):
    # (a backend compiles for the setting, Inductor picks its kernels by it: an entry made
    # before ``use_deterministic_algorithms(True)`` must not serve the calls after it)
    def fn(x):
        return x * 2

    compiled, _ = _run(fn, backend, X)
    torch.use_deterministic_algorithms(True)
    try:
        same(compiled(X), fn(X))
    finally:
        torch.use_deterministic_algorithms(False)
    same(compiled(X), fn(X))
    assert backend.count == 2


def test_torch_global_state_is_one_check_that_names_what_changed(backend, same, caplog):
    # (the thread count, as torch.compile checks it: a compiled CPU kernel fixes its threads)
    def fn(x):
        return x * 3

    compiled, _ = _run(fn, backend, X)
    threads = torch.get_num_threads()
    torch.set_num_threads(1 if threads != 1 else 2)
    try:
        same(compiled(X), fn(X))
    finally:
        torch.set_num_threads(threads)
    same(compiled(X), fn(X))
    assert backend.count == 2
    sapwood_tracer.set_logs(recompiles=True)
    try:
        with caplog.at_level(logging.INFO, logger="sapwood"), torch.no_grad():
            same(compiled(X), fn(X))
    finally:
        sapwood_tracer.set_logs()
    assert "seen: 'grad_mode'" in caplog.text


@pytest.mark.parametrize(
    "query",
    [
        lambda: torch.get_autocast_dtype("cpu"),
        lambda: torch.get_autocast_cpu_dtype(),
    ],
)
def test_the_autocast_dtype_read_in_the_trace_is_guarded(backend, same, query):
    def fn(x):
        return x.to(query())

    compiled = sapwood_tracer.compile(fn, backend=backend)
    old = torch.get_autocast_dtype("cpu")
    try:
        for dtype in (torch.bfloat16, torch.float16, torch.bfloat16):
            torch.set_autocast_dtype("cpu", dtype)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # (the deprecated form's)
                assert compiled(X).dtype == dtype
                same(compiled(X), fn(X))
    finally:
        torch.set_autocast_dtype("cpu", old)
    assert backend.count == 2


def test_torch_settings_read_in_the_trace_are_guarded(backend, same):
    def fn(x):
        if torch.are_deterministic_algorithms_enabled():
            return x + 1
        if not torch._C._get_cudnn_enabled() or torch.jit.is_tracing():
            return x + 2
        return x - 1

    compiled = sapwood_tracer.compile(fn, backend=backend, fullgraph=True)
    cudnn = torch.backends.cudnn.enabled
    try:
        same(compiled(X), fn(X))
        torch.use_deterministic_algorithms(True)
        same(compiled(X), fn(X))
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.enabled = not cudnn
        same(compiled(X), fn(X))
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.enabled = cudnn
    assert backend.count == 3


def test_recompile_limit_falls_back_to_eager_with_one_warning(backend, same):
    def fn(x, n):
        return x * n

    # dynamic=False: with the default policy, n would become symbolic on the second call
    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(12):
            same(compiled(X, n), X * n)
    assert backend.count == 8
    limit = [w for w in caught if issubclass(w.category, RecompileLimitWarning)]
    assert len(limit) == 1
    assert "L['n'] == " in str(limit[0].message)
    assert limit[0].filename == __file__  # the user's line, not sapwood's


@pytest.mark.parametrize("name", ["recompile_limit", "cache_size_limit"])
def test_torchs_recompile_limit_is_obeyed_where_the_user_set_it(backend, same, name):
    import torch._dynamo.config as dynamo_config

    def fn(x, n):
        return x * n

    compiled = sapwood_tracer.compile(fn, backend=backend, dynamic=False)
    old = dynamo_config.recompile_limit
    setattr(dynamo_config, name, 2)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for n in range(5):
                same(compiled(X, n), X * n)
    finally:
        dynamo_config.recompile_limit = old
    assert backend.count == 2
    limit = [w for w in caught if issubclass(w.category, RecompileLimitWarning)]
    assert len(limit) == 1 and "recompile limit (2 variants)" in str(limit[0].message)


def test_guard_source_never_contains_user_strings(backend):
    from sapwood_tracer.api import cache as _cache

    evil = "x') or __import__('os').system('echo pwned') or ('"

    class Obj:
        pass

    obj = Obj()
    setattr(obj, evil, 3)
    data = {evil: 2}

    def fn(o, d, x):
        return x * getattr(o, evil) * d[evil]

    compiled = sapwood_tracer.compile(fn, backend=backend)
    torch.testing.assert_close(compiled(obj, data, X), X * 6)
    (entry,) = next(iter(_cache._caches.values())).entries
    assert "pwned" not in entry.fn.__sapwood_source__
    setattr(obj, evil, 4)
    torch.testing.assert_close(compiled(obj, data, X), X * 8)


def test_library_flags_read_are_guarded(backend, same):
    def fn(x):
        return x * 2 if torch.backends.cudnn.enabled else x

    compiled, _ = _run(fn, backend, X)
    with torch.backends.cudnn.flags(enabled=not torch.backends.cudnn.enabled):
        same(compiled(X), fn(X))
    assert backend.count == 2


def test_attributes_found_missing_are_guarded(backend, same):
    class Cfg:
        pass

    cfg = Cfg()
    module = torch.nn.Linear(4, 4)

    def fn(c, m, x):
        a = getattr(c, "scale", 1.0)
        b = 2.0 if hasattr(m, "extra") else 1.0
        return x * a * b

    compiled, _ = _run(fn, backend, cfg, module, X)
    cfg.scale = 3.0
    same(compiled(cfg, module, X), X * 3.0)
    module.extra = True
    same(compiled(cfg, module, X), X * 6.0)
    assert backend.count == 3


class _Settings:
    def __init__(self):
        self.flag = True
        self.scale = 1
        self.shift = 0.0
        self.unused = "x"
        self.mode = "add"


def _configured(s, x, xs):
    y = x * s.scale if s.flag else x - s.shift
    if s.mode == "add":
        y = y + len(xs)
    else:
        y = y * xs[0]
    return y


def _mutation_strategy():
    from hypothesis import strategies as st

    return st.lists(
        st.one_of(
            st.tuples(st.just("flag"), st.booleans()),
            st.tuples(st.just("scale"), st.integers(-2, 3)),
            st.tuples(st.just("shift"), st.sampled_from([0.0, 0.5, -1.0])),
            st.tuples(st.just("unused"), st.text(max_size=2)),
            st.tuples(st.just("mode"), st.sampled_from(["add", "mul"])),
            st.tuples(st.just("xs"), st.integers(1, 3)),
            st.tuples(st.just("dtype"), st.sampled_from([torch.float32, torch.float64])),
        ),
        max_size=12,
    )


def test_any_sequence_of_input_changes_keeps_results_equal_to_eager():
    from hypothesis import given

    @given(_mutation_strategy())
    def run(mutations):
        sapwood_tracer.reset()
        compiled = sapwood_tracer.compile(_configured, backend=lambda gm, ex: gm.forward)
        settings = _Settings()
        n, dtype = 1, torch.float32
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RecompileLimitWarning)
            for field, value in [("unused", "x"), *mutations]:
                if field == "xs":
                    n = value
                elif field == "dtype":
                    dtype = value
                else:
                    setattr(settings, field, value)
                x = torch.ones(2, dtype=dtype)
                xs = [torch.full((2,), 2.0, dtype=dtype)] * n
                torch.testing.assert_close(compiled(settings, x, xs), _configured(settings, x, xs))

    run()


@pytest.mark.parametrize(
    "first,second",
    [(0.0, -0.0), (-0.0, 0.0), (float("nan"), float("nan")), ((1, 0.0), (1, -0.0))],
)
def test_float_guards_tell_signed_zeros_apart_and_accept_nan(backend, first, second):
    import math

    def fn(x, c):
        return x * 2, str(c)

    compiled = sapwood_tracer.compile(fn, backend=backend)
    assert compiled(X, first)[1] == str(first)
    assert compiled(X, second)[1] == str(second)
    expected = 1 if isinstance(first, float) and math.isnan(first) else 2
    assert backend.count == expected


def test_zero_attribute_of_a_module_is_guarded_by_sign_and_type(backend):
    # a dropout-like ``p = 0.0`` read through the module: -0.0 and 0 are other constants
    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = 0.0

        def forward(self, x):
            return x * 2, str(self.p)

    m = Scale()
    compiled = sapwood_tracer.compile(m, backend=backend)
    for p, count in ((0.0, 1), (0.0, 1), (-0.0, 2), (0, 3), (0.0, 3)):
        m.p = p
        assert compiled(X)[1] == str(p)
        assert backend.count == count


def test_instance_attribute_shadowing_a_class_attribute_is_seen(backend, same):
    class A:
        k = 1

    a = A()

    def fn(o, x):
        return x * o.k

    compiled, _ = _run(fn, backend, a, X)
    a.k = 7
    same(compiled(a, X), X * 7)
    assert backend.count == 2


def test_subclass_overriding_a_method_later_is_seen(backend, same):
    class Base:
        def value(self):
            return 1

    class Child(Base):
        pass

    c = Child()

    def fn(o, x):
        return x * o.value()

    compiled, _ = _run(fn, backend, c, X)
    Child.value = lambda self: 9
    same(compiled(c, X), X * 9)
