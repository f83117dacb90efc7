"""``requires_grad`` assigned inside compiled code, against eager.

A view of an input that does not require grad, made a leaf that requires grad (Wav2Vec2's
feature encoder: ``h = x[:, None]; h.requires_grad = True``), stays in one graph: the entry
makes the leaf and passes it to the graph. Values, gradients (the leaf's own ``.grad``
included) and identities equal eager's. What cannot be exact raises as torch does or is a
graph break with a reason.
"""

from __future__ import annotations

import pytest
import torch

import sapwood_tracer


def _eager(gm, example_inputs):
    return gm.forward


def _aot_eager(gm, example_inputs):
    from torch._dynamo.backends.debugging import aot_eager

    return aot_eager(gm, example_inputs)


BACKENDS = {"eager": _eager, "aot_eager": _aot_eager}


class FeatureEncoder(torch.nn.Module):
    """Wav2Vec2's pattern: the input's view made a leaf that requires grad, then convs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv1d(1, 4, 3)
        self.proj = torch.nn.Linear(8, 2)

    def forward(self, x):
        h = x[:, None]
        if self.training:
            h.requires_grad = True
        return self.proj(torch.relu(self.conv(h))).sum(), h


def _counting(backend_name):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return BACKENDS[backend_name](gm, example_inputs)

    return backend, graphs


def _explained(fn, *args):
    sapwood_tracer.reset()
    report = sapwood_tracer.explain(fn)(*args)
    sapwood_tracer.reset()
    return report


@pytest.mark.parametrize("backend_name", ["eager", "aot_eager"])
def test_view_of_input_made_a_leaf_is_one_graph_with_eager_gradients(backend_name):
    torch.manual_seed(0)
    eager_model = FeatureEncoder()
    model = FeatureEncoder()
    model.load_state_dict(eager_model.state_dict())
    backend, graphs = _counting(backend_name)
    compiled = sapwood_tracer.compile(model, backend=backend)
    for x in (torch.randn(2, 10), torch.randn(2, 10)):
        loss, h = eager_model(x)
        loss.backward()
        got_loss, got_h = compiled(x)
        got_loss.backward()
        torch.testing.assert_close(got_loss, loss)
        assert got_h.is_leaf and got_h.requires_grad and got_h.grad_fn is None
        assert got_h._base is x and not x.requires_grad and x.grad is None
        torch.testing.assert_close(got_h.grad, h.grad)
        for p, q in zip(model.parameters(), eager_model.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
    assert len(graphs) == 1
    assert not _explained(model, torch.randn(2, 10)).breaks


@pytest.mark.parametrize("backend_name", ["eager", "aot_eager"])
def test_new_input_sizes_make_their_own_leaf_in_a_dynamic_graph(backend_name):
    model = FeatureEncoder()
    backend, graphs = _counting(backend_name)
    compiled = sapwood_tracer.compile(model, backend=backend)
    for batch in (2, 3, 5):
        x = torch.randn(batch, 10)
        loss, h = model(x)
        loss.backward()
        got_loss, got_h = compiled(x)
        got_loss.backward()
        torch.testing.assert_close(got_loss, loss)
        assert got_h._base is x and got_h.is_leaf
        torch.testing.assert_close(got_h.grad, h.grad)
    assert len(graphs) == 2  # the first sizes, then sizes as symbols


def test_uses_before_the_assignment_get_no_gradient(check):
    def fn(x, w):
        h = x[1:].t()
        before = h * w
        h.requires_grad = True
        after = h * w
        return before, after, h.requires_grad

    check(fn, (torch.randn(3, 2), torch.randn(2, 2)))


@pytest.mark.parametrize("backend_name", ["eager", "aot_eager"])
def test_the_leaf_gradient_flows_only_through_uses_after(backend_name):
    def fn(x):
        h = x.view(2, 3)
        a = (h * 2).sum()
        h.requires_grad_()
        b = (h * 3).sum()
        return a + b, h

    x = torch.randn(6)
    loss, h = fn(x)
    loss.backward()
    backend, graphs = _counting(backend_name)
    got_loss, got_h = sapwood_tracer.compile(fn, backend=backend)(x)
    got_loss.backward()
    torch.testing.assert_close(got_loss, loss)
    torch.testing.assert_close(got_h.grad, h.grad)  # 3 everywhere, not 5
    assert len(graphs) == 1


def test_requires_grad_method_returns_the_tensor_itself(check):
    def fn(x):
        h = x[0]
        r = h.requires_grad_(True)
        again = h.requires_grad_()
        return r is h, again is h, h.requires_grad, (h * 2).requires_grad

    check(fn, (torch.randn(2, 3),))


def test_assigning_true_twice_is_one_leaf(check):
    def fn(x):
        h = x.unsqueeze(0)
        h.requires_grad = True
        h.requires_grad = True
        return h, h.sum()

    check(fn, (torch.randn(3),))


def test_the_escaping_leaf_in_a_container_is_the_same_tensor(backend):
    def fn(x):
        h = x[:, None]
        h.requires_grad = True
        return [h, h], {"h": h}

    x = torch.randn(2, 3)
    pair, mapping = sapwood_tracer.compile(fn, backend=backend)(x)
    assert pair[0] is pair[1] is mapping["h"]
    assert pair[0].is_leaf and pair[0].requires_grad and pair[0]._base is x


def test_false_on_a_tensor_that_does_not_require_grad_is_a_no_op(check):
    def fn(x):
        h = x * 2
        h.requires_grad = False
        x.requires_grad_(False)
        return h, h.requires_grad

    check(fn, (torch.randn(3),))


@pytest.mark.parametrize(
    "assign",
    [
        lambda t: setattr(t, "requires_grad", True),
        lambda t: setattr(t, "requires_grad", False),
        lambda t: t.requires_grad_(False),
    ],
    ids=["attr_true", "attr_false", "method_false"],
)
def test_a_non_leaf_raises_as_eager(backend, assign):
    def fn(x, w):
        h = x * w
        assign(h)
        return h

    args = (torch.randn(3), torch.randn(3, requires_grad=True))
    with pytest.raises(RuntimeError) as expected:
        fn(*args)
    with pytest.raises(RuntimeError) as got:
        sapwood_tracer.compile(fn, backend=backend)(*args)
    assert str(got.value) == str(expected.value)


def test_requires_grad_method_on_a_non_leaf_is_a_no_op(check):
    def fn(x, w):
        h = x * w
        return h.requires_grad_() is h, h

    check(fn, (torch.randn(3), torch.randn(3, requires_grad=True)))


@pytest.mark.parametrize("method", [False, True])
def test_an_integer_tensor_raises_as_eager(backend, method):
    def fn(x):
        h = x[0]
        if method:
            h.requires_grad_()
        else:
            h.requires_grad = True
        return h

    x = torch.arange(6).view(2, 3)
    with pytest.raises(RuntimeError) as expected:
        fn(x)
    with pytest.raises(RuntimeError) as got:
        sapwood_tracer.compile(fn, backend=backend)(x)
    assert str(got.value) == str(expected.value)


def _check_breaks_and_equals_eager(fn, make_args, reason):
    """``fn`` compiled equals eager (values, the returned tensors' gradients), with a break
    whose reason contains ``reason``."""
    args = make_args()
    expected = fn(*args)
    expected[0].sum().backward()
    got_args = make_args()
    got = sapwood_tracer.compile(fn, backend=_eager)(*got_args)
    got[0].sum().backward()
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)
        assert a.requires_grad == b.requires_grad
        if b.requires_grad and b.is_leaf and b.grad is not None:
            torch.testing.assert_close(a.grad, b.grad)
    report = _explained(fn, *make_args())
    assert any(reason in b.reason for b in report.breaks), report.breaks


def test_a_computed_tensor_made_a_leaf_is_a_graph_break():
    def fn(x):
        h = x * 2
        h.requires_grad = True
        return h, (h * 3).sum()

    _check_breaks_and_equals_eager(
        fn, lambda: (torch.ones(3),), "requires_grad on a tensor the graph computed"
    )


def test_an_input_made_to_require_grad_is_a_graph_break():
    def fn(x):
        x.requires_grad = True
        return x, x * 2

    x = torch.randn(3)
    sapwood_tracer.compile(fn, backend=_eager)(x)
    assert x.requires_grad and x.is_leaf
    report = _explained(fn, torch.randn(3))
    assert any("requires_grad on an input tensor" in b.reason for b in report.breaks)


def test_false_on_a_leaf_that_requires_grad_is_a_graph_break():
    def fn(x):
        h = torch.ones(3, requires_grad=True)
        y = h * x
        h.requires_grad = False
        return y, h + x, h

    _check_breaks_and_equals_eager(
        fn, lambda: (torch.arange(3.0),), "requires_grad = False on a leaf that requires grad"
    )


def test_a_view_of_an_input_that_requires_grad_raises_as_eager(backend):
    def fn(w):
        h = w[0]
        h.requires_grad = True
        return h

    w = torch.randn(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError) as expected:
        fn(w)
    with pytest.raises(RuntimeError) as got:
        sapwood_tracer.compile(fn, backend=backend)(w)
    assert str(got.value) == str(expected.value)


def test_a_view_of_an_input_written_before_is_a_graph_break():
    def fn(x):
        x.mul_(2)
        h = x[0]
        h.requires_grad = True
        return h, h * 3

    _check_breaks_and_equals_eager(
        fn, lambda: (torch.ones(2, 3),), "a view of an input the function wrote to"
    )


def test_a_view_of_an_input_written_after_runs_as_eager():
    def fn(x):
        h = x[0]
        h.requires_grad = True
        y = h * 3
        x.add_(1)
        return y, h, x

    args = lambda: (torch.ones(2, 3),)  # noqa: E731
    expected = fn(*args())
    expected[0].sum().backward()
    got = sapwood_tracer.compile(fn, backend=_eager)(*args())
    got[0].sum().backward()
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(got[1].grad, expected[1].grad)
    assert got[1]._base is got[2]


def test_contiguous_of_the_view_is_the_leaf_itself(check):
    def fn(x):
        h = x[:, None]
        same = h.contiguous()  # h itself, eagerly
        h.requires_grad = True
        return h, same, same is h, same.requires_grad

    check(fn, (torch.randn(2, 3),))


def test_a_view_whose_arguments_the_graph_computes_is_a_graph_break():
    def fn(x, i):
        h = x.narrow(0, i.size(0), 1)
        h.requires_grad = True
        return h, h * 2

    x, i = torch.randn(4, 3), torch.randn(2)
    expected = fn(x, i)
    got = sapwood_tracer.compile(fn, backend=_eager)(x, i)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)
        assert a.requires_grad == b.requires_grad
