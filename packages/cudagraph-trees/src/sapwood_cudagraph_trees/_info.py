"""Snapshots of a device's tree for people and tools: what :func:`tree_info` returns and
:func:`render` draws. Plain frozen records; nothing here touches the runtime."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FunctionInfo", "NodeInfo", "TreeInfo"]


@dataclass(frozen=True)
class NodeInfo:
    id: int
    function: str
    mode: str
    parent: int | None
    children: tuple[int, ...]
    input_shapes: tuple[tuple[int, ...] | None, ...]
    recorded_bytes: int
    pool_growth_bytes: int
    replays: int
    reused_outputs: int = 0  # outputs handed out as the same tensor objects on each replay


@dataclass(frozen=True)
class FunctionInfo:
    name: str
    mode: str
    warmups: int
    recordings: int
    replays: int
    evictions: int
    live_recordings: int
    eager_reason: str | None
    fallbacks: dict[str, int]
    #: seconds spent recording this function's CUDA graphs
    recording_seconds: float = 0.0


@dataclass(frozen=True)
class TreeInfo:
    device_index: int
    roots: tuple[int, ...]
    current: int | None
    nodes: dict[int, NodeInfo] = field(default_factory=dict)
    functions: tuple[FunctionInfo, ...] = ()
    live_outputs: int = 0
    checkpoint_restores: int = 0
    pool_reserved_bytes: int = 0
