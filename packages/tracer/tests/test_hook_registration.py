"""Module hooks registered inside the compiled function, locks, and class counters.

Libraries install hooks lazily, in the middle of a forward (Transformers' output capturing:
under a ``threading.Lock``, ``register_forward_hook`` on the submodules, then the same forward
calls them). The hook handle takes its id from ``RemovableHandle.next_id``, a class counter
that anything registering a hook moves (AOT autograd's tracing too), so the handle is made
again by the entry with the real counter, and the hook dicts are written back with its id.
A hook registered earlier in the trace runs when the trace calls the module, as eagerly.
"""

from __future__ import annotations

import collections
import copy
import threading
import time
import types

import pytest
import torch
from torch.utils.hooks import RemovableHandle

import sapwood
from sapwood_tracer import Unsupported


class Counting:
    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> object:
        self.graphs.append(gm)
        return gm.forward


def _scale_output(module: torch.nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
    return output * 2


def _record(seen: list):
    def hook(module: torch.nn.Module, args: tuple, output: torch.Tensor) -> None:
        seen.append(output)

    return hook


_install_lock = threading.Lock()


class LazyHooks(torch.nn.Module):
    """Installs a recording hook on each layer on its first call, under a lock."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])
        self.installed = False
        self.collected: list | None = None

    def _install(self) -> None:
        if self.installed:
            return
        with _install_lock:
            for layer in self.layers:
                layer.register_forward_hook(self._capture)
            self.installed = True

    def _capture(self, module: torch.nn.Module, args: tuple, output: torch.Tensor) -> None:
        if self.collected is not None:
            self.collected.append(output)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list]:
        self._install()
        self.collected = []
        for layer in self.layers:
            x = torch.relu(layer(x))
        out, self.collected = self.collected, None
        return x, out


def _hook_ids(module: torch.nn.Module) -> list[int]:
    return list(module._forward_hooks)


def test_hooks_installed_mid_forward_run_in_the_same_graph() -> None:
    eager_model = LazyHooks()
    model = copy.deepcopy(eager_model)
    counting = Counting()
    compiled = sapwood.compile(model, backend=counting)
    x = torch.randn(2, 4)
    fresh = copy.deepcopy(eager_model)
    for _ in range(3):
        expected, expected_seen = eager_model(x)
        got, got_seen = compiled(x)
        torch.testing.assert_close(got, expected)
        assert len(got_seen) == len(expected_seen) == 3
        for a, b in zip(got_seen, expected_seen):
            torch.testing.assert_close(a, b)
    # the first call installed the hooks for real, with ids of the real counter
    assert model.installed
    for layer in model.layers:
        (hook_id,) = _hook_ids(layer)
        assert hook_id < RemovableHandle.next_id
        assert layer._forward_hooks[hook_id] == model._capture
    ids = [i for layer in model.layers for i in _hook_ids(layer)]
    assert len(set(ids)) == 3 and ids == sorted(ids)  # made in the trace's order
    # first call (installs) and later calls (installed): each one graph
    assert len(counting.graphs) == 2
    sapwood.reset()
    report = sapwood.explain(fresh)(x)
    assert report.graph_count == 1 and not report.breaks and not report.eager_functions


def test_the_counter_moving_elsewhere_does_not_recompile() -> None:
    layer = torch.nn.Linear(3, 3)

    def scaled(x: torch.Tensor) -> torch.Tensor:
        handle = layer.register_forward_hook(_scale_output)
        y = layer(x)
        handle.remove()
        return y + layer(x)

    counting = Counting()
    compiled = sapwood.compile(scaled, backend=counting)
    x = torch.randn(2, 3)
    for _ in range(3):
        torch.nn.Linear(1, 1).register_forward_hook(_scale_output)  # moves the counter
        before = RemovableHandle.next_id
        expected = scaled(x)
        assert RemovableHandle.next_id == before + 1
        got = compiled(x)
        assert RemovableHandle.next_id == before + 2  # the handle was made again
        torch.testing.assert_close(got, expected)
        assert not layer._forward_hooks
    assert len(counting.graphs) == 1


def test_with_handle_and_prepend_order() -> None:
    layer = torch.nn.Linear(3, 3)
    layer.register_forward_hook(lambda m, a, o: o + 1)

    def ordered(x: torch.Tensor) -> torch.Tensor:
        with layer.register_forward_hook(_scale_output, prepend=True):
            inside = layer(x)  # (x W + b) * 2 + 1
        return inside - layer(x)

    x = torch.randn(2, 3)
    compiled = sapwood.compile(ordered, backend=Counting())
    torch.testing.assert_close(compiled(x), ordered(x))
    assert len(layer._forward_hooks) == 1


def test_a_handle_kept_is_the_real_one() -> None:
    class Keeps(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = torch.nn.Linear(3, 3)
            self.handles: list = []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if not self.handles:
                self.handles.append(self.inner.register_forward_hook(_scale_output))
            return self.inner(x)

    eager_model = Keeps()
    model = copy.deepcopy(eager_model)
    x = torch.randn(2, 3)
    compiled = sapwood.compile(model, backend=Counting())
    torch.testing.assert_close(compiled(x), eager_model(x))
    (handle,) = model.handles
    assert type(handle) is RemovableHandle
    assert list(model.inner._forward_hooks) == [handle.id]
    handle.remove()
    assert not model.inner._forward_hooks
    eager_model.handles[0].remove()
    torch.testing.assert_close(compiled(x), eager_model(x))


def test_a_hook_recorded_in_a_list_across_calls() -> None:
    layer = torch.nn.Linear(3, 3)
    seen: list = []

    def watched(x: torch.Tensor) -> torch.Tensor:
        handle = layer.register_forward_hook(_record(seen))
        y = layer(x).sum()
        handle.remove()
        return y

    x = torch.randn(2, 3)
    compiled = sapwood.compile(watched, backend=Counting())
    got = compiled(x)
    torch.testing.assert_close(got, watched(x))
    assert len(seen) == 2
    torch.testing.assert_close(seen[0], seen[1])


def test_a_backward_hook_registered_in_the_trace_is_never_skipped() -> None:
    layer = torch.nn.Linear(3, 3)
    grads: list = []

    def with_backward_hook(x: torch.Tensor) -> torch.Tensor:
        handle = layer.register_full_backward_hook(lambda m, gi, go: grads.append(go[0]))
        y = layer(x).sum()
        handle.remove()
        return y

    x = torch.randn(2, 3, requires_grad=True)
    compiled = sapwood.compile(with_backward_hook, backend=Counting())
    compiled(x).backward()
    with_backward_hook(x).backward()
    assert len(grads) == 2
    torch.testing.assert_close(grads[0], grads[1])


def test_a_lock_block_is_traced_and_the_lock_left_free() -> None:
    lock = threading.Lock()
    state = {"calls": 0}

    def locked(x: torch.Tensor) -> torch.Tensor:
        with lock:
            state["calls"] += 1
            y = x * state["calls"]
        return y + 1

    counting = Counting()
    compiled = sapwood.compile(locked, backend=counting)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * 1 + 1)
    torch.testing.assert_close(compiled(x), x * 2 + 1)
    assert state["calls"] == 2 and not lock.locked()
    report = sapwood.explain(locked)(x)
    assert report.graph_count == 1 and not report.breaks
    assert any("lock_held" in g for _, guards in report.guards for g in guards)


def test_a_lock_held_by_another_thread_makes_the_call_wait() -> None:
    lock = threading.Lock()
    log: list[str] = []

    def locked(x: torch.Tensor) -> torch.Tensor:
        with lock:
            log.append("block")
            y = x + 1
        return y * 2

    compiled = sapwood.compile(locked, backend=Counting())
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), locked(x))
    lock.acquire()

    def release_later() -> None:
        time.sleep(0.2)
        log.append("released")
        lock.release()

    other = threading.Thread(target=release_later)
    other.start()
    torch.testing.assert_close(compiled(x), torch.full((2,), 4.0))  # waits for the lock
    other.join()
    assert log == ["block", "block", "released", "block"]
    assert not lock.locked()


def test_a_break_inside_a_lock_block_runs_its_eager_part_holding_the_lock() -> None:
    lock = threading.Lock()
    seen: list[bool] = []

    def locked(x: torch.Tensor) -> torch.Tensor:
        y = x + 1
        with lock:
            seen.append(lock.locked())  # (a graph break: run eagerly, inside the lock)
            y = y * 2
        return y - 1

    x = torch.ones(2)
    torch.testing.assert_close(sapwood.compile(locked, backend=Counting())(x), locked(x))
    assert seen == [True, True] and not lock.locked()
    report = sapwood.explain(locked)(x)
    assert not report.eager_functions and len(report.breaks) == 1


def test_lock_methods_by_name_are_a_graph_break() -> None:
    lock = threading.Lock()

    def manual(x: torch.Tensor) -> torch.Tensor:
        lock.acquire()
        try:
            return x + 1
        finally:
            lock.release()

    x = torch.randn(3)
    torch.testing.assert_close(sapwood.compile(manual, backend=Counting())(x), x + 1)
    assert not lock.locked()
    report = sapwood.explain(manual)(x)
    assert not report.eager_functions
    assert [b.reason for b in report.breaks] == ["attribute 'acquire' of a threading.Lock"]


class Registry:
    made = 0


class Named(Registry):
    pass


def test_a_class_counter_is_written_back_and_read_through_instances() -> None:
    def bump(x: torch.Tensor) -> tuple[torch.Tensor, int]:
        Registry.made += 1
        Named.made = Named.made  # (an own attribute of the subclass from here on)
        Registry.made += 1
        return x * Registry.made, Named().made

    Registry.made = 0
    vars(Named).get("made") is not None and delattr(Named, "made")
    expected = bump(torch.ones(2))
    after_eager = (Registry.made, Named.made)
    Registry.made = 0
    delattr(Named, "made")
    compiled = sapwood.compile(bump, backend=Counting())
    got = compiled(torch.ones(2))
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1]
    assert (Registry.made, Named.made) == after_eager


def test_assigning_a_function_to_a_class_is_refused_not_wrong() -> None:
    class Patched:
        def value(self) -> int:
            return 1

    def patch(x: torch.Tensor) -> torch.Tensor:
        Patched.value = lambda self: 2
        return x * Patched().value()

    compiled = sapwood.compile(patch, backend=Counting())
    torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 2.0))
    assert Patched().value() == 2


def test_an_ordered_dict_passed_in_is_written_back_in_order() -> None:
    def reorder(table: collections.OrderedDict, x: torch.Tensor) -> torch.Tensor:
        table["c"] = 3
        table.move_to_end("a")
        del table["b"]
        table.move_to_end("c", last=False)
        return x + len(table)

    a = collections.OrderedDict(a=1, b=2, d=4)
    b = collections.OrderedDict(a=1, b=2, d=4)
    counting = Counting()
    torch.testing.assert_close(
        sapwood.compile(reorder, backend=counting)(a, torch.ones(1)), reorder(b, torch.ones(1))
    )
    assert list(a.items()) == list(b.items()) == [("c", 3), ("d", 4), ("a", 1)]
    assert a == b and len(counting.graphs) == 1


@pytest.mark.parametrize("fullgraph", [True, False])
def test_fullgraph_lazily_hooked_module(fullgraph: bool) -> None:
    eager_model = LazyHooks()
    model = copy.deepcopy(eager_model)
    compiled = sapwood.compile(model, backend=Counting(), fullgraph=fullgraph)
    x = torch.randn(2, 4)
    got, expected = compiled(x), eager_model(x)
    torch.testing.assert_close(got[0], expected[0])
    assert len(got[1]) == 3


def test_a_global_module_hook_registered_in_the_trace_is_never_skipped() -> None:
    from torch.nn.modules.module import register_module_forward_hook

    layer = torch.nn.Linear(3, 3)

    def doubled(x: torch.Tensor) -> torch.Tensor:
        handle = register_module_forward_hook(_scale_output)
        y = layer(x)
        handle.remove()
        return y

    x = torch.randn(2, 3)
    torch.testing.assert_close(sapwood.compile(doubled, backend=Counting())(x), layer(x) * 2)
    assert not torch.nn.modules.module._global_forward_hooks


def test_a_lock_taken_again_inside_its_block_is_refused_not_skipped() -> None:
    lock = threading.Lock()
    holder = types.SimpleNamespace(lock=lock)  # (the same lock through another source)

    def twice(x: torch.Tensor) -> torch.Tensor:
        with lock:
            y = x + 1
            with holder.lock:  # eagerly: waits forever
                y = y * 2
        return y

    with pytest.raises(Unsupported, match=r"threading\.Lock that is held"):
        sapwood.compile(twice, backend=Counting(), fullgraph=True)(torch.ones(2))
    assert not lock.locked()
