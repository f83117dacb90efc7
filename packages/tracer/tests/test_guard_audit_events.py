"""A warm call raises no audit events from the guard check.

Libraries install Python audit hooks (filelock does on Python 3.12 and later, and torch
imports filelock); every audited operation then calls into them. ``id()``, reading a
function's ``__code__`` and reading its ``__defaults__`` are audited, so a guard check made of
thousands of them paid a Python call each. The check runs in a fresh interpreter: an audit hook
cannot be removed, and this one must not slow the rest of the suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

_PROGRAM = textwrap.dedent(
    """
    import collections, json, sys
    import torch
    from torch import nn
    import sapwood_tracer

    events = collections.Counter()
    counting = [False]

    def hook(event, args):
        if counting[0]:
            name = args[1] if event == "object.__getattr__" and len(args) > 1 else ""
            events[f"{event} {name}".strip()] += 1

    sys.addaudithook(hook)

    def scaled(k):
        def act(x):
            return torch.relu(x) * k
        return act

    def shift(x, by=0.5, times=2):
        return x * times + by

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.norm = nn.LayerNorm(8)
            self.act = scaled(0.5)

        def forward(self, x):
            return shift(self.act(self.norm(self.fc(x))))

    model = nn.Sequential(*[Block() for _ in range(6)]).eval()

    def backend(gm, example_inputs):
        return gm.forward

    compiled = sapwood_tracer.compile(model, backend=backend)
    x = torch.randn(4, 8)
    with torch.no_grad():
        expected = model(x)
        for _ in range(3):
            compiled(x)
        counting[0] = True
        for _ in range(10):
            out = compiled(x)
        counting[0] = False
    torch.testing.assert_close(out, expected)
    print(json.dumps({k: v / 10 for k, v in events.items()}))
    """
)


def test_a_warm_call_of_a_module_raises_no_audit_event_per_tensor_or_module():
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    per_call = json.loads(done.stdout.strip().splitlines()[-1])
    # 6 blocks of 2 parameters each (and a LayerNorm's 2), 6 closures, one function with
    # defaults: none of them may cost an audited operation per call, but the function's
    # ``__defaults__``, read once per call for its gate
    assert per_call.get("builtins.id", 0) == 0, per_call
    assert per_call.get("object.__getattr__ __code__", 0) == 0, per_call
    assert per_call.get("object.__getattr__ __defaults__", 0) <= 1, per_call
    assert set(per_call) <= {"object.__getattr__ __defaults__"}, per_call
