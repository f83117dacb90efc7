"""torch's structured trace of a sapwood run carries compile ids (a frame id per code
object, a count of its compiles) and a ``dynamo_start`` event naming the function, as
tlparse reads them."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import torch

import sapwood_tracer
from sapwood_tracer.api.compile_ids import compile_context

_PROGRAM = """
import torch, sapwood_tracer

def f(x, n):
    y = x.sin() * n
    print("", end="")
    return y.cos()

c = sapwood_tracer.compile(f, backend=lambda gm, ex: gm.forward, dynamic=False)
c(torch.ones(2), 2)
c(torch.ones(2), 3)
"""


def test_the_structured_trace_has_compile_ids_and_stacks(tmp_path: pathlib.Path) -> None:
    env = dict(os.environ, TORCH_TRACE=str(tmp_path))
    subprocess.run([sys.executable, "-c", _PROGRAM], env=env, check=True, capture_output=True)
    events = []
    for log in tmp_path.iterdir():
        for line in log.read_text().splitlines():
            if "{" in line:
                try:
                    events.append(json.loads(line[line.index("{") :]))
                except json.JSONDecodeError:
                    continue
    starts = [(e["frame_id"], e["frame_compile_id"]) for e in events if "dynamo_start" in e]
    assert sorted(starts) == [(0, 0), (0, 1), (1, 0)]
    stacks = [e["dynamo_start"]["stack"] for e in events if "dynamo_start" in e]
    assert all(s and s[-1]["name"] == "f" and s[-1]["line"] == 4 for s in stacks), stacks


def test_the_context_is_torchs_current_one_during_a_capture() -> None:
    seen = []

    def backend(gm, example_inputs):
        seen.append(str(torch._guards.CompileContext.current_compile_id()))
        return gm.forward

    def g(x):
        return x + 1

    sapwood_tracer.compile(g, backend=backend)(torch.ones(1))
    assert len(seen) == 1 and seen[0] != "None"
    with compile_context(g.__code__) as compile_id:
        assert compile_id.frame_compile_id == 1  # (g's second capture)
