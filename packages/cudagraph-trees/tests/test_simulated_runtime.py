"""The tree logic on the simulated device: what a call does, when, and what it returns."""

from __future__ import annotations

import warnings
import weakref

import pytest
import torch

import sapwood_cudagraph_trees as trees
from sapwood_cudagraph_trees import _api, _runtime
from sapwood_cudagraph_trees._checkpoint import sync_allocator

SIM_INDEX = 7  # the index the ``sim`` fixture (conftest.py) installs the simulated layer at


def wrap(fn, example, static=(), mode="inference", **kw):
    return trees.cudagraphify(fn, example, static, device_index=SIM_INDEX, mode=mode, **kw)


def fn_info(name):
    (info,) = [f for f in trees.tree_info(SIM_INDEX).functions if f.name == name]
    return info


def pointwise(xs):
    (x,) = xs
    return [(x * 2).sin() + 1]


def test_first_call_warms_up_second_records_third_replays(sim):
    f = wrap(pointwise, [torch.ones(4)], name="pw")
    x = torch.randn(4)
    for expected in [(1, 0, 0), (1, 1, 0), (1, 1, 1)]:
        f([x])
        info = fn_info("pw")
        assert (info.warmups, info.recordings, info.replays) == expected


def test_warm_up_lets_a_boxed_model_free_each_input_when_done_with_it(sim):
    # Inductor's code clears its argument list and drops each input after its last use (a
    # backward's saved activations): the warm-up must hold no copy of the list, or every
    # input stays alive to the end and the first call's peak memory is that of all at once
    freed_after_last_use = []

    def boxed(args):
        x, w = args
        args.clear()
        seen = weakref.ref(x)
        y = x * 2
        del x
        freed_after_last_use.append(seen() is None)
        return [y + w]

    f = wrap(boxed, [torch.ones(4), torch.ones(4)], name="boxed")
    w = torch.randn(4)
    for _ in range(3):
        x = torch.randn(4)
        expected = x * 2 + w
        inputs = [x, w]
        del x
        (out,) = f(inputs)
        torch.testing.assert_close(out, expected)
        del out  # dead before the next call: that one may replay over it
    info = fn_info("boxed")
    assert (info.warmups, info.recordings, info.replays) == (1, 1, 1)
    assert freed_after_last_use[0] is True  # the warm-up (the recording copies its inputs)


def test_replayed_outputs_equal_eager(sim):
    f = wrap(pointwise, [torch.ones(4)])
    for _ in range(4):
        x = torch.randn(4)
        (out,) = f([x])
        torch.testing.assert_close(out, pointwise([x])[0])


def test_replay_returns_new_tensor_objects(sim):
    f = wrap(pointwise, [torch.ones(4)])
    x = torch.randn(4)
    f([x])
    f([x])
    a = f([x])[0]
    a_id = id(a)
    b = f([x])[0]
    assert id(b) != a_id or a is not b


def test_outputs_sharing_a_storage_share_it_after_replay(sim):
    def two_views(xs):
        y = xs[0] + 1
        return [y, y.view(2, 2), y[1:]]

    f = wrap(two_views, [torch.ones(4)])
    for _ in range(3):
        outs = f([torch.randn(4)])
    base = outs[0].untyped_storage().data_ptr()
    assert all(o.untyped_storage().data_ptr() == base for o in outs)
    assert outs[2].storage_offset() == 1


def test_output_that_views_an_input_aliases_the_callers_input(sim):
    def view_input(xs):
        return [xs[0].view(2, 2), xs[0] * 2]

    f = wrap(view_input, [torch.ones(4)])
    for _ in range(3):
        x = torch.randn(4)
        outs = f([x])
        assert outs[0].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        torch.testing.assert_close(outs[0], x.view(2, 2))


def test_output_aliasing_a_static_input_views_the_parameter(sim):
    w = torch.randn(3)

    def slice_param(xs):
        return [xs[0][1:], xs[1] + xs[0]]

    f = wrap(slice_param, [w, torch.ones(3)], static=(0,))
    for _ in range(3):
        outs = f([w, torch.randn(3)])
    assert outs[0].data_ptr() == w[1:].data_ptr()


def test_output_that_is_an_input_object_comes_back_as_the_callers_object(sim):
    w = torch.randn(3)

    def pass_through(xs):  # Inductor returns the parameters it saves for a backward like this
        return [xs[0], xs[1], xs[0] * xs[1]]

    f = wrap(pass_through, [w, torch.ones(3)], static=(0,))
    for _ in range(3):
        x = torch.randn(3)
        outs = f([w, x])
        assert outs[0] is w and outs[1] is x
        torch.testing.assert_close(outs[2], w * x)


def test_plain_values_come_back_from_a_replay(sim):
    def mixed(xs):  # a backward returns None for inputs that need no gradient
        return [xs[0] * 2, None, 7]

    f = wrap(mixed, [torch.ones(3)])
    for _ in range(3):
        x = torch.randn(3)
        outs = f([x])
        torch.testing.assert_close(outs[0], x * 2)
        assert outs[1] is None and outs[2] == 7
        del outs  # dead outputs let the next call replay
    assert fn_info("mixed").replays == 1


def test_model_that_empties_its_argument_list_like_inductor(sim):
    def boxed(args):
        x = args[0]
        args.clear()  # the boxed convention lets the callee take the list's references
        return [x.view(2, 2), x * 2]

    f = wrap(boxed, [torch.ones(4)])
    for _ in range(3):
        x = torch.randn(4)
        outs = f([x])
        assert outs[0].data_ptr() == x.data_ptr()
        torch.testing.assert_close(outs[1], x * 2)


def test_earlier_outputs_stay_valid_when_the_same_function_runs_again(sim):
    f = wrap(pointwise, [torch.ones(4)])
    xs = [torch.randn(4) for _ in range(6)]
    kept = [f([x])[0] for x in xs]
    for x, out in zip(xs, kept):
        torch.testing.assert_close(out, pointwise([x])[0])


def test_loop_with_previous_output_alive_settles_on_a_bounded_set_of_graphs(sim):
    f = wrap(pointwise, [torch.ones(4)], name="loop")
    out = None
    for _ in range(20):
        x = torch.randn(4)
        out = f([x])
        torch.testing.assert_close(out[0], pointwise([x])[0])
    info = fn_info("loop")
    assert info.recordings <= 4
    assert info.replays >= 14


def test_composition_of_separately_wrapped_functions(sim):
    def g_fn(xs):
        return [xs[0].cos() * 3]

    f = wrap(pointwise, [torch.ones(4)])
    g = wrap(g_fn, [torch.ones(4)])
    for _ in range(5):
        x = torch.randn(4)
        trees.new_generation()
        y = f([x])
        trees.new_generation()
        z = g(y)
        torch.testing.assert_close(z[0], g_fn(pointwise([x]))[0])
        torch.testing.assert_close(y[0], pointwise([x])[0])


def test_pool_input_is_read_in_place_not_copied(sim):
    def g_fn(xs):
        return [xs[0] + 1]

    f = wrap(pointwise, [torch.ones(4)])
    g = wrap(g_fn, [torch.ones(4)])
    for _ in range(3):
        g(f([torch.randn(4)]))
    (node,) = [n for n in _api._runtimes[SIM_INDEX].tree.nodes() if n.function_name == "g_fn"]
    assert node.copies == [] and len(node.address_checks) == 1


def test_sibling_recording_restores_the_parent_checkpoint(sim):
    def a_fn(xs):
        return [xs[0] + 1]

    def b_fn(xs):
        return [xs[0] * torch.ones(64)]

    def b2_fn(xs):
        return [xs[0] * torch.full((64,), 2.0)]

    a, b, b2 = (wrap(fn, [torch.ones(1)]) for fn in (a_fn, b_fn, b2_fn))
    x = torch.ones(1)
    for _ in range(3):
        b(a([x]))
    reserved_ab = sim.reserved_bytes()
    for _ in range(3):
        b2(a([x]))
    assert trees.tree_info(SIM_INDEX).checkpoint_restores >= 1
    assert sim.reserved_bytes() == reserved_ab
    torch.testing.assert_close(b2(a([x]))[0], torch.full((64,), 4.0))


def test_tree_has_children_under_the_shared_parent(sim):
    def a_fn(xs):
        return [xs[0] + 1]

    def b_fn(xs):
        return [xs[0] * 2]

    def c_fn(xs):
        return [xs[0] * 3]

    a, b, c = (wrap(fn, [torch.ones(2)]) for fn in (a_fn, b_fn, c_fn))
    for _ in range(3):
        trees.new_generation()
        b(a([torch.ones(2)]))
        trees.new_generation()
        c(a([torch.ones(2)]))
    info = trees.tree_info(SIM_INDEX)
    (root,) = info.roots
    children = {info.nodes[c].function for c in info.nodes[root].children}
    assert info.nodes[root].function == "a_fn" and children == {"b_fn", "c_fn"}


def test_all_outputs_dead_lets_the_next_call_replay_a_root(sim):
    f = wrap(pointwise, [torch.ones(4)], name="roots")
    for _ in range(6):
        f([torch.randn(4)])  # outputs dropped at once
    info = fn_info("roots")
    assert info.recordings == 1 and info.replays == 4


def test_mark_step_begin_invalidates_outputs_of_the_previous_step(sim):
    f = wrap(pointwise, [torch.ones(4)])
    for _ in range(3):
        f([torch.randn(4)])
    old = f([torch.randn(4)])[0]
    trees.mark_step_begin()
    f([torch.randn(4)])
    handle = old.untyped_storage()._cdata
    assert "pointwise" in sim.invalidated[handle]


def test_stale_message_names_the_source_line(sim):
    f = wrap(pointwise, [torch.ones(4)], stack_traces=["model.py:12 in forward"])
    for _ in range(3):
        kept = f([torch.randn(4)])[0]
    trees.mark_step_begin()
    f([torch.randn(4)])
    assert "model.py:12 in forward" in sim.invalidated[kept.untyped_storage()._cdata]


def test_forward_outputs_survive_mark_step_begin(sim):
    f = wrap(pointwise, [torch.ones(4)], mode="forward")
    for _ in range(3):
        saved = f([torch.ones(4)])[0]
    trees.mark_step_begin()
    f([torch.ones(4)])
    torch.testing.assert_close(saved, pointwise([torch.ones(4)])[0])


def test_static_input_is_not_copied_and_its_address_is_checked(sim):
    w = torch.randn(4)

    def affine(xs):
        return [xs[0] * xs[1]]

    f = wrap(affine, [w, torch.ones(4)], static=(0,), name="affine")
    for _ in range(3):
        f([w, torch.randn(4)])
    w2 = torch.randn(4)
    out = f([w2, torch.ones(4)])
    torch.testing.assert_close(out[0], w2)
    assert fn_info("affine").recordings == 2


def test_static_input_moving_too_often_runs_eagerly_with_a_reason(sim):
    def affine(xs):
        return [xs[0] * xs[1]]

    f = wrap(
        affine, [torch.ones(4), torch.ones(4)], static=(0,), name="moving", max_static_rerecords=2
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(8):
            w = torch.randn(4)
            torch.testing.assert_close(f([w, torch.ones(4)])[0], w)
    info = fn_info("moving")
    assert info.eager_reason is not None and "static inputs changed address" in info.eager_reason
    # said once, never a silent fallback (FSDP2's parameters move between steps)
    said = [w for w in caught if "static inputs changed address" in str(w.message)]
    assert len(said) == 1 and "'moving' runs eagerly from now on" in str(said[0].message)


def test_mutated_non_static_input_runs_eagerly_and_warns_once(sim):
    def add_in_place(xs):
        xs[0].add_(1)
        return [xs[0] * 2]

    f = wrap(add_in_place, [torch.ones(2)], mutated_input_idxs=(0,), name="mut")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.zeros(2)
            out = f([x])
            torch.testing.assert_close(x, torch.ones(2))
            torch.testing.assert_close(out[0], torch.full((2,), 2.0))
    assert len([w for w in caught if "mutates input 0" in str(w.message)]) == 1
    assert "input 0 is mutated" in next(iter(fn_info("mut").fallbacks))


def test_mutated_static_input_is_graphed(sim):
    buf = torch.zeros(2)

    def bump(xs):
        xs[0].add_(1)
        return [xs[0] + xs[1]]

    f = wrap(bump, [buf, torch.ones(2)], static=(0,), mutated_input_idxs=(0,), name="bump")
    for _ in range(4):
        f([buf, torch.zeros(2)])
    info = fn_info("bump")
    assert info.recordings == 1 and info.replays == 2 and not info.fallbacks


def test_each_input_shape_gets_its_own_recording(sim):
    f = wrap(pointwise, [torch.ones(4)], name="shapes")
    for n in (2, 3, 2, 3, 2, 3):
        for _ in range(1):
            x = torch.randn(n)
            torch.testing.assert_close(f([x])[0], pointwise([x])[0])
    info = fn_info("shapes")
    assert info.warmups == 2 and info.recordings == 2 and info.replays == 2


def test_int_inputs_are_part_of_the_key(sim):
    def scale(xs):
        return [xs[0] * xs[1]]

    f = wrap(scale, [torch.ones(2), 1], name="ints")
    for k in (2, 2, 2, 3, 3, 3):
        torch.testing.assert_close(f([torch.ones(2), k])[0], torch.full((2,), float(k)))
    assert fn_info("ints").recordings == 2


def test_layout_guarded_function_is_keyed_on_its_non_tensor_inputs_alone(sim):
    def scale(xs):
        return [xs[0] * xs[1]]

    f = wrap(scale, [torch.ones(2), 1], name="guarded", layout_guarded=True)
    for k in (2, 2, 2, 3, 3, 3, 2):
        x = torch.randn(2)
        torch.testing.assert_close(f([x, k])[0], x * k)
    info = fn_info("guarded")
    assert (info.warmups, info.recordings, info.replays) == (2, 2, 3)


def test_layout_guarded_recordings_still_report_their_input_shapes(sim):
    def scale(xs):
        return [xs[0] * xs[1]]

    f = wrap(scale, [torch.ones(2, 3), 1], layout_guarded=True)
    for _ in range(3):
        f([torch.randn(2, 3), 4])
    (node,) = trees.tree_info(SIM_INDEX).nodes.values()
    assert node.input_shapes == ((2, 3), None)


def test_recordings_per_function_are_capped_least_recently_used_first(sim):
    f = wrap(pointwise, [torch.ones(4)], name="capped", max_recordings=2)
    for n in (1, 1, 2, 2, 3, 3, 1, 1):
        x = torch.randn(n)
        torch.testing.assert_close(f([x])[0], pointwise([x])[0])
    info = fn_info("capped")
    assert info.live_recordings == 2 and info.evictions >= 1


def test_sparse_input_runs_eagerly_with_a_reason(sim):
    def densify(xs):
        return [xs[0].to_dense() * 2]

    f = wrap(densify, [torch.ones(4)], name="sparse")
    x = torch.randn(4).to_sparse()
    for _ in range(3):
        torch.testing.assert_close(f([x])[0], x.to_dense() * 2)
    (reason,) = fn_info("sparse").fallbacks
    assert "sparse" in reason


def test_expanded_input_is_copied_by_its_span(sim):
    def total(xs):
        return [xs[0] * 1.0]

    f = wrap(total, [torch.ones(4, 3)])
    for _ in range(3):
        base = torch.randn(3)
        x = base.expand(4, 3)
        torch.testing.assert_close(f([x])[0], x * 1.0)


def test_random_numbers_are_fresh_on_each_replay(sim):
    def noisy(xs):
        return [xs[0] + torch.rand(8)]

    f = wrap(noisy, [torch.zeros(8)])
    outs = [f([torch.zeros(8)])[0].clone() for _ in range(4)]
    assert not torch.equal(outs[2], outs[3])


def test_uncapturable_function_runs_eagerly_with_a_reason(sim, monkeypatch):
    def boom(*_a, **_k):
        raise RuntimeError("operation not permitted when stream is capturing")

    f = wrap(pointwise, [torch.ones(4)], name="nocap")
    f([torch.ones(4)])
    monkeypatch.setattr(sim, "capture", boom)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(4)
            torch.testing.assert_close(f([x])[0], pointwise([x])[0])
    assert "capture failed" in fn_info("nocap").eager_reason
    said = [w for w in caught if "runs eagerly from now on, without CUDA graphs" in str(w.message)]
    assert len(said) == 1 and "'nocap'" in str(said[0].message)


def test_reset_frees_every_block_of_the_pool(sim):
    f = wrap(pointwise, [torch.ones(4)])
    kept = [f([torch.randn(4)])[0] for _ in range(4)]
    assert sim.live_blocks()
    trees.reset()
    assert _api._runtimes[SIM_INDEX].blocks_left_at_reset == 0
    assert len(kept) == 4


def test_no_block_leaks_across_checkpoint_restores(sim):
    def a_fn(xs):
        return [xs[0] + 1, xs[0] * 2]

    def b_fn(xs):
        return [xs[0] - 1]

    a, b = wrap(a_fn, [torch.ones(2)]), wrap(b_fn, [torch.ones(2)])
    for _ in range(4):
        y = a([torch.ones(2)])
        b([y[0]])
        b([y[1]])
    runtime = _api._runtimes[SIM_INDEX]
    sync_allocator(sim, runtime.pool, runtime.live)
    assert sim.live_blocks() == {e.ptr for e in runtime.live}
    assert sim.unowned_blocks() == set()


def test_render_text_and_dot_show_every_node(sim):
    f = wrap(pointwise, [torch.ones(4)], name="shown")
    for _ in range(3):
        f([torch.randn(4)])
    text, dot = trees.render(SIM_INDEX), trees.render(SIM_INDEX, fmt="dot")
    assert "shown" in text and "<- current" in text
    assert dot.startswith("digraph") and "n1" in dot


def test_render_rejects_an_unknown_format(sim):
    with pytest.raises(trees.CudaGraphTreeError):
        trees.render(SIM_INDEX, fmt="svg")


def test_unknown_mode_is_rejected(sim):
    with pytest.raises(trees.CudaGraphTreeError, match="mode"):
        wrap(pointwise, [torch.ones(4)], mode="training")


def test_out_of_range_static_index_is_rejected(sim):
    with pytest.raises(trees.CudaGraphTreeError, match="out of range"):
        wrap(pointwise, [torch.ones(4)], static=(3,))


def test_replay_rule_ignores_dead_storages_without_a_prune():
    from sapwood_cudagraph_trees._liveness import LiveStorages

    live = LiveStorages()
    kept, gone = torch.ones(4), torch.ones(4)
    entries = [live.add(t.untyped_storage(), "f", i, None) for i, t in enumerate((kept, gone))]
    held = {kept.untyped_storage().data_ptr(): kept.untyped_storage().nbytes()}
    assert not live.fits(held)  # ``gone`` is alive and outside ``held``
    del gone
    assert live.fits(held)
    assert len(live) == 2  # the dead entry stays registered until the next prune
    live.prune()
    assert len(live) == 1
    live.remove(entries[0])


def _training_pair():
    """A forward graph (loss and a saved activation) and its backward, on the simulated device."""

    def forward(xs):
        (x,) = xs
        hidden = (x * 2).sin()
        return [hidden.sum(), hidden]

    def backward(xs):
        hidden, grad = xs
        return [hidden.cos() * grad]

    fwd = wrap(forward, [torch.ones(4)], mode="forward", name="fwd")
    bwd = wrap(backward, [torch.ones(4), torch.ones(())], mode="backward", name="bwd")
    return fwd, bwd


def test_a_training_loop_holding_its_loss_replays_after_each_step(sim):
    """``loss = model(x); loss.backward()`` keeps last step's loss alive while the next forward
    runs: once a step's backward ran, the next top-level call begins a step (as torch does),
    so the forward replays instead of recording again, and the old loss is invalidated."""
    fwd, bwd = _training_pair()
    losses = []
    for _ in range(6):
        trees.new_generation()
        loss, hidden = fwd([torch.randn(4)])
        losses.append(loss)
        bwd([hidden, torch.ones(())])  # the gradient dies (an optimizer step, set_to_none)
        del hidden
    assert (fn_info("fwd").recordings, fn_info("fwd").replays) == (1, 4)
    assert (fn_info("bwd").recordings, fn_info("bwd").replays) == (1, 4)
    message = sim.invalidated[losses[-2].untyped_storage()._cdata]
    assert "fwd" in message and "a new training step began" in message
    assert losses[-1].untyped_storage()._cdata not in sim.invalidated  # this step's loss
    torch.testing.assert_close(losses[-1], losses[-1].clone())


def test_a_step_boundary_leaves_the_replayed_nodes_outputs_registered(sim, monkeypatch):
    """A new training step invalidates what is still held and nothing else: the nodes' own
    storages that died (saved activations, dropped gradients) stay registered, so a replay
    registers its outputs again only when one of them was invalidated (the forward, whose loss
    the loop held), not the backward, whose gradients were dropped."""
    fwd, bwd = _training_pair()
    refreshes = []
    original = _runtime.DeviceRuntime._refresh_entries
    monkeypatch.setattr(
        _runtime.DeviceRuntime,
        "_refresh_entries",
        lambda self, fn, node: (refreshes.append(fn.name), original(self, fn, node))[1],
    )
    losses = []
    for step in range(8):
        trees.new_generation()
        x = torch.full((4,), float(step))
        loss, hidden = fwd([x])
        losses.append((loss, (x * 2).sin().sum()))
        (grad,) = bwd([hidden, torch.ones(())])
        torch.testing.assert_close(grad, (x * 2).sin().cos())
        del hidden, grad
        if step == 3:
            refreshes.clear()
    assert refreshes == ["fwd"] * 4
    assert (fn_info("fwd").replays, fn_info("bwd").replays) == (6, 6)
    torch.testing.assert_close(*losses[-1])
    message = sim.invalidated[losses[-2][0].untyped_storage()._cdata]
    assert "a new training step began" in message  # the loss a loop still held


def test_gradients_kept_across_steps_stay_valid(sim):
    """A gradient kept across steps (zero_grad(set_to_none=False)) is never invalidated: its
    graph records again rather than overwrite it."""
    fwd, bwd = _training_pair()
    grads = []
    for step in range(4):
        trees.new_generation()
        x = torch.full((4,), float(step))
        _, hidden = fwd([x])
        grads.append((bwd([hidden, torch.ones(())])[0], (x * 2).sin().cos()))
        del hidden
    for grad, expected in grads:
        assert grad.untyped_storage()._cdata not in sim.invalidated
        torch.testing.assert_close(grad, expected)


def test_no_step_begins_while_a_forward_waits_for_its_backward(sim):
    fwd, bwd = _training_pair()
    for _ in range(3):
        trees.new_generation()
        first, hidden = fwd([torch.randn(4)])
        trees.new_generation()  # a second forward before the first one's backward
        second, hidden2 = fwd([torch.randn(4)])
        bwd([hidden, torch.ones(())])
        bwd([hidden2, torch.ones(())])
        torch.testing.assert_close(first, first.clone())  # both still readable
    assert not any(t.untyped_storage()._cdata in sim.invalidated for t in (first, second))


def test_inference_outputs_stay_valid_across_calls(sim):
    f = wrap(pointwise, [torch.ones(4)], name="inf")
    kept = []
    for _ in range(4):
        trees.new_generation()
        kept.append(f([torch.randn(4)])[0])
    assert not any(t.untyped_storage()._cdata in sim.invalidated for t in kept)


def test_a_sparse_output_runs_eagerly_with_a_reason(sim):
    def to_sparse(xs):
        (x,) = xs
        return [(x * 2).to_sparse(), x + 1]

    f = wrap(to_sparse, [torch.ones(4)], name="sparse_out")
    for _ in range(3):
        x = torch.randn(4)
        out = f([x])
        torch.testing.assert_close(out[0].to_dense(), x * 2)
        torch.testing.assert_close(out[1], x + 1)
    info = fn_info("sparse_out")
    assert info.recordings == 0
    assert "sparse_coo tensor" in (info.eager_reason or "")


def test_tree_info_counts_only_outputs_someone_holds(sim):
    f = wrap(pointwise, [torch.ones(4)], name="counted")
    held = [f([torch.randn(4)])[0] for _ in range(3)]
    assert trees.tree_info(SIM_INDEX).live_outputs == 3
    del held
    assert trees.tree_info(SIM_INDEX).live_outputs == 0


def test_an_output_that_changes_device_under_capture_is_capture_only(sim, monkeypatch):
    # like flash attention's dropout seed: a CPU tensor when run, a device tensor when captured
    def with_seed(xs):
        (x,) = xs
        return [x + 1, torch.tensor([7, 8])]

    f = wrap(with_seed, [torch.ones(4)], name="seeded")
    f([torch.ones(4)])  # warm-up: the outputs' devices as the function really runs
    capture = sim.capture

    def capture_elsewhere(fn, inputs):
        graph, outputs = capture(fn, inputs)
        outputs = list(outputs)
        outputs[1] = outputs[1].to("meta")
        return graph, outputs

    monkeypatch.setattr(sim, "capture", capture_elsewhere)
    out, seed = f([torch.ones(4)])
    regimes = _api._runtime(SIM_INDEX).regimes
    assert regimes.has_capture_only([seed]) and not regimes.has_capture_only([out])
    assert fn_info("seeded").recordings == 1


def test_capture_regimes_keep_eager_outputs_from_captures_and_capture_only_from_eager():
    from sapwood_cudagraph_trees._regimes import CaptureRegimes, capture_key, drifted_outputs

    cpu, meta = torch.device("cpu"), torch.device("meta")
    assert drifted_outputs((cpu, None, cpu), [torch.zeros(()), 3, torch.zeros((), device=meta)])
    assert drifted_outputs(None, [torch.zeros(())]) == []
    regimes = CaptureRegimes(torch.device("cuda", 0))  # a device object only: no GPU needed
    seed, other = torch.tensor(5), torch.tensor(6)
    regimes.mark_eager_outputs([seed, 3], "forward")
    regimes.mark_eager_outputs([other], "backward")  # gradients feed no graph
    assert regimes.eager_only_input([other, seed]) == 1
    assert regimes.eager_only_input([other]) is None
    del seed
    assert regimes.eager_only == {}  # forgotten once the tensor dies
    captured = torch.tensor([1, 2])
    regimes.capture_only.add(capture_key(captured))
    assert regimes.has_capture_only([other, captured])
    copies = regimes.host_copies([other, captured])
    assert copies[0] is other and torch.equal(copies[1], captured)
    assert not regimes.has_capture_only([captured.view(2, 1)])  # same address, other shape
    assert CaptureRegimes(torch.device("cpu")).eager_only_input([other]) is None


def test_render_of_a_device_without_a_tree_says_why(sim):
    text = trees.render(7)
    assert "0 graph(s)" in text and "(no tree: " in text
