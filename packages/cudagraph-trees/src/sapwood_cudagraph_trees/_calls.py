"""What one call hands the runtime and gets back: the key it is looked up by, the inputs a graph
holds by value (CPU scalars), outputs no graph can hold, how a replay builds its outputs, and
the message for an output read after its memory was handed back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ._device import DeviceLayer
from ._layout import PLAN_INPUT, PLAN_VALUE, PLAN_VIEW
from ._liveness import LiveStorage
from ._tree import TreeNode

_Tensor = torch.Tensor


def input_key(inputs: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(
        [
            (x.dtype, x.shape, x.stride(), x.device) if isinstance(x, _Tensor) else (type(x), x)
            for x in inputs
        ]
    )


def value_key(inputs: Sequence[Any], positions: Sequence[int]) -> tuple[Any, ...]:
    """The key of a layout-guarded function: its non-tensor inputs alone."""
    return tuple([(type(inputs[i]), inputs[i]) for i in positions])


def is_host_scalar(x: Any, layer: DeviceLayer) -> bool:
    """A 0-dim CPU tensor passed to a graph of another device.

    Kernels read such a scalar on the host when they are launched, so a captured graph holds the
    value it had at capture: it is neither copied nor checked by address, but compared by value
    (``TreeNode.host_values``). AOT autograd saves some (attention's random seed and offset, when
    the forward ran outside a capture), and users pass them as learning rates or step counts.
    """
    return (
        isinstance(x, torch.Tensor)
        and x.device.type == "cpu"
        and x.dim() == 0
        and layer.device.type != "cpu"
    )


def stale_message(entry: LiveStorage, why: str, mode: str) -> str:
    what = "gradient output" if mode == "backward" else "output"
    lines = [
        f"sapwood-cudagraph-trees: this tensor is {what} {entry.output_index} of "
        f"'{entry.producer}', and its memory was handed back to the CUDA graph pool because "
        f"{why}; a later graph replay overwrites it, so reading it is refused rather than "
        "returning stale data."
    ]
    if entry.stack_trace:
        lines.append(f"It was produced at:\n{entry.stack_trace}")
    lines.append("To keep it across steps, clone it (out.clone()) before the next compiled call.")
    return "\n".join(lines)


def uncapturable_output(outputs: Sequence[Any]) -> str | None:
    """Why a graph could not hand these outputs out (a sparse, nested or quantized tensor has
    no plain storage to keep in the pool), or None."""
    for i, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            continue
        if out.layout != torch.strided:
            kind = str(out.layout).removeprefix("torch.")
        elif out.is_nested:
            kind = "nested"
        elif out.is_quantized:
            kind = "quantized"
        else:
            continue
        return f"output {i} is a {kind} tensor, which a CUDA graph cannot hand out"
    return None


def output_recipe(
    node: TreeNode,
) -> tuple[tuple[list[Any], list[Any], list[Any], list[Any]], list[list[tuple[int, int, int]]]]:
    """The node's replay plan resolved against its entries, as a replay uses it: the output
    list with every object that is the same on each replay in place (handed-out templates,
    values, constants), then what each replay fills in: ``(position, template)`` of outputs
    detached anew, ``(position, input index)`` of input objects passed through, and
    ``(position, input index, *view)`` of views of inputs. Second, per graph-owned storage,
    where its templates sit: ``(position, view index, slot)``, ``slot`` the index in the
    fresh list or -1 for the output list (see :func:`patch_recipe`)."""
    base: list[Any] = []
    fresh: list[tuple[int, torch.Tensor]] = []
    passed: list[tuple[int, int]] = []
    viewed: list[tuple[Any, ...]] = []
    slots: list[list[tuple[int, int, int]]] = [[] for _ in node.entries]
    for pos, (g, k) in enumerate(node.plan):
        if g >= 0:
            entry = node.entries[g]
            template = entry.templates[k]  # type: ignore[union-attr,index]
            if entry.handed:  # type: ignore[union-attr]
                base.append(template)
                slots[g].append((pos, k, -1))
            else:
                base.append(None)
                slots[g].append((pos, k, len(fresh)))
                fresh.append((pos, template))
            continue
        base.append(k if g == PLAN_VALUE else None)
        if g == PLAN_INPUT:
            passed.append((pos, k))
        elif g == PLAN_VIEW:
            viewed.append((pos, *k))
    return (base, fresh, passed, viewed), slots


def patch_recipe(node: TreeNode, group: int) -> None:
    """Put the new templates of ``group``'s entry in the places of the node's recipe that its
    old ones held (a new step invalidated one output: the others' places stay as they are)."""
    base, fresh = node.recipe[0], node.recipe[1]  # type: ignore[index]
    templates = node.entries[group].templates  # type: ignore[union-attr]
    for pos, k, slot in node.recipe_slots[group]:
        if slot < 0:
            base[pos] = templates[k]  # type: ignore[index]
        else:
            fresh[slot] = (pos, templates[k])  # type: ignore[index]
