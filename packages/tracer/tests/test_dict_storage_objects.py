"""Objects of dict subclasses written in Python, passed in: their entries read through the
builtin dict's methods (an older Hugging Face ``ModelOutput``: ``dict(self.items())`` in its
``__getitem__``), guarded so a later call with other entries recompiles."""

from __future__ import annotations

import collections
from dataclasses import dataclass, fields

import torch

import sapwood_tracer


class ModelOutput(collections.OrderedDict):
    def __post_init__(self):
        for field in fields(self):
            value = getattr(self, field.name)
            if value is not None:
                self[field.name] = value

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclass
class Output(ModelOutput):
    hidden: torch.Tensor = None
    attentions: torch.Tensor = None


def fn(obj):
    x = obj["hidden"] * 10
    if "attentions" in obj:
        x = x + obj["attentions"]
    return x + len(obj) + obj[0] + sum(1 for _ in obj)


def test_entries_are_read_in_one_graph_and_guarded() -> None:
    compiled = sapwood_tracer.compile(fn, fullgraph=True, backend=lambda gm, ex: gm.forward)
    both = Output(hidden=torch.ones(2), attentions=torch.full((2,), 3.0))
    alone = Output(hidden=torch.ones(2))
    for obj in (both, alone, both):
        torch.testing.assert_close(compiled(obj), fn(obj))
    both.move_to_end("hidden")  # the order changes: to_tuple()[0] is another entry
    torch.testing.assert_close(compiled(both), fn(both))
    dict.__setitem__(both, "attentions", torch.zeros(2))  # behind the class's back
    torch.testing.assert_close(compiled(both), fn(both))


def test_entries_out_of_step_with_the_order_run_as_eagerly() -> None:
    def size(obj):
        return len(obj), list(obj.keys())

    compiled = sapwood_tracer.compile(size, backend=lambda gm, ex: gm.forward)
    obj = Output(hidden=torch.ones(2))
    assert compiled(obj) == size(obj)
    dict.__setitem__(obj, "extra", 1)  # in the dict, not in OrderedDict's order
    assert compiled(obj) == size(obj)


def test_a_write_to_the_entries_is_a_graph_break() -> None:
    def writes(obj):
        obj["hidden"] = obj["hidden"] + 1
        return obj["hidden"]

    compiled = sapwood_tracer.compile(writes, backend=lambda gm, ex: gm.forward)
    a, b = Output(hidden=torch.ones(2)), Output(hidden=torch.ones(2))
    torch.testing.assert_close(compiled(a), writes(b))
    torch.testing.assert_close(a["hidden"], b["hidden"])
