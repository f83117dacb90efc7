"""The runtime on a real CUDA device: the scenarios of torch's own tree tests, and beyond.

Every test compares with eager PyTorch. They run on the GPU machine (``nox -s gpu``).
"""

from __future__ import annotations

import gc
import warnings

import pytest
import torch

import sapwood_cudagraph_trees as trees
from sapwood_cudagraph_trees import _api
from sapwood_cudagraph_trees._checkpoint import sync_allocator

pytestmark = pytest.mark.gpu
DEV = "cuda"


def wrap(fn, example, static=(), mode="inference", **kw):
    return trees.cudagraphify(fn, example, static, device_index=0, mode=mode, **kw)


def info_of(name):
    (info,) = [f for f in trees.tree_info(0).functions if f.name == name]
    return info


def pointwise(xs):
    return [(xs[0] * 2).sin() + 1]


def rand(n=16):
    return torch.randn(n, device=DEV)


def run_three(f, make):
    """Warm-up, record, replay; returns the replay's outputs and inputs."""
    for _ in range(2):
        f(make())
    args = make()
    return f(args), args


# ---------------------------------------------------------------- basic life cycle
def test_simple_run_warms_up_records_and_replays(cuda):
    f = wrap(pointwise, [rand()], name="simple")
    for _ in range(5):
        x = rand()
        torch.testing.assert_close(f([x])[0], pointwise([x])[0])
    info = info_of("simple")
    assert (info.warmups, info.recordings, info.replays) == (1, 1, 3)


def test_outputs_are_new_tensors_over_the_same_static_memory(cuda):
    f = wrap(pointwise, [rand()])
    run_three(f, lambda: [rand()])
    a = f([rand()])[0]
    ptr = a.data_ptr()
    del a
    b = f([rand()])[0]
    assert b.data_ptr() == ptr


def test_rng_in_a_graph_gives_fresh_numbers_each_replay(cuda):
    def noisy(xs):
        return [xs[0] + torch.rand(64, device=DEV)]

    f = wrap(noisy, [torch.zeros(64, device=DEV)])
    outs = [f([torch.zeros(64, device=DEV)])[0].clone() for _ in range(5)]
    assert not torch.equal(outs[3], outs[4])
    assert all(((o >= 0) & (o < 1)).all() for o in outs)


def test_graph_without_rng_leaves_the_generator_alone(cuda):
    f = wrap(pointwise, [rand()])
    run_three(f, lambda: [rand()])
    x = rand()
    torch.manual_seed(3)
    expected = torch.rand(8, device=DEV)
    torch.manual_seed(3)
    f([x])
    assert torch.equal(torch.rand(8, device=DEV), expected)


def test_model_that_empties_its_argument_list_like_inductor(cuda):
    def boxed(args):
        x = args[0]
        args.clear()
        return [x.view(4, 4), x * 2]

    f = wrap(boxed, [rand()])
    for _ in range(4):
        x = rand()
        outs = f([x])
        assert outs[0].data_ptr() == x.data_ptr()
        torch.testing.assert_close(outs[1], x * 2)


# ---------------------------------------------------------------- mutation
def test_reinplaced_mutation_of_an_intermediate_is_graphed(cuda):
    def inner(xs):
        y = xs[0] * 2
        y.add_(1)
        return [y]

    f = wrap(inner, [rand()], name="reinplace")
    out, (x,) = run_three(f, lambda: [rand()])
    torch.testing.assert_close(out[0], x * 2 + 1)
    assert info_of("reinplace").replays == 1


def test_mutated_input_runs_eagerly_and_warns_once(cuda):
    def bump(xs):
        xs[0].add_(1)
        return [xs[0] * 1]

    f = wrap(bump, [rand()], mutated_input_idxs=(0,), name="mut")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.zeros(16, device=DEV)
            torch.testing.assert_close(f([x])[0], torch.ones(16, device=DEV))
            torch.testing.assert_close(x, torch.ones(16, device=DEV))
    assert sum("mutates input 0" in str(w.message) for w in caught) == 1


def test_mutation_of_a_tree_managed_tensor_stays_correct(cuda):
    def produce(xs):
        return [xs[0] + 1]

    def bump(xs):
        xs[0].mul_(2)
        return [xs[0] + 0]

    p = wrap(produce, [rand()])
    b = wrap(bump, [rand()], mutated_input_idxs=(0,), name="bump_managed")
    for _ in range(3):
        x = rand()
        y = p([x])
        z = b(y)
        torch.testing.assert_close(y[0], (x + 1) * 2)
        torch.testing.assert_close(z[0], (x + 1) * 2)
    assert "mutated" in next(iter(info_of("bump_managed").fallbacks))


def test_mutated_static_input_is_graphed(cuda):
    buf = torch.zeros(16, device=DEV)

    def accumulate(xs):
        xs[0].add_(xs[1])
        return [xs[0] * 1]

    f = wrap(accumulate, [buf, rand()], static=(0,), mutated_input_idxs=(0,), name="acc")
    for _ in range(4):
        f([buf, torch.ones(16, device=DEV)])
    torch.testing.assert_close(buf, torch.full((16,), 4.0, device=DEV))
    assert info_of("acc").replays == 2


# ---------------------------------------------------------------- fallbacks
def test_inputs_on_several_devices_run_eagerly_with_a_message(cuda):
    def mix(xs):
        return [xs[0] + xs[1].to(DEV)]

    f = wrap(mix, [rand(), torch.ones(16)], name="mix")
    x, c = rand(), torch.ones(16)
    torch.testing.assert_close(f([x, c])[0], x + 1)
    (reason,) = info_of("mix").fallbacks
    assert "several devices" in reason


def test_sparse_input_runs_eagerly(cuda):
    def densify(xs):
        return [xs[0].to_dense() * 2]

    f = wrap(densify, [rand()], name="sparse")
    x = rand().to_sparse()
    torch.testing.assert_close(f([x])[0], x.to_dense() * 2)
    assert "sparse" in next(iter(info_of("sparse").fallbacks))


# ---------------------------------------------------------------- keys and recordings
def test_each_shape_gets_its_own_recording(cuda):
    f = wrap(pointwise, [rand()], name="shapes")
    for n in (8, 8, 8, 32, 32, 32, 8):
        x = rand(n)
        torch.testing.assert_close(f([x])[0], pointwise([x])[0])
    info = info_of("shapes")
    assert info.recordings == 2 and info.replays == 3


def test_function_wrapped_several_times_shares_the_pool(cuda):
    f1 = wrap(pointwise, [rand()], name="first")
    f2 = wrap(pointwise, [rand()], name="second")
    for _ in range(3):
        x = rand()
        torch.testing.assert_close(f1([x])[0], f2([x])[0])
    assert info_of("first").replays == 1 and info_of("second").replays == 1


def test_accumulating_several_recordings_keeps_every_output(cuda):
    f = wrap(pointwise, [rand()], name="accum")
    kept = []
    for n in (4, 4, 8, 8, 16, 16, 4, 8, 16):
        x = rand(n)
        kept.append((f([x])[0], pointwise([x])[0]))
    for out, exp in kept:
        torch.testing.assert_close(out, exp)


def test_recording_cap_evicts_least_recently_used(cuda):
    f = wrap(pointwise, [rand()], name="capped", max_recordings=2)
    for n in (4, 4, 8, 8, 16, 16, 4, 4):
        x = rand(n)
        torch.testing.assert_close(f([x])[0], pointwise([x])[0])
    info = info_of("capped")
    assert info.live_recordings == 2 and info.evictions >= 1


# ---------------------------------------------------------------- tree paths
def test_ending_a_path_early_then_starting_at_the_root(cuda):
    def a_fn(xs):
        return [xs[0] + 1]

    def b_fn(xs):
        return [xs[0] * 3]

    a, b = wrap(a_fn, [rand()]), wrap(b_fn, [rand()])
    for _ in range(3):
        trees.new_generation()
        b(a([rand()]))
    for _ in range(3):  # the path ends after a: b is never called
        trees.new_generation()
        x = rand()
        torch.testing.assert_close(a([x])[0], x + 1)
    assert info_of("a_fn").recordings == 1


def test_recording_after_a_replay_restores_the_checkpoint(cuda):
    def a_fn(xs):
        return [xs[0] + 1]

    def b_fn(xs):
        return [xs[0] * torch.ones(1024, device=DEV)]

    a, b = wrap(a_fn, [rand(1)]), wrap(b_fn, [rand(1)])
    for _ in range(3):
        a([rand(1)])
    restores = trees.tree_info(0).checkpoint_restores
    for _ in range(3):
        x = rand(1)
        y = a([x])
        torch.testing.assert_close(b(y)[0], (x + 1) * torch.ones(1024, device=DEV))
    assert trees.tree_info(0).checkpoint_restores > restores


def test_live_outputs_across_several_graphs_stay_valid(cuda):
    fns = [lambda xs, k=k: [xs[0] * k + 1] for k in range(1, 5)]
    wrapped = [wrap(fn, [rand()], name=f"chain{k}") for k, fn in enumerate(fns)]
    for _ in range(3):
        x = rand()
        outs, expected, cur, ecur = [], [], [x], x
        for w, k in zip(wrapped, range(1, 5)):
            cur = w(cur)
            ecur = ecur * k + 1
            outs.append(cur[0])
            expected.append(ecur)
        for o, e in zip(outs, expected):
            torch.testing.assert_close(o, e)


def test_tensor_dying_between_checkpoints_is_reused_without_leaks(cuda):
    def two(xs):
        return [xs[0] + 1, xs[0] * 2]

    def consume(xs):
        return [xs[0] - 1]

    a, c = wrap(two, [rand()]), wrap(consume, [rand()])
    for _ in range(4):
        x = rand()
        y0, y1 = a([x])
        del y0
        torch.testing.assert_close(c([y1])[0], x * 2 - 1)
        del y1
    runtime = _api._runtimes[0]
    gc.collect()
    sync_allocator(runtime.layer, runtime.pool, runtime.live)
    assert runtime.layer.live_blocks() == {e.ptr for e in runtime.live}


def test_aliased_outputs_share_one_storage_and_one_weakref(cuda):
    def views(xs):
        y = xs[0] + 1
        return [y, y.view(4, 4), y[2:]]

    f = wrap(views, [rand()])
    run_three(f, lambda: [rand()])
    x = rand()
    outs = f([x])
    assert len({o.untyped_storage().data_ptr() for o in outs}) == 1
    keep = outs[2]
    del outs
    for _ in range(3):
        f([rand()])
    torch.testing.assert_close(keep, (x + 1)[2:])


def test_output_aliasing_a_static_input(cuda):
    w = rand()

    def slice_param(xs):
        return [xs[0][1:], xs[0] + xs[1]]

    f = wrap(slice_param, [w, rand()], static=(0,))
    outs, _ = run_three(f, lambda: [w, rand()])
    assert outs[0].data_ptr() == w[1:].data_ptr()
    w.add_(1)
    torch.testing.assert_close(outs[0], w[1:])


def test_output_aliasing_a_copied_input_views_the_callers_tensor(cuda):
    def view_input(xs):
        return [xs[0].view(4, 4), xs[0] * 2]

    f = wrap(view_input, [rand()])
    outs, (x,) = run_three(f, lambda: [rand()])
    assert outs[0].data_ptr() == x.data_ptr()


def test_unaligned_static_input(cuda):
    base = torch.randn(17, device=DEV)
    w = base[1:]

    def affine(xs):
        return [xs[0] * xs[1] + 1]

    f = wrap(affine, [w, rand()], static=(0,))
    outs, (_, x) = run_three(f, lambda: [w, rand()])
    torch.testing.assert_close(outs[0], w * x + 1)


def test_expanded_stride_zero_input(cuda):
    def total(xs):
        return [xs[0] * 2.0]

    f = wrap(total, [rand(4).expand(8, 4)])
    for _ in range(3):
        x = rand(4).expand(8, 4)
        torch.testing.assert_close(f([x])[0], x * 2.0)


def test_constant_outputs_come_back_as_the_same_object(cuda):
    const = torch.arange(4.0, device=DEV)

    def with_const(xs):
        return [xs[0] + 1, const]

    f = wrap(with_const, [rand()], constants=[const])
    outs, _ = run_three(f, lambda: [rand()])
    assert outs[1] is const


# ---------------------------------------------------------------- stale outputs
def test_reading_an_output_overwritten_after_mark_step_begin_raises(cuda):
    f = wrap(pointwise, [rand()], stack_traces=["model.py:7 in forward"], name="stale")
    run_three(f, lambda: [rand()])
    old = f([rand()])[0]
    trees.mark_step_begin()
    f([rand()])
    with pytest.raises(RuntimeError, match=r"'stale'.*\n(.|\n)*model.py:7 in forward"):
        (old + 1).cpu()


def test_reset_leaves_no_live_block_in_the_pool(cuda):
    f = wrap(pointwise, [rand()])
    kept = [f([rand()])[0] for _ in range(5)]
    runtime = _api._runtimes[0]
    assert runtime.layer.live_blocks()
    trees.reset()
    assert runtime.blocks_left_at_reset == 0
    assert len(kept) == 5


# ---------------------------------------------------------------- training
def _training_pair(name="train"):
    def fwd(xs):
        x, w = xs
        a = x * w
        return [a.sin(), a.cos()]

    def bwd(xs):
        saved_cos, w, grad = xs
        return [grad * saved_cos * w]

    w = torch.randn(16, device=DEV)
    f = wrap(fwd, [rand(), w], static=(1,), mode="forward", name=f"{name}_fwd")
    b = wrap(bwd, [rand(), w, rand()], static=(1,), mode="backward", name=f"{name}_bwd")

    class Op(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out, saved = f([x, w])
            ctx.save_for_backward(saved)
            return out

        @staticmethod
        def backward(ctx, grad):
            (saved,) = ctx.saved_tensors
            return b([saved, w, grad.contiguous()])[0]

    return Op, w


def test_backward_gets_cached_graphs(cuda):
    op, w = _training_pair()
    for _ in range(5):
        x = rand().requires_grad_()
        op.apply(x).sum().backward()
        torch.testing.assert_close(x.grad, (x * w).cos() * w)
    assert info_of("train_bwd").replays >= 2 and info_of("train_fwd").replays >= 2


def test_forward_with_a_non_graphed_backward(cuda):
    def fwd(xs):
        a = xs[0] * 3
        return [a.exp(), a.exp()]

    f = wrap(fwd, [rand()], mode="forward")

    class Op(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out, saved = f([x])
            ctx.save_for_backward(saved)
            return out

        @staticmethod
        def backward(ctx, grad):
            (saved,) = ctx.saved_tensors
            return grad * saved * 3

    for _ in range(4):
        x = rand().requires_grad_()
        Op.apply(x).sum().backward()
        torch.testing.assert_close(x.grad, (x * 3).exp() * 3)


def test_cached_forward_with_a_missed_backward(cuda):
    op, w = _training_pair("missed")
    for _ in range(4):
        x = rand().requires_grad_()
        op.apply(x)  # backward never runs; the graph of autograd dies here
    x = rand().requires_grad_()
    op.apply(x).sum().backward()
    torch.testing.assert_close(x.grad, (x * w).cos() * w)


def test_forward_called_twice_before_any_backward(cuda):
    op, w = _training_pair("twice")
    for _ in range(3):
        x1, x2 = rand().requires_grad_(), rand().requires_grad_()
        y1, y2 = op.apply(x1), op.apply(x2)
        (y1.sum() + y2.sum()).backward()
        torch.testing.assert_close(x1.grad, (x1 * w).cos() * w)
        torch.testing.assert_close(x2.grad, (x2 * w).cos() * w)


def test_saved_activations_survive_mark_step_begin_until_backward(cuda):
    op, w = _training_pair("stepped")
    for _ in range(3):
        x = rand().requires_grad_()
        y = op.apply(x)
        trees.mark_step_begin()
        pointwise_fn = wrap(pointwise, [rand()])
        pointwise_fn([rand()])
        y.sum().backward()
        torch.testing.assert_close(x.grad, (x * w).cos() * w)


# ---------------------------------------------------------------- beyond the reference
def test_composition_of_separately_wrapped_functions(cuda):
    def g_fn(xs):
        return [xs[0].cos() * 3]

    f, g = wrap(pointwise, [rand()]), wrap(g_fn, [rand()])
    for _ in range(5):
        x = rand()
        trees.new_generation()
        y = f([x])
        trees.new_generation()
        z = g(y)
        torch.testing.assert_close(z[0], g_fn(pointwise([x]))[0])
        torch.testing.assert_close(y[0], pointwise([x])[0])


def test_calling_again_with_earlier_outputs_referenced_needs_no_step_marks(cuda):
    f = wrap(pointwise, [rand(4096)], name="again")
    out = None
    reserved = []
    for i in range(40):
        trees.new_generation()
        x = rand(4096)
        out = f([x])
        torch.testing.assert_close(out[0], pointwise([x])[0])
        if i >= 10:
            reserved.append(trees.tree_info(0).pool_reserved_bytes)
    assert info_of("again").recordings <= 4
    assert max(reserved) == min(reserved)


def test_inference_and_training_functions_of_two_models_mixed(cuda):
    op, w = _training_pair("mixed")

    def infer(xs):
        return [xs[0].tanh() * 5]

    g = wrap(infer, [rand()], name="mixed_infer")
    for _ in range(4):
        trees.new_generation()
        x = rand().requires_grad_()
        y = op.apply(x)
        trees.new_generation()
        z = g([rand()])
        trees.new_generation()
        q = rand()
        zq = g([q])
        y.sum().backward()
        torch.testing.assert_close(x.grad, (x * w).cos() * w)
        torch.testing.assert_close(zq[0], q.tanh() * 5)
        assert z[0].isfinite().all()


def test_two_branches_cost_the_larger_branch_not_the_sum(cuda):
    n = 1 << 20

    def a_fn(xs):
        return [xs[0] + 1]

    def b_fn(xs):
        return [(xs[0] * 2).exp()]

    def b2_fn(xs):
        return [(xs[0] * 3).exp()]

    a, b, b2 = (wrap(fn, [rand(n)]) for fn in (a_fn, b_fn, b2_fn))
    x = rand(n)
    for _ in range(3):
        trees.new_generation()
        b(a([x]))
    after_ab = trees.tree_info(0).pool_reserved_bytes
    for _ in range(3):
        trees.new_generation()
        torch.testing.assert_close(b2(a([x]))[0], ((x + 1) * 3).exp())
    after_abb = trees.tree_info(0).pool_reserved_bytes
    assert after_abb == after_ab


# ---------------------------------------------------------------- host scalars, odd outputs
def test_cpu_scalar_input_is_graphed_and_keyed_by_value(cuda):
    def scale(xs):
        return [xs[0] * xs[1]]

    f = wrap(scale, [rand(), torch.tensor(2.0)], name="host")
    for value in (2.0, 2.0, 2.0, 3.0, 3.0, 2.0):
        x = rand()
        torch.testing.assert_close(f([x, torch.tensor(value)])[0], x * value)
    info = info_of("host")
    assert not info.fallbacks
    assert info.recordings == 2 and info.replays >= 2


def test_cpu_scalar_changing_every_call_ends_eager_with_a_reason(cuda):
    def scale(xs):
        return [xs[0] * xs[1]]

    f = wrap(scale, [rand(), torch.tensor(0.0)], name="host_moving", max_static_rerecords=2)
    for step in range(8):
        x = rand()
        torch.testing.assert_close(f([x, torch.tensor(float(step))])[0], x * step)
    assert any("CPU scalar" in reason for reason in info_of("host_moving").fallbacks)


def test_sparse_output_runs_eagerly_with_a_reason(cuda):
    def sparse(xs):
        return [(xs[0] * 2).to_sparse()]

    f = wrap(sparse, [rand()], name="sparse_out")
    for _ in range(4):
        x = rand()
        torch.testing.assert_close(f([x])[0].to_dense(), x * 2)
    assert any("sparse" in reason for reason in info_of("sparse_out").fallbacks)


def test_no_live_pool_block_once_every_output_died(cuda):
    f = wrap(pointwise, [rand()], name="dying")
    for n in (8, 16, 32, 64):
        for _ in range(3):
            y = f([rand(n)])
        torch.testing.assert_close(y[0].isfinite().all(), torch.tensor(True, device=DEV))
        del y
    gc.collect()
    runtime = _api._runtimes[0]
    sync_allocator(runtime.layer, runtime.pool, runtime.live)
    assert runtime.live.count_alive() == 0
    assert trees.tree_info(0).live_outputs == 0
    assert not runtime.layer.live_blocks()
