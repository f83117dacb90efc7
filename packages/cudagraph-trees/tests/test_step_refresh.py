"""What a replay redoes after a step boundary, on the simulated device.

A new training step invalidates the outputs a loop still holds (its loss); the node's other
storages (saved activations, dead since the backward) are left as they were. The next replay
builds new templates for the invalidated storage alone and puts them where the old ones were
among the outputs; every other output, handed-out templates included, stays the same object.
A storage found dead is not looked at again until its node hands it out anew, so each storage's
life is read about once per step.
"""

from __future__ import annotations

import gc
import weakref

import torch

import sapwood_cudagraph_trees as trees
from sapwood_cudagraph_trees import _api, _entries, _liveness

SIM_INDEX = 7  # the index the ``sim`` fixture (conftest.py) installs the simulated layer at
SAVED = 3  # saved activations of the forward below, each its own storage


def wrap(fn, example, mode, reusable=(), static=(), **kw):
    return trees.cudagraphify(
        fn,
        example,
        static,
        device_index=SIM_INDEX,
        mode=mode,
        reusable_output_idxs=reusable,
        **kw,
    )


def fn_info(name):
    (info,) = [f for f in trees.tree_info(SIM_INDEX).functions if f.name == name]
    return info


def forward(xs):
    """A loss, a view of the same storage the caller sees too, and ``SAVED`` activations."""
    (x,) = xs
    hidden = [(x * (i + 2)).sin() for i in range(SAVED)]
    total = torch.stack([h.sum() for h in hidden])
    return [total, total[1:], *hidden]


def backward(xs):
    *hidden, grad = xs
    return [sum(h.cos() for h in hidden) * grad]


def training_pair():
    user_outputs = 2
    saved = tuple(range(user_outputs, user_outputs + SAVED))
    example = [torch.ones(4)]
    fwd = wrap(forward, example, "forward", reusable=saved, name="fwd")
    bwd = wrap(backward, [*forward(example)[2:], torch.ones(())], "backward", (0,), name="bwd")
    return fwd, bwd


def step(fwd, bwd, x):
    """One training step, a top-level call: forward, backward (its gradient dropped as by
    ``set_to_none``); the loss and its view are returned, as a loop keeps them."""
    trees.new_generation()
    total, tail, *hidden = fwd([x])
    (grad,) = bwd([*hidden, torch.ones(())])
    torch.testing.assert_close(grad, sum(h.cos() for h in forward([x])[2:]))
    return total, tail, [weakref.ref(h) for h in hidden]


def test_a_new_step_rebuilds_only_the_storage_it_invalidated(sim, monkeypatch):
    fwd, bwd = training_pair()
    built = []
    original = _entries._fresh_entry
    monkeypatch.setattr(
        _entries,
        "_fresh_entry",
        lambda live, layer, node, group, old: (
            built.append((node.function_name, group)),
            original(live, layer, node, group, old),
        )[1],
    )
    kept = None
    for i in range(8):
        x = torch.full((4,), float(i))
        kept = step(fwd, bwd, x)
        if i == 3:
            built.clear()
            saved_then = kept[2]  # weak references: the loop holds no saved activation
    assert (fn_info("fwd").replays, fn_info("bwd").replays) == (6, 6)
    # steps 4..7: the loss's storage (the loss and its view) was still held by the loop
    assert built == [("fwd", 0)] * 4
    for now, then in zip(kept[2], saved_then):  # the same saved activation objects
        assert now() is not None and now() is then()
    total, tail, _ = kept
    expected = forward([torch.full((4,), 7.0)])[0]
    torch.testing.assert_close(total, expected)
    torch.testing.assert_close(tail, expected[1:])
    assert tail.untyped_storage().data_ptr() == total.untyped_storage().data_ptr()


def test_outputs_of_an_invalidated_storage_are_refused_and_the_next_ones_are_right(sim):
    fwd, bwd = training_pair()
    results = []
    for i in range(6):
        x = torch.full((4,), float(i) + 0.5)
        total, tail, _ = step(fwd, bwd, x)
        results.append((total, tail, forward([x])[0]))
    for total, tail, _ in results[2:-1]:  # replays whose step ended: handed back to the pool
        assert total.untyped_storage()._cdata in sim.invalidated
        assert tail.untyped_storage()._cdata in sim.invalidated
    total, tail, expected = results[-1]
    torch.testing.assert_close(total, expected)
    torch.testing.assert_close(tail, expected[1:])


def test_a_storage_adopted_at_a_checkpoint_restore_is_not_kept_alive_by_its_node(sim):
    """A recording restores the pool's checkpoint and hands each held output its block: the
    node that made it drops its templates at once (the recipe too), so the block is freed as
    soon as the caller lets go, and the node's next replay builds new ones."""
    double = wrap(lambda xs: [xs[0] * 2, xs[0] + 1], [torch.ones(4)], "inference", name="dbl")
    other = wrap(lambda xs: [xs[0] - 3], [torch.ones(6)], "inference", name="other")
    x = torch.randn(4)
    for _ in range(3):  # warm-up, recording, replay
        doubled, plus = double([x])
    other([torch.ones(6)])  # warm-up: restores the checkpoint, adopts the held outputs
    ptr = doubled.untyped_storage().data_ptr()
    assert ptr in sim.live_blocks()
    del doubled
    gc.collect()
    assert ptr not in sim.live_blocks()
    doubled, plus2 = double([x])
    torch.testing.assert_close(doubled, x * 2)
    torch.testing.assert_close(plus, x + 1)  # the one still held was not written over
    torch.testing.assert_close(plus2, x + 1)


def test_each_storage_life_is_read_about_once_per_step(sim, monkeypatch):
    fwd, bwd = training_pair()
    for i in range(4):
        kept = step(fwd, bwd, torch.full((4,), float(i)))
    reads = []
    use_count = _liveness._use_count
    monkeypatch.setattr(_liveness, "_use_count", lambda h: (reads.append(h), use_count(h))[1])
    steps = 4
    for i in range(steps):
        kept = step(fwd, bwd, torch.full((4,), float(i)))
    registered = len(_api._runtimes[SIM_INDEX].live)
    # per step: each registered storage once (the saved activations and the loss at the
    # step's start, the gradient by the forward's replay rule), and the baseline of the
    # loss's new templates; before death was remembered, about twice that
    assert len(reads) <= steps * (registered + 1)
    assert kept[0].untyped_storage()._cdata not in sim.invalidated


def test_an_output_found_dead_is_watched_again_once_a_replay_hands_it_out(sim):
    x, y = torch.randn(4), torch.randn(4)
    for reusable in ((0,), ()):
        f = wrap(lambda xs: [(xs[0] * 2).sin()], [x], "inference", reusable, name=f"f{reusable}")
        for _ in range(3):  # warm-up, recording, replay: that replay's output dies here
            f([x])
        (kept,) = f([x])  # found dead by this call's replay rule, then handed out again
        (other,) = f([y])
        assert other is not kept
        torch.testing.assert_close(kept, (x * 2).sin())
        torch.testing.assert_close(other, (y * 2).sin())


def test_a_step_leaves_the_replay_rules_cache_as_it_was(sim, monkeypatch):
    """The loss's storage leaves the registry at each step's start and comes back at the same
    address with the next replay: the addresses each node checks stay the same, so no node
    lists them again."""
    fwd, bwd = training_pair()
    for i in range(4):
        step(fwd, bwd, torch.full((4,), float(i)))
    listed = []
    outside = _liveness.LiveStorages.outside
    monkeypatch.setattr(
        _liveness.LiveStorages,
        "outside",
        lambda self, held: listed.append(1) or outside(self, held),
    )
    for i in range(4):
        total, _, _ = step(fwd, bwd, torch.full((4,), float(i)))
    assert listed == []
    assert (fn_info("fwd").recordings, fn_info("bwd").recordings) == (1, 1)
    torch.testing.assert_close(total, forward([torch.full((4,), 3.0)])[0])


def test_an_address_seen_before_and_alive_again_still_blocks_a_replay(sim):
    """A storage registered again at an address the registry saw before, and held, keeps a
    graph that would write there from replaying (the cached addresses include it)."""
    f = wrap(lambda xs: [(xs[0] * 2).sin()], [torch.ones(4)], "inference", name="f")
    x, y = torch.randn(4), torch.randn(4)
    for _ in range(3):
        f([x])
    for _ in range(3):  # replays: the same address leaves and comes back
        (kept,) = f([x])
        del kept
    (kept,) = f([x])
    (other,) = f([y])
    torch.testing.assert_close(kept, (x * 2).sin())
    torch.testing.assert_close(other, (y * 2).sin())
    assert kept.untyped_storage().data_ptr() != other.untyped_storage().data_ptr()


def test_reset_forgets_forwards_that_never_ran_their_backward(sim):
    """A forward whose backward never ran (a loss computed with grad on, then dropped) holds
    implicit steps back until ``reset()``; after it, a training loop that keeps its loss
    begins a step at each call again and replays."""
    fwd, bwd = training_pair()
    trees.new_generation()
    fwd([torch.ones(4)])  # no backward
    trees.reset()
    fwd, bwd = training_pair()
    for i in range(6):
        kept = step(fwd, bwd, torch.full((4,), float(i)))
    assert (fn_info("fwd").recordings, fn_info("fwd").replays) == (1, 4)
    torch.testing.assert_close(kept[0], forward([torch.full((4,), 5.0)])[0])
