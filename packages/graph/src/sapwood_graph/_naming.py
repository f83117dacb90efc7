"""Readable, collision-free Python identifiers for graph attributes and placeholders.

Invariant: every name returned by :func:`identifier` is a valid identifier that is not a
keyword and does not shadow an attribute of ``torch.fx.GraphModule`` (so installing it on a
GraphModule can never overwrite ``forward``, ``graph``, ``code``, …).
"""

from __future__ import annotations

import keyword
import re

import torch

from sapwood_graph.sources import (
    AttrSource,
    ClosureCellSource,
    DefaultArgSource,
    FunctionSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    Source,
    SyntheticSource,
    TensorPropertySource,
    TypeSource,
)

_RESERVED = frozenset(dir(torch.fx.GraphModule)) | frozenset(dir(torch.nn.Module))
_NON_WORD = re.compile(r"\W+")


def source_stem(source: Source) -> str:
    """``L['self'].layers[0].weight`` → ``self_layers_0_weight``."""
    if isinstance(source, LocalSource):
        return source.local_name
    if isinstance(source, GlobalSource):
        return source.global_name
    if isinstance(source, FunctionSource):
        return "fn"
    if isinstance(source, SyntheticSource):
        return source.label
    if isinstance(source, AttrSource):
        return f"{source_stem(source.of)}_{source.attr}"
    if isinstance(source, ItemSource):
        return f"{source_stem(source.of)}_{source.index}"
    if isinstance(source, TypeSource):
        return f"type_{source_stem(source.of)}"
    if isinstance(source, ClosureCellSource):
        return f"{source_stem(source.of)}_closure_{source.cell_name}"
    if isinstance(source, DefaultArgSource):
        return f"{source_stem(source.of)}_default_{source.index}"
    if isinstance(source, TensorPropertySource):
        suffix = "" if source.index is None else f"_{source.index}"
        return f"{source_stem(source.of)}_{source.prop}{suffix}"
    return str(source)


def identifier(stem: str) -> str:
    """A valid, non-reserved identifier made from ``stem``."""
    name = _NON_WORD.sub("_", stem).strip("_") or "value"
    if name[0].isdigit():
        name = f"_{name}"
    if keyword.iskeyword(name) or name in _RESERVED:
        name = f"{name}_"
    return name


def unique(stem: str, taken: set[str] | dict[str, object]) -> str:
    """``identifier(stem)``, suffixed ``_1``, ``_2``, … until it is not in ``taken``."""
    base = identifier(stem)
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name
