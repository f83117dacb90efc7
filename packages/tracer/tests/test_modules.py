"""nn.Module support: submodules, containers, parameters, buffers, training flag, hooks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import sapwood_tracer
from sapwood_tracer import Unsupported

X = torch.randn(2, 4)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})
        self.seq = nn.Sequential(nn.ReLU(), nn.Linear(4, 4), nn.Tanh())
        self.scales = nn.ParameterList(
            [nn.Parameter(torch.ones(4)), nn.Parameter(torch.full((4,), 2.0))]
        )
        self.register_buffer("offset", torch.arange(4.0))
        self.eps = 1e-3
        self.config = {"use_heads": True}

    def forward(self, x):
        x = self.fc(x) + self.offset
        for i, block in enumerate(self.blocks):
            x = block(x) * self.scales[i]
        x = self.seq[1](self.seq(x)) + self.eps
        if self.training:
            x = x * 0.5
        outs = {}
        if self.config["use_heads"]:
            for name, head in self.heads.items():
                outs[name] = head(x)
        return x, outs, len(self.blocks), self.blocks[-1](x)


def _compiled(module, backend):
    return sapwood_tracer.compile(module, backend=backend)


def test_module_forward_matches_eager_with_one_graph(backend, same):
    net = _Net()
    compiled = _compiled(net, backend)
    for _ in range(2):
        same(compiled(X), net(X))
    assert backend.count == 1


def test_compiled_module_is_still_a_module(backend):
    net = _Net()
    compiled = _compiled(net, backend)
    assert isinstance(compiled, nn.Module)
    assert compiled.eps == 1e-3
    assert compiled.fc is net.fc
    assert list(compiled.state_dict()) == list(net.state_dict())
    assert [p for p in compiled.parameters()] == [p for p in net.parameters()]
    compiled.eval()
    assert not net.training
    compiled.load_state_dict(net.state_dict())


def test_training_flag_switch_recompiles_and_stays_right(backend, same):
    net = _Net()
    compiled = _compiled(net, backend)
    same(compiled(X), net(X))
    compiled.eval()
    same(compiled(X), net(X))
    compiled.train()
    same(compiled(X), net(X))
    assert backend.count == 2


def test_parameter_updates_are_seen_without_recompiling(backend, same):
    net = nn.Linear(4, 4)
    compiled = _compiled(net, backend)
    compiled(X)
    with torch.no_grad():
        net.weight.add_(1.0)
    same(compiled(X), net(X))
    assert backend.count == 1


def test_replacing_a_parameter_is_seen(backend, same):
    net = nn.Linear(4, 4)
    compiled = _compiled(net, backend)
    compiled(X)
    net.weight = nn.Parameter(torch.zeros(4, 4))
    same(compiled(X), net(X))


def test_iterating_children_and_parameters(check):
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))

    def fn(m, x):
        for child in m.children():
            x = child(x)
        norms = [p.norm() for p in m.parameters()]
        names = [n for n, _ in m.named_children()]
        return x, norms, names

    check(fn, (net, X))


def test_module_attribute_writes_are_replayed(backend):
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.steps = 0

        def forward(self, x):
            self.steps = self.steps + 1
            self.last = x.sum()
            return x * self.steps

    m = Counter()
    compiled = _compiled(m, backend)
    out = compiled(X)
    assert m.steps == 1
    torch.testing.assert_close(m.last, X.sum())
    torch.testing.assert_close(out, X)


def test_forward_hooks_on_submodules_are_honoured(backend, same):
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    seen = []
    net[0].register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    net[0].register_forward_hook(lambda mod, args, out: out + 1)
    net[1].register_forward_hook(lambda mod, args, kwargs, out: out * 3, with_kwargs=True)
    net[1].register_forward_hook(lambda mod, args, out: seen.append(1) if False else None)
    compiled = _compiled(net, backend)
    for _ in range(2):
        same(compiled(X), net(X))
    assert backend.count == 1


def test_registering_a_hook_after_compiling_recompiles(backend, same):
    net = nn.Sequential(nn.Linear(4, 4))
    compiled = _compiled(net, backend)
    compiled(X)
    handle = net[0].register_forward_hook(lambda mod, args, out: out * 2)
    same(compiled(X), net(X))
    handle.remove()
    same(compiled(X), net(X))
    assert backend.count == 2


def test_backward_hooks_are_refused():
    net = nn.Sequential(nn.Linear(4, 4))
    net[0].register_full_backward_hook(lambda mod, gin, gout: None)
    with pytest.raises(Unsupported, match="backward hooks"):
        sapwood_tracer.compile(net, fullgraph=True, backend=lambda gm, ex: gm.forward)(X)


def test_hooks_on_the_compiled_module_itself_are_honoured(backend, same):
    net = nn.Linear(4, 4)
    net.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    net.register_forward_hook(lambda mod, args, out: out * 2)
    compiled = _compiled(net, backend)
    for _ in range(2):
        same(compiled(X), net(X))
    assert backend.count == 1


def test_buffers_and_batchnorm_in_training(backend, same):
    ref = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    net.load_state_dict(ref.state_dict())
    compiled = _compiled(net, backend)
    x = torch.randn(2, 3, 8, 8)
    for _ in range(2):
        same(compiled(x), ref(x))
    torch.testing.assert_close(net[1].running_mean, ref[1].running_mean)
    assert int(net[1].num_batches_tracked) == 2


def test_stateless_torch_modules_built_in_forward(check):
    def fn(x, target):
        loss = nn.CrossEntropyLoss(reduction="sum")(x, target)
        return nn.ReLU()(x), nn.Softmax(dim=-1)(x), loss

    check(fn, (X, torch.tensor([0, 3])))


def test_constructing_a_module_with_weights_inside_forward_is_refused():
    def fn(x):
        return nn.Linear(4, 4)(x)

    with pytest.raises(Unsupported, match="module"):
        sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)(X)


def test_compiling_a_bound_method(backend, same):
    net = nn.Linear(4, 4)
    compiled = sapwood_tracer.compile(net.forward, backend=backend)
    same(compiled(X), net(X))


def _graphs_of(fn, *args):
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    sapwood_tracer.compile(fn, backend=keep)(*args)
    return graphs


def test_parameters_and_buffers_are_static_graph_inputs():
    net = nn.BatchNorm1d(4).train()
    x = torch.randn(3, 4)
    (gm,) = _graphs_of(net, x)
    static = {
        node.target: bool(node.meta.get("static_input"))
        for node in gm.graph.nodes
        if node.op == "placeholder"
    }
    assert sum(static.values()) == 5  # weight, bias, running mean and var, batches tracked
    assert [name for name, is_static in static.items() if not is_static] == ["input"]


@pytest.mark.parametrize("mark", ["sapwood", "torch"])
def test_tensors_marked_with_a_static_address_are_static_graph_inputs(mark):
    def update(cache, x, pos):
        cache.index_copy_(0, pos, x)
        return cache.sum(0)

    cache, other = torch.zeros(4, 3), torch.zeros(4, 3)
    if mark == "sapwood":
        sapwood_tracer.mark_static_address(cache)
    else:
        torch._dynamo.mark_static_address(cache)
    x, pos = torch.randn(1, 3), torch.tensor([2])
    (gm,) = _graphs_of(update, cache, x, pos)
    static = [bool(n.meta.get("static_input")) for n in gm.graph.nodes if n.op == "placeholder"]
    assert static == [True, False, False]
    (gm,) = _graphs_of(update, other, x, pos)  # unmarked: an ordinary input
    assert not any(n.meta.get("static_input") for n in gm.graph.nodes)


def test_mark_static_address_takes_only_tensors():
    with pytest.raises(TypeError, match="expects a tensor"):
        sapwood_tracer.mark_static_address([1, 2])


def _scaled(x):
    made_on_this_line = x.sin() * 3
    return made_on_this_line


def test_nodes_carry_the_users_frames_as_a_stack_trace():
    def outer(x):
        return _scaled(x) + 1

    (gm,) = _graphs_of(outer, X)
    traces = {node.target: node.meta.get("stack_trace") for node in gm.graph.nodes}
    sin_trace = next(trace for target, trace in traces.items() if "sin" in str(target))
    assert sin_trace.index("in test_nodes_carry") < sin_trace.index("in _scaled")
    assert "return _scaled(x) + 1" in sin_trace
    assert "made_on_this_line = x.sin() * 3" in sin_trace
    assert __file__ in sin_trace
