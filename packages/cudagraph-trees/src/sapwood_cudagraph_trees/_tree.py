"""The tree of recorded graphs of one device.

A *node* is one recorded graph of one function for one input key. Its parent is the node that
ran last before it was recorded (the head of the current *path*); a root was recorded at the
start of a path. Paths end at a generation (``mark_step_begin`` or ``new_generation``): the next
recording starts a new root.

Invariants:

* Every node keeps ``held``: the live pool storages (pointer to bytes) at the moment it was
  captured. The graph writes only into memory free at that moment, so a node may replay only when
  all storages live now lie inside ``held`` -- wherever the node sits in the tree. Children of the
  head of the path are tried first because they usually match.
* Every node keeps the allocator's checkpoint taken right after its capture: its blocks are
  ``held`` plus the node's own outputs. After a replay of the node, the storages live in the pool
  are a subset of those blocks, which is what lets a later recording restore that checkpoint.
* Nodes are evicted least-recently-used first, per function; an evicted node's children are
  re-attached to its parent so the picture stays a tree.
* ``fit_checks`` (the addresses of registered storages outside ``held``) is a cache of the
  registry's addresses as they were at ``LiveStorages.version`` ``fit_version``; it is rebuilt
  whenever the version moved.
  ``entries_ok`` is true while every entry of ``entries`` is registered with its templates and
  ``recipe`` is built from them; anything that breaks that for one entry clears it and names the
  entry's group in ``stale`` (see ``_liveness``), so the next replay mends that group alone.
  A group whose templates were dropped has its places in ``recipe`` emptied at once: the
  runtime keeps no reference to storages it no longer holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ._device import PoolCheckpoint
from ._layout import InputCopy, OutputLayout
from ._liveness import LiveStorage, LiveStorages, all_dead

# data pointers of many inputs compared in one C++ call (CUDA builds of torch); None elsewhere,
# where the Python loop in ``TreeNode.mismatch`` does the same check
_ptrs_equal: Any = getattr(torch._C, "_tensors_data_ptrs_at_indices_equal", None)


@dataclass(eq=False)
class TreeNode:
    id: int
    function_name: str
    function_id: int
    mode: str
    key: tuple[Any, ...]  # what calls are looked up by (see TreeFunction)
    signature: tuple[Any, ...]  # per input: (dtype, shape, stride, device), or (type, value)
    graph: Any
    replay: Callable[[], None]
    held: dict[int, int]
    checkpoint: PoolCheckpoint
    address_checks: tuple[tuple[int, int], ...]  # (input index, data pointer) read in place
    static_indices: frozenset[int]
    copies: list[InputCopy]
    layout: OutputLayout
    recorded_bytes: int
    parent: TreeNode | None = None
    children: list[TreeNode] = field(default_factory=list)
    replays: int = 0
    output_tags: list[tuple[int, str | None]] = field(default_factory=list)
    # per graph-owned storage: the persistent entry whose templates replays detach or hand out
    entries: list[LiveStorage | None] = field(default_factory=list)
    # how a replay builds each output (OutputLayout.replay_plan)
    plan: list[tuple[int, Any]] = field(default_factory=list)
    pool_growth_bytes: int = 0
    # graph-owned storages whose templates are handed out as the outputs themselves
    handed_groups: frozenset[int] = frozenset()
    # ``plan`` resolved against ``entries`` (see ``_calls.output_recipe``), and per group the
    # places of its templates in it: (output position, view index, slot in the fresh list or -1)
    recipe: tuple[list[Any], list[Any], list[Any], list[Any]] | None = None
    recipe_slots: list[list[tuple[int, int, int]]] = field(default_factory=list)
    entries_ok: bool = False
    stale: set[int] = field(default_factory=set)  # groups to register or rebuild again
    fit_version: int = -1
    fit_checks: list[int] = field(default_factory=list)
    # (input index, value) of the CPU scalar inputs: the graph holds the value they had when
    # it was captured, so it replays only for calls that pass the same values
    host_values: tuple[tuple[int, Any], ...] = ()

    def __post_init__(self) -> None:
        # the address checks as the C++ helper takes them: indices, and pointers by input index
        self._check_indices = [index for index, _ in self.address_checks]
        self._check_ptrs: list[int | None] = [None] * (max(self._check_indices, default=-1) + 1)
        for index, ptr in self.address_checks:
            self._check_ptrs[index] = ptr

    def stale_group(self, group: int, templates_dropped: bool) -> None:
        """Group ``group``'s entry left the registry, or also lost its templates."""
        self.entries_ok = False
        self.stale.add(group)
        if templates_dropped and self.recipe is not None:
            base, fresh = self.recipe[0], self.recipe[1]
            for pos, _, slot in self.recipe_slots[group]:
                if slot < 0:
                    base[pos] = None
                else:
                    fresh[slot] = (pos, None)

    def mismatch(self, inputs: Sequence[Any], live: LiveStorages) -> str | None:
        """Why this node cannot replay these inputs now (None when it can)."""
        for index, value in self.host_values:
            if inputs[index].item() != value:
                return "host"
        if self._check_indices and (
            _ptrs_equal is None
            or type(inputs) is not list
            or not _ptrs_equal(inputs, self._check_ptrs, self._check_indices)
        ):
            for index, ptr in self.address_checks:
                if inputs[index].data_ptr() != ptr:
                    return "static" if index in self.static_indices else "pool"
        if live._by_ptr:
            if self.fit_version != live.version:
                self.fit_checks = live.outside(self.held)
                self.fit_version = live.version
            if not all_dead(self.fit_checks, live._by_ptr):
                return "live"
        return None

    def path(self) -> list[TreeNode]:
        nodes: list[TreeNode] = []
        node: TreeNode | None = self
        while node is not None:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]


class Tree:
    """Structure only: roots, children, the head of the current path, ids."""

    def __init__(self) -> None:
        self.roots: list[TreeNode] = []
        self.current: TreeNode | None = None
        self._next_id = 0

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def attach(self, node: TreeNode) -> None:
        node.parent = self.current
        if node.parent is None:
            self.roots.append(node)
        else:
            node.parent.children.append(node)
        self.current = node

    def detach(self, node: TreeNode) -> None:
        siblings = self.roots if node.parent is None else node.parent.children
        siblings.remove(node)
        for child in node.children:
            child.parent = node.parent
            siblings.append(child)
        node.children = []
        if self.current is node:
            self.current = node.parent

    def nodes(self) -> Iterator[TreeNode]:
        stack = list(reversed(self.roots))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def clear(self) -> None:
        self.roots = []
        self.current = None
