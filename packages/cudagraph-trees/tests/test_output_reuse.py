"""Reusable outputs on the simulated device: the same tensor objects come back once free.

An output declared in ``reusable_output_idxs`` whose storage no undeclared output shares is the
node's own template: a replay returns it again when nobody else holds it (no Python reference,
no C++ owner such as autograd, no other tensor over its memory), and records another graph
that leaves it alone while anybody does.
"""

from __future__ import annotations

import weakref

import pytest
import torch

import sapwood_cudagraph_trees as trees

SIM_INDEX = 7  # the index the ``sim`` fixture (conftest.py) installs the simulated layer at


def wrap(fn, example, static=(), mode="inference", reusable=(0,), **kw):
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


def pointwise(xs):
    (x,) = xs
    return [(x * 2).sin() + 1]


def replaying(f, x):
    """``f`` after its warm-up and recording, so that the next calls replay."""
    f([x])
    f([x])
    return f


def test_reusable_output_comes_back_as_the_same_object_once_dropped(sim):
    x = torch.randn(4)
    f = replaying(wrap(pointwise, [x], name="pw"), x)
    (first,) = f([x])
    ref = weakref.ref(first)
    del first
    (second,) = f([x])
    assert ref() is second
    assert fn_info("pw").recordings == 1


def test_undeclared_output_is_a_new_object_on_each_replay(sim):
    x = torch.randn(4)
    f = replaying(wrap(pointwise, [x], reusable=()), x)
    (first,) = f([x])
    ref = weakref.ref(first)
    del first
    (second,) = f([x])
    assert ref() is None
    torch.testing.assert_close(second, pointwise([x])[0])


def test_reusable_output_still_held_keeps_its_value(sim):
    x, y = torch.randn(4), torch.randn(4)
    f = replaying(wrap(pointwise, [x]), x)
    (kept,) = f([x])
    (other,) = f([y])
    assert other is not kept
    torch.testing.assert_close(kept, pointwise([x])[0])
    torch.testing.assert_close(other, pointwise([y])[0])


def test_reusable_output_held_only_by_autograd_keeps_its_value(sim):
    x, y = torch.randn(4), torch.randn(4)
    f = replaying(wrap(pointwise, [x]), x)
    holder = torch.zeros(4, requires_grad=True)
    (out,) = f([x])
    holder.grad = out  # a C++ owner: no Python reference to ``out`` is left after the del
    del out
    (other,) = f([y])
    assert other is not holder.grad
    torch.testing.assert_close(holder.grad, pointwise([x])[0])


def test_reusable_output_viewed_by_another_tensor_keeps_its_value(sim):
    x, y = torch.randn(4), torch.randn(4)
    f = replaying(wrap(pointwise, [x]), x)
    (out,) = f([x])
    tail = out.detach()[1:]  # another tensor over the same memory
    del out
    f([y])
    torch.testing.assert_close(tail, pointwise([x])[0][1:])


def test_output_sharing_a_storage_with_an_undeclared_output_is_a_new_object(sim):
    def two_views(xs):
        y = xs[0] * 3
        return [y, y[1:]]

    x = torch.randn(4)
    f = replaying(wrap(two_views, [x], reusable=(1,)), x)
    _, first = f([x])
    ref = weakref.ref(first)
    del first
    whole, tail = f([x])
    assert ref() is None
    assert tail.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr()


def test_reused_output_of_an_earlier_step_is_refused(sim):
    x = torch.randn(4)
    f = replaying(wrap(pointwise, [x]), x)
    (kept,) = f([x])
    trees.mark_step_begin()
    f([x])
    assert kept.untyped_storage()._cdata in sim.invalidated


def test_negative_reusable_index_is_rejected(sim):
    with pytest.raises(trees.CudaGraphTreeError, match="reusable_output_idxs"):
        wrap(pointwise, [torch.ones(4)], reusable=(-1,))


class _Layer:
    """``tanh(x @ w)`` as a forward and a backward graph on the trees, glued by autograd the
    way AOT autograd glues compiled graphs: the pre-activation is a saved activation, declared
    reusable in the forward; the gradient is declared reusable in the backward."""

    def __init__(self, w: torch.Tensor, x: torch.Tensor) -> None:
        def forward(xs):
            w, x = xs
            pre = x @ w
            return [pre.tanh(), pre]

        def backward(xs):
            _, x, pre, grad = xs
            return [x.t() @ (grad * (1 - pre.tanh() ** 2))]

        self.saved: list[weakref.ref[torch.Tensor]] = []
        self.fw = wrap(forward, [w, x], (0,), "forward", (1,), name="fw")
        self.bw = wrap(backward, [w, x, x @ w, x @ w], (0,), "backward", (0,), name="bw")
        layer = self

        class Apply(torch.autograd.Function):
            @staticmethod
            def forward(ctx, w, x):
                out, pre = layer.fw([w, x])
                layer.saved.append(weakref.ref(pre))
                ctx.save_for_backward(w, x, pre)
                return out

            @staticmethod
            def backward(ctx, grad):
                w, x, pre = ctx.saved_tensors
                (grad_w,) = layer.bw([w, x, pre, grad])
                return grad_w, None

        self.apply = Apply.apply


def _train(w: torch.Tensor, x: torch.Tensor, step, steps: int = 6) -> torch.Tensor:
    for _ in range(steps):
        (step(w, x) ** 2).sum().backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
        w.grad = None
    return w.detach()


def test_training_with_reused_outputs_matches_eager(sim):
    torch.manual_seed(0)
    w0, x = torch.randn(3, 2), torch.randn(5, 3)
    expected = _train(w0.clone().requires_grad_(), x, lambda w, x: (x @ w).tanh())
    layer = _Layer(w0, x)
    got = _train(w0.clone().requires_grad_(), x, layer.apply)
    torch.testing.assert_close(got, expected)
    assert (fn_info("fw").recordings, fn_info("bw").recordings) == (1, 1)
    assert layer.saved[-1]() is layer.saved[-2]()  # the saved activation object came back


def test_reused_gradient_is_taken_over_by_autograd_without_a_copy(sim):
    torch.manual_seed(0)
    w, x = torch.randn(3, 2, requires_grad=True), torch.randn(5, 3)
    layer = _Layer(w.detach(), x)
    for _ in range(4):
        w.grad = None
        layer.apply(w, x).sum().backward()
    assert sim.in_arena(w.grad.untyped_storage().data_ptr())


def test_tree_info_counts_the_outputs_a_node_hands_out_again(sim):
    def three(xs):
        y = xs[0] * 3
        return [y, y[1:], xs[0] + 1]

    x = torch.randn(4)
    f = replaying(wrap(three, [x], reusable=(2,), name="three"), x)
    f([x])
    (node,) = trees.tree_info(SIM_INDEX).nodes.values()
    assert node.reused_outputs == 1
    assert "reused=1" in trees.render(SIM_INDEX)
