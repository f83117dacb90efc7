"""A hypothesis state machine over the runtime: random calls, kept and dropped outputs, steps.

Every function is wrapped twice: once plain, once with all its outputs declared reusable (the
same tensor objects come back once they are free), so both ways of handing out outputs meet
the same random sequences.

Checked after every step: each output still held and not invalidated equals the value eager
PyTorch computed when it was produced; outputs of an earlier step are refused after
``mark_step_begin`` and the next call; after ``reset`` the pool holds no live block.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import sapwood_cudagraph_trees as trees
from sapwood_cudagraph_trees import _api
from sapwood_cudagraph_trees._simulated import SimulatedDeviceLayer

SIM_INDEX = 7


def f_pointwise(xs):
    return [(xs[0] * 2).sin() + 1]


def f_views(xs):
    y = xs[0] * 3 - 1
    return [y, y[1:], y.view(2, 2)[0]]


def f_affine(xs):  # xs[0] is a static weight
    return [xs[1] * xs[0] + 0.5]


def f_reduce(xs):
    return [xs[0].cumsum(0), xs[0] + xs[0].sum()]


FUNCTIONS = [f_pointwise, f_views, f_affine, f_reduce]
# (function, outputs declared reusable): each function plain and with every output reusable
WRAPPINGS = [(fn, reuse) for reuse in ((), (0, 1, 2)) for fn in FUNCTIONS]
# which outputs of a call are kept: mostly dropped, so that graphs replay often
KEEP = st.lists(st.sampled_from([False, False, False, True]), min_size=3, max_size=3)


def machine_for(device: torch.device, index: int, check_stale):
    class TreeMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            trees.reset()
            self.weight = torch.randn(4, device=device)
            self.wrapped = [
                trees.cudagraphify(
                    fn,
                    [self.weight, torch.ones(4, device=device)]
                    if fn is f_affine
                    else [torch.ones(4, device=device)],
                    (0,) if fn is f_affine else (),
                    device_index=index,
                    mode="inference",
                    max_recordings=4,
                    reusable_output_idxs=reuse,
                )
                for fn, reuse in WRAPPINGS
            ]
            self.kept: list[tuple[torch.Tensor, torch.Tensor]] = []
            self.doomed: list[torch.Tensor] = []
            self.stale: list[torch.Tensor] = []
            self.step_pending = False
            self.last_call = 0

        def _input(self, source: int) -> torch.Tensor:
            usable = [t for t, _ in self.kept if t.shape == (4,)]
            if source and usable:
                return usable[source % len(usable)]
            return torch.randn(4, device=device)

        @rule(
            which=st.integers(0, len(WRAPPINGS) - 1),
            source=st.integers(0, 5),
            keep=KEEP,
        )
        def call(self, which: int, source: int, keep: list[bool]) -> None:
            self.last_call = which
            x = self._input(source)
            fn = WRAPPINGS[which][0]
            args = [self.weight, x] if fn is f_affine else [x]
            expected = [e.clone() for e in fn(list(args))]
            outs = self.wrapped[which](list(args))
            if self.step_pending:
                self.step_pending = False
                self.stale.extend(self.doomed)
                self.doomed = []
            for out, exp, k in zip(outs, expected, keep):
                torch.testing.assert_close(out, exp)
                if k:
                    self.kept.append((out, exp))

        @rule(
            source=st.integers(0, 5),
            keep=KEEP,
        )
        def call_again(self, source: int, keep: list[bool]) -> None:
            # the same function again: warm-up, recording and replays of one key in a row
            self.call(self.last_call, source, keep)

        @rule(index=st.integers(0, 20))
        def drop(self, index: int) -> None:
            if self.kept:
                self.kept.pop(index % len(self.kept))

        @rule()
        def drop_all(self) -> None:
            # with nothing kept, the next calls replay: reused outputs are handed out again
            self.kept = []

        @rule()
        def step(self) -> None:
            trees.mark_step_begin()
            self.step_pending = True
            self.doomed.extend(t for t, _ in self.kept)
            self.kept = []

        @rule()
        def generation(self) -> None:
            trees.new_generation()

        @invariant()
        def kept_outputs_equal_eager(self) -> None:
            for out, exp in self.kept:
                torch.testing.assert_close(out, exp)

        @invariant()
        def stale_outputs_are_refused(self) -> None:
            for t in self.stale:
                check_stale(t)
            self.stale = []

        def teardown(self) -> None:
            runtime = _api._runtimes.get(index)
            self.kept = []
            self.doomed = []
            trees.reset()
            if runtime is not None:
                assert runtime.blocks_left_at_reset == 0

    return TreeMachine


def test_state_machine_on_the_simulated_device() -> None:
    layer = SimulatedDeviceLayer()
    _api._install_layer(SIM_INDEX, lambda: layer)

    def check_stale(t: torch.Tensor) -> None:
        assert t.untyped_storage()._cdata in layer.invalidated

    try:
        machine = machine_for(torch.device("cpu"), SIM_INDEX, check_stale)
        run_state_machine_as_test(machine, settings=settings(stateful_step_count=60))
    finally:
        _api._uninstall_layer(SIM_INDEX)


@pytest.mark.gpu
def test_state_machine_on_the_gpu() -> None:
    def check_stale(t: torch.Tensor) -> None:
        with pytest.raises(RuntimeError, match="sapwood-cudagraph-trees"):
            (t + 1).cpu()

    machine = machine_for(torch.device("cuda", 0), 0, check_stale)
    try:
        run_state_machine_as_test(
            machine, settings=settings(stateful_step_count=25, max_examples=25)
        )
    finally:
        trees.reset()
