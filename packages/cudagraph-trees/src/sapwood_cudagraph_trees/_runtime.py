"""The per-device runtime: when a call warms up, records, replays, or runs eagerly.

State machine of one function and one input key: the first call *warms up* (runs eagerly with its
allocations in the device's pool), the second *records* a graph, later calls *replay* a recorded
node whose address checks and liveness rule pass (see ``_tree``); when none passes, a new node is
recorded. A function or a key that cannot be captured runs eagerly, and the reason is kept.

Invariants:

* One :class:`DeviceRuntime` (one tree, one pool) per device; every function of that device,
  inference, forward or backward, lives in it, so forward and backward graphs share the pool.
* A replay never writes over a live storage: that is the liveness rule. Storages handed out
  earlier stay valid until they die, also across generations, so ``g(f(x))`` of separately
  wrapped functions and repeated calls with earlier outputs still referenced both work.
* Outputs become invalid on purpose only when a step begins: explicitly, at the next call after
  ``mark_step_begin()`` (the outputs of earlier steps lose their memory, except forward outputs,
  which hold activations for a backward that has not run yet), or implicitly, as in torch, when
  a new top-level call starts after a training step ended (every forward call's backward ran):
  then the forward and inference outputs of earlier steps lose their memory, the loss a loop
  still holds included, while gradients (backward outputs, which optimizers keep) stay valid.
  Reading an invalidated output raises an error naming the function and the user's line.
* Recordings per function are capped; the least recently used node is evicted first, so the
  number of graphs and the pool's memory stay bounded.
* A call's key is its inputs' metadata and non-tensor values; for a layout-guarded function
  (the caller fixes tensor layouts per non-tensor values) it is the non-tensor values alone.
* Outputs are new tensor objects on each replay, except those the caller declared reusable
  (``reusable_output_idxs``) whose storage only such outputs view: those are the node's
  templates themselves, handed out again once the replay rule has found them free.
"""

from __future__ import annotations

import collections
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ._calls import (
    input_key,
    is_host_scalar,
    stale_message,
    uncapturable_output,
    value_key,
)
from ._checkpoint import PoolState, sync_allocator
from ._device import DeviceLayer
from ._entries import refresh_entries, release_entries
from ._layout import (
    COPIED,
    POOL,
    STATIC,
    InputCopy,
    OutputLayout,
    copy_inputs,
    overlaps_itself,
    span_elements,
)
from ._liveness import (
    CAN_HAND_OUT,
    LiveStorage,
    LiveStorages,
    enable_cached_tensors,
)
from ._regimes import CaptureRegimes, capture_key, drifted_outputs, output_devices
from ._tree import Tree, TreeNode


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of a warning raised by this function's caller that names the
    innermost frame outside sapwood's packages and generated code (the user's call of the
    compiled model), however many layers of a front end called the tree."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and (
        frame.f_code.co_filename.startswith("<sapwood ")
        or str(frame.f_globals.get("__name__", "")).partition(".")[0].startswith("sapwood")
    ):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


MODES = ("inference", "forward", "backward")


def _released() -> None:
    raise RuntimeError("sapwood-cudagraph-trees: replay of an evicted graph (a runtime bug)")


_UNSEEN = object()


class DeviceRuntime:
    """Tree, pool and live storages of one device."""

    def __init__(self, index: int, layer: DeviceLayer) -> None:
        self.index = index
        self.layer = layer
        self.tree = Tree()
        self.live = LiveStorages()
        self.pool = PoolState()
        self.functions: list[weakref.ref[TreeFunction]] = []
        self.pending_step = False
        #: whether the pending step began explicitly (mark_step_begin keeps forward outputs)
        self.step_keeps_forward = True
        #: forward calls whose backward has not run, and whether a backward ran since the
        #: last step began: a training step ended when both say so (torch's implicit rule)
        self.forwards_pending = 0
        self.backward_ran = False
        # blocks still allocated in the pool when reset() had released everything (0 unless leaked)
        self.blocks_left_at_reset = 0
        #: which tensors must meet a kernel that runs the way their producer ran
        self.regimes = CaptureRegimes(layer.device)

    # ------------------------------------------------------------------ generations
    def start_step(self) -> None:
        """Invalidate outputs of earlier steps; called by the first call after a step began."""
        if self.step_keeps_forward:
            kept, why = "forward", "mark_step_begin() started a new step"
        else:
            kept, why = "backward", "a new training step began (the previous step's backward ran)"
        self.pending_step = False
        self.step_keeps_forward = True
        live = self.live
        for entry in live:
            if entry.mode == kept:  # kept whether alive or not: no need to look
                continue
            if not entry.alive():
                # a node's own dead storage stays registered: replays skip re-registering it
                if not entry.persistent:
                    live.remove(entry)
                continue
            self._invalidate(entry, why)
        self.tree.current = None

    def end_training_step_if_done(self) -> None:
        """At a new top-level call: begin a step if the last one ended (its backward ran)."""
        if self.backward_ran and self.forwards_pending == 0:
            self.backward_ran = False
            self.pending_step = True
            self.step_keeps_forward = False

    def end_path(self) -> None:
        self.tree.current = None

    def _invalidate(self, entry: LiveStorage, why: str) -> None:
        self.layer.invalidate(entry.handle, stale_message(entry, why, entry.mode))
        entry.detach_templates()
        self.live.remove(entry)

    def reset(self) -> None:
        self.regimes = CaptureRegimes(self.layer.device)
        self.live.prune()
        for entry in self.live:
            self._invalidate(entry, "reset() freed every graph and the pool")
        for node in list(self.tree.nodes()):
            release_entries(self.live, node)
            self.layer.release_graph(node.graph)
        self.tree.clear()
        for ref in self.functions:
            fn = ref()
            if fn is not None:
                fn.forget_recordings()
        self.blocks_left_at_reset = len(self.layer.live_blocks())
        self.layer.release_pool()
        self.pool = PoolState()
        self.pending_step = False
        # forwards whose backward never ran (evaluated with grad on, then dropped) would keep
        # every later training step from beginning: the count starts again with the pool
        self.step_keeps_forward = True
        self.forwards_pending = 0
        self.backward_ran = False

    # ------------------------------------------------------------------ the three ways to run
    def replay(self, fn: TreeFunction, node: TreeNode, inputs: list[Any]) -> list[Any]:
        # the hot path: keep it flat, every line here is paid on each replay
        copies = node.copies
        if copies:
            if len(copies) == 1 and not copies[0].span:
                copies[0].target.copy_(inputs[copies[0].index])
            else:
                copy_inputs(copies, inputs)
        node.replay()
        if not node.entries_ok:
            self._refresh_entries(fn, node)
        for entry in node.entries:  # handed out again below: alive until a check says not
            entry.dead = False  # type: ignore[union-attr]
        if node.handed_groups:
            # autograd honours the runtime's cached tensors only while this is on, and torch's
            # own tree runtime turns it off when it resets
            enable_cached_tensors()
        base, fresh, passed, viewed = node.recipe  # type: ignore[misc]
        outputs = base.copy()
        for pos, template in fresh:
            outputs[pos] = template.detach()
        for pos, i in passed:
            outputs[pos] = inputs[i]
        if viewed:
            tensor_at = self.layer.tensor_at
            for pos, i, rel, item, dtype, size, stride in viewed:
                x = inputs[i]
                offset = (x.storage_offset() * x.itemsize + rel) // item
                outputs[pos] = tensor_at(x.untyped_storage(), dtype, offset, size, stride)
        self.tree.current = node
        pool = self.pool
        pool.in_sync = False
        pool.checkpoint = node.checkpoint
        node.replays += 1
        fn.replays += 1
        return outputs

    def _refresh_entries(self, fn: TreeFunction, node: TreeNode) -> None:
        refresh_entries(self.live, self.layer, node)

    def warmup(self, fn: TreeFunction, inputs: list[Any]) -> list[Any]:
        """Run ``fn`` eagerly in the pool. ``inputs`` is the caller's list, handed on and not
        read afterwards: a boxed model (Inductor's) clears it and frees each input (a
        backward's saved activations) after its last use, as an eager run does."""
        sync_allocator(self.layer, self.pool, self.live)
        input_ptrs = {x.untyped_storage().data_ptr() for x in inputs if isinstance(x, torch.Tensor)}
        outputs = list(self.layer.run_in_pool(fn.model, inputs))
        self.layer.clear_workspaces()
        self.regimes.mark_eager_outputs(outputs, fn.mode)
        odd = uncapturable_output(outputs)
        if odd is not None:  # the outputs are right; graphs of this function would not be
            fn.eager_reason = odd
        fn.eager_devices = output_devices(outputs)
        ranges = self.layer.pool_ranges()
        traces = fn.stack_traces
        seen: set[int] = set()
        for i, out in enumerate(outputs):
            if (
                not isinstance(out, torch.Tensor)
                or not self.layer.accepts(out)
                or out.layout != torch.strided
            ):
                continue
            storage = out.untyped_storage()
            ptr = storage.data_ptr()
            if ptr in seen or ptr in input_ptrs or not any(a <= ptr < b for a, b in ranges):
                continue
            seen.add(ptr)
            trace = traces[i] if traces is not None and i < len(traces) else None
            self.live.add(storage, fn.name, i, trace, fn.mode)
        fn.warmups += 1
        return outputs

    def record(self, fn: TreeFunction, key: tuple[Any, ...], inputs: list[Any]) -> list[Any]:
        layer = self.layer
        host_made = self.regimes.eager_only_input(inputs)
        if host_made is not None:  # this call only: the next may bring the captured kind
            return fn.run_eagerly(
                inputs,
                f"input {host_made} is a CPU tensor made by a forward that ran eagerly (such as "
                "attention's dropout seed), which a captured kernel would read on the device",
            )
        sync_allocator(layer, self.pool, self.live)
        self.live.prune()
        held = self.live.sizes()
        kinds: list[int] = []
        host_values = []
        for i, x in enumerate(inputs):
            if is_host_scalar(x, layer):
                kinds.append(-1)  # passed as it is; its value is part of the graph
                host_values.append((i, x.item()))
            elif not isinstance(x, torch.Tensor):
                kinds.append(-1)
            elif i in fn.static_input_idxs:
                kinds.append(STATIC)
            elif self.live.contains(x.untyped_storage().data_ptr()):
                kinds.append(POOL)
            else:
                kinds.append(COPIED)
        copied = [i for i, k in enumerate(kinds) if k == COPIED]
        spans = [span_elements(inputs[i]) for i in copied]
        buffers = layer.allocate([max(1, n) * inputs[i].itemsize for i, n in zip(copied, spans)])
        recording_inputs = list(inputs)
        plans: list[tuple[int, int, int, int]] = []  # index, pointer, span, flat
        for i, n, buf in zip(copied, spans, buffers):
            x = inputs[i]
            flat = overlaps_itself(x)
            view = layer.tensor_at(buf.untyped_storage(), x.dtype, 0, x.shape, x.stride())
            if n:
                target = view.as_strided((n,), (1,), 0) if flat else view
                target.copy_(x.as_strided((n,), (1,), x.storage_offset()) if flat else x)
            recording_inputs[i] = view
            plans.append((i, buf.data_ptr(), n if flat else 0, max(1, n) * x.itemsize))
        layer.clear_workspaces()
        reserved_before = layer.reserved_bytes()
        try:
            graph, captured = layer.capture(fn.model, list(recording_inputs))
        except Exception as exc:  # anything that cannot be captured runs eagerly
            reason = fn.give_up(f"capture failed: {type(exc).__name__}: {exc}")
            return fn.run_eagerly(inputs, reason)
        captured = list(captured)
        odd = uncapturable_output(captured)
        if odd is not None:
            layer.release_graph(graph)
            return fn.run_eagerly(inputs, fn.give_up(odd))
        drifted = drifted_outputs(fn.eager_devices, captured)
        layout = OutputLayout.analyze(captured, recording_inputs, fn.constants, layer.pool_ranges())
        layer.replay(graph)
        outputs = layout.outputs(inputs, layer, layout.captured(captured))
        self.regimes.capture_only.update(capture_key(outputs[i]) for i in drifted)
        copies = [self._copy_target(inputs[i], ptr, span, nbytes) for i, ptr, span, nbytes in plans]
        for copy, (i, *_rest) in zip(copies, plans):
            copy.index = i
        del buffers, recording_inputs, captured
        layer.clear_workspaces()
        checkpoint = layer.checkpoint()
        node = TreeNode(
            id=self.tree.new_id(),
            function_name=fn.name,
            function_id=fn.id,
            mode=fn.mode,
            key=key,
            signature=key if not fn.layout_guarded else input_key(inputs),
            graph=graph,
            held=held,
            checkpoint=checkpoint,
            replay=layer.replayer(graph),
            address_checks=tuple(
                (i, inputs[i].data_ptr()) for i, k in enumerate(kinds) if k in (STATIC, POOL)
            ),
            static_indices=fn.static_input_idxs,
            copies=copies,
            layout=layout,
            recorded_bytes=layout.output_bytes,
            host_values=tuple(host_values),
        )
        node.pool_growth_bytes = max(0, layer.reserved_bytes() - reserved_before)
        traces = fn.stack_traces
        node.output_tags = [
            (i, traces[i] if traces is not None and i < len(traces) else None)
            for i in layout.group_output_indices()
        ]
        node.entries = [None] * len(layout.storages)
        node.plan = layout.replay_plan()
        if CAN_HAND_OUT and fn.reusable_outputs:
            node.handed_groups = layout.groups_only_in(fn.reusable_outputs)
        for (ptr, _), (index, trace) in zip(layout.storages, node.output_tags):
            storage = next(
                o.untyped_storage()
                for o in outputs
                if isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() == ptr
            )
            self.live.add(storage, fn.name, index, trace, fn.mode)
        self.tree.attach(node)
        self.pool.in_sync = True
        fn.adopt(node)
        return outputs

    def _copy_target(self, x: torch.Tensor, ptr: int, span: int, nbytes: int) -> InputCopy:
        storage = self.layer.storage_at(ptr, nbytes)
        target = self.layer.tensor_at(storage, x.dtype, 0, x.shape, x.stride())
        if span:
            target = target.as_strided((span,), (1,), 0)
        return InputCopy(-1, target, span)

    def evict(self, node: TreeNode) -> None:
        release_entries(self.live, node)
        self.tree.detach(node)
        self.layer.release_graph(node.graph)
        node.graph = None
        node.replay = _released


class TreeFunction:
    """The boxed callable ``cudagraphify`` returns (``list -> list``)."""

    _next_id = 0

    def __init__(
        self,
        runtime: DeviceRuntime,
        model: Callable[[list[Any]], Any],
        static_input_idxs: Sequence[int],
        mode: str,
        stack_traces: Sequence[str | None] | None,
        constants: Sequence[torch.Tensor],
        mutated_input_idxs: Sequence[int],
        name: str,
        max_recordings: int,
        max_static_rerecords: int,
        value_positions: Sequence[int] | None = None,
        reusable_output_idxs: Sequence[int] = (),
    ) -> None:
        TreeFunction._next_id += 1
        self.id = TreeFunction._next_id
        self.runtime = runtime
        self.model = model
        self.static_input_idxs = frozenset(static_input_idxs)
        self.mode = mode
        self.stack_traces = list(stack_traces) if stack_traces is not None else None
        self.constants = list(constants)
        self.mutated_input_idxs = tuple(mutated_input_idxs)
        self.reusable_outputs = frozenset(reusable_output_idxs)
        self.name = name
        self.max_recordings = max_recordings
        self.max_static_rerecords = max_static_rerecords
        # layout-guarded: the caller fixes every tensor input's metadata given the values at
        # these positions (its non-tensor inputs), so calls are keyed on those values alone
        self.layout_guarded = value_positions is not None
        self._value_positions = tuple(value_positions or ())
        self.eager_reason: str | None = None
        self.eager_devices: tuple[Any, ...] | None = None  # of the outputs, at warm-up
        self.fallbacks: collections.Counter[str] = collections.Counter()
        self.warmups = self.recordings = self.replays = self.evictions = 0
        self.recording_seconds = 0.0  # (recording attempts, those that ran eagerly included)
        self.static_rerecords = self.host_rerecords = 0
        self._lru: collections.OrderedDict[int, TreeNode] = collections.OrderedDict()
        self._by_key: dict[tuple[Any, ...], list[TreeNode]] = {}
        self._warmed: set[tuple[Any, ...]] = set()
        self._key_status: dict[tuple[Any, ...], str | None] = {}
        self._warned: set[int] = set()
        self._last_key: tuple[Any, ...] | None = None
        self._last_nodes: list[TreeNode] | None = None
        runtime.functions.append(weakref.ref(self))

    # ------------------------------------------------------------------ bookkeeping
    def touch(self, node: TreeNode, nodes: list[TreeNode]) -> None:
        """``node`` just replayed: most recently used, and first tried among ``nodes``, the
        recordings of its key (passed in: hashing a key of many inputs is not free)."""
        self._lru.move_to_end(node.id)
        if nodes[0] is not node:
            nodes.remove(node)
            nodes.insert(0, node)

    def adopt(self, node: TreeNode) -> None:
        self._last_key = self._last_nodes = None
        self.recordings += 1
        self._lru[node.id] = node
        self._by_key.setdefault(node.key, []).insert(0, node)

    def nodes(self) -> list[TreeNode]:
        return list(self._lru.values())

    def forget_recordings(self) -> None:
        self._last_key = self._last_nodes = None
        self._lru.clear()
        self._by_key.clear()
        self._warmed.clear()

    def _evict_one(self) -> None:
        current = self.runtime.tree.current
        for node in self._lru.values():
            if node is not current:
                break
        else:
            return
        self._last_key = self._last_nodes = None
        del self._lru[node.id]
        nodes = self._by_key[node.key]
        nodes.remove(node)
        if not nodes:
            del self._by_key[node.key]
        self.runtime.evict(node)
        self.evictions += 1

    def give_up(self, reason: str) -> str:
        """From now on this function runs eagerly, for ``reason``: said once, in a warning at
        the caller's line (never a silent fallback), and in ``tree_info``."""
        self.eager_reason = reason
        warnings.warn(
            f"'{self.name}' runs eagerly from now on, without CUDA graphs: {reason}; the "
            "tree's other functions still replay",
            stacklevel=_caller_stacklevel(),
        )
        return reason

    def run_eagerly(self, inputs: list[Any], reason: str) -> list[Any]:
        self.fallbacks[reason] += 1
        runtime = self.runtime
        outputs = list(self.model(runtime.regimes.host_copies(inputs)))
        runtime.regimes.mark_eager_outputs(outputs, self.mode)
        return outputs

    def _classify(self, inputs: Sequence[Any]) -> str | None:
        """Why inputs of this key must run eagerly (None when they can be graphed)."""
        layer = self.runtime.layer
        hosts = {i for i, x in enumerate(inputs) if is_host_scalar(x, layer)}
        for i in hosts:
            if i in self.mutated_input_idxs:
                return f"input {i} is a CPU scalar that the function writes to"
        devices = {
            x.device for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and i not in hosts
        }
        if len(devices) > 1:
            names = ", ".join(sorted(str(d) for d in devices))
            return f"inputs are on several devices ({names}); one graph runs on one device"
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and i not in hosts and not layer.accepts(x):
                if x.layout != torch.strided:
                    return f"input {i} is a {x.layout} tensor, which graphs cannot take"
                return f"input {i} is on {x.device}, not on {layer.device}"
        for i in self.mutated_input_idxs:
            if i in self.static_input_idxs:
                continue
            if i not in self._warned:
                self._warned.add(i)
                warnings.warn(
                    f"'{self.name}' mutates input {i}, which is not a static input; it runs "
                    "eagerly. Mark it static (a parameter or buffer) to graph it.",
                    stacklevel=_caller_stacklevel(),
                )
            return f"input {i} is mutated and is not a static input"
        return None

    # ------------------------------------------------------------------ the call
    def __call__(self, inputs: list[Any]) -> list[Any]:
        runtime = self.runtime
        if runtime.pending_step:
            runtime.start_step()
        mode = self.mode
        if mode == "forward":
            runtime.forwards_pending += 1
        elif mode == "backward":
            runtime.forwards_pending = max(0, runtime.forwards_pending - 1)
            runtime.backward_ran = True
        if self.eager_reason is not None:
            return self.run_eagerly(inputs, self.eager_reason)
        try:
            if self.layout_guarded:
                key = value_key(inputs, self._value_positions)
            else:
                key = input_key(inputs)
            if key == self._last_key:  # cheaper than hashing the key again
                nodes = self._last_nodes
            else:
                nodes = self._by_key.get(key)
                self._last_key, self._last_nodes = key, nodes
        except (RuntimeError, TypeError, IndexError) as exc:
            return self.run_eagerly(inputs, f"inputs cannot be keyed: {exc}")
        live = runtime.live  # no prune here: the replay rule checks life itself
        static_moved = host_changed = False
        if nodes is not None:  # only graphable keys have nodes
            for node in nodes:
                why = node.mismatch(inputs, live)
                if why is None:
                    outputs = runtime.replay(self, node, inputs)
                    self.touch(node, nodes)
                    return outputs
                static_moved = static_moved or why == "static"
                host_changed = host_changed or why == "host"
        else:
            # a layout-guarded key leaves devices out: a CPU seed and its captured device
            # counterpart share one (see ``drifted_outputs``)
            status_key = key if not self.layout_guarded else (key, output_devices(inputs))
            status = self._key_status.get(status_key, _UNSEEN)
            if status is _UNSEEN:
                status = self._key_status[status_key] = self._classify(inputs)
            if status is not None:
                return self.run_eagerly(inputs, status)  # type: ignore[arg-type]
        if key not in self._warmed:
            self._warmed.add(key)
            # a warm-up runs eagerly, where kernels read capture-only tensors on the host
            if not runtime.regimes.has_capture_only(inputs):
                return runtime.warmup(self, inputs)
        if static_moved:
            self.static_rerecords += 1
            if self.static_rerecords > self.max_static_rerecords:
                reason = self.give_up(
                    f"static inputs changed address {self.static_rerecords} times "
                    f"(limit {self.max_static_rerecords}); pass stable parameters or do not "
                    "mark the changing inputs static (a compiler marks the inputs a graph "
                    "writes in place static too)"
                )
                return self.run_eagerly(inputs, reason)
        if host_changed:
            self.host_rerecords += 1
            if self.host_rerecords > self.max_static_rerecords:
                reason = self.give_up(
                    f"CPU scalar inputs changed value {self.host_rerecords} times (limit "
                    f"{self.max_static_rerecords}); a graph holds the value it was recorded "
                    "with, so pass a changing scalar as a tensor on the graph's device"
                )
                return self.run_eagerly(inputs, reason)
        while len(self._lru) >= self.max_recordings and len(self._lru) > 0:
            before = len(self._lru)
            self._evict_one()
            if len(self._lru) == before:
                break
        started = time.perf_counter()
        try:
            return runtime.record(self, key, inputs)
        finally:
            self.recording_seconds += time.perf_counter() - started
