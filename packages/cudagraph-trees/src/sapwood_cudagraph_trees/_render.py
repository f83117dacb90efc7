"""Pictures of a tree: indented text for a terminal, Graphviz dot for a drawing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._info import NodeInfo, TreeInfo


def _label(node: NodeInfo) -> str:
    shapes = ", ".join("x".join(map(str, s)) if s is not None else "-" for s in node.input_shapes)
    reused = f" reused={node.reused_outputs}" if node.reused_outputs else ""
    return (
        f"#{node.id} {node.function} [{node.mode}] ({shapes}) "
        f"out={node.recorded_bytes}B pool+={node.pool_growth_bytes}B replays={node.replays}"
        + reused
    )


def render_text(info: TreeInfo) -> str:
    lines = [
        f"device {info.device_index}: {len(info.nodes)} graph(s), {info.live_outputs} live "
        f"output storage(s), pool {info.pool_reserved_bytes}B, "
        f"{info.checkpoint_restores} checkpoint restore(s)"
    ]

    def walk(node_id: int, depth: int) -> None:
        node = info.nodes[node_id]
        marker = " <- current" if node_id == info.current else ""
        lines.append("  " * (depth + 1) + _label(node) + marker)
        for child in node.children:
            walk(child, depth + 1)

    for root in info.roots:
        walk(root, 0)
    for fn in info.functions:
        line = (
            f"  fn {fn.name} [{fn.mode}]: warm-ups={fn.warmups} recordings={fn.recordings} "
            f"replays={fn.replays} evictions={fn.evictions}"
        )
        if fn.eager_reason:
            line += f" EAGER: {fn.eager_reason}"
        lines.append(line)
        for reason, count in sorted(fn.fallbacks.items()):
            lines.append(f"    fallback x{count}: {reason}")
    return "\n".join(lines)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_dot(info: TreeInfo) -> str:
    lines = [f"digraph cudagraph_tree_{info.device_index} {{", "  node [shape=box];"]
    for node in info.nodes.values():
        style = ", style=bold" if node.id == info.current else ""
        lines.append(f"  n{node.id} [label={_quote(_label(node))}{style}];")
    for node in info.nodes.values():
        for child in node.children:
            lines.append(f"  n{node.id} -> n{child};")
    lines.append("}")
    return "\n".join(lines)
