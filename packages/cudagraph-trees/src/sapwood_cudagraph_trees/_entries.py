"""A node's own entries: the registered storages its replays hand out, kept across replays.

A node's graph writes its outputs into the same storages on every replay. For each such storage
(a *group*) the node keeps one persistent :class:`~._liveness.LiveStorage` with *templates*,
tensors over the storage that replays detach their outputs from or hand out themselves, and an
output *recipe* (``_calls.output_recipe``) that places those templates among the outputs.

Invariants:

* Built once, at the node's first replay, and mended group by group afterwards: a group whose
  entry left the registry is registered again; a group whose templates were dropped (a new
  step invalidated the output a loop still held, a checkpoint restore handed the storage its
  block) gets new templates, put in the recipe's places of the old ones. The other groups'
  entries, templates and references stay as they were, so their measured rest counts hold.
* Released only as a whole, when the node is evicted or the pool is reset.
"""

from __future__ import annotations

from ._calls import output_recipe, patch_recipe
from ._device import DeviceLayer
from ._liveness import LiveStorage, LiveStorages, storage_use_count, weak_handle
from ._tree import TreeNode


def refresh_entries(live: LiveStorages, layer: DeviceLayer, node: TreeNode) -> None:
    """Give each stale group of ``node`` (every group, at its first replay) a registered entry
    with templates, building new ones where they were dropped, and mend the output recipe
    where it held those; then measure the new templates at rest (no caller holds one)."""
    entries = node.entries
    full = node.recipe is None
    groups = range(len(entries)) if full else sorted(node.stale)
    rebuilt: list[LiveStorage] = []
    for g in groups:
        entry = entries[g]
        if entry is None or entry.templates is None:
            entry = entries[g] = _fresh_entry(live, layer, node, g, entry)
            rebuilt.append(entry)
        live.put(entry)
    node.stale.clear()
    if full:
        node.recipe, node.recipe_slots = output_recipe(node)
    else:
        for entry in rebuilt:
            patch_recipe(node, entry.group)
    for entry in rebuilt:
        entry.measure_rest()
    node.entries_ok = True


def _fresh_entry(
    live: LiveStorages, layer: DeviceLayer, node: TreeNode, group: int, old: LiveStorage | None
) -> LiveStorage:
    if old is not None:
        live.release(old)
    templates = node.layout.templates(layer, group)
    handle = weak_handle(templates[0].untyped_storage())
    ptr, nbytes = node.layout.storages[group]
    index, trace = node.output_tags[group]
    entry = LiveStorage(
        handle=handle,
        ptr=ptr,
        nbytes=nbytes,
        producer=node.function_name,
        output_index=index,
        stack_trace=trace,
        mode=node.mode,
        # the references the runtime itself holds: the templates, and the Python storage
        # object torch keeps alive beside them; measured, not assumed
        baseline=storage_use_count(handle),
        templates=templates,
        persistent=True,
        owner=node,
        group=group,
    )
    if group in node.handed_groups:
        entry.hand_out()
    return entry


def release_entries(live: LiveStorages, node: TreeNode) -> None:
    """The node gives up every entry (it is evicted, or the pool reset)."""
    for entry in node.entries:
        if entry is not None:
            live.release(entry)
    node.entries = [None] * len(node.entries)
    node.recipe = None
    node.stale.clear()
    node.entries_ok = False
