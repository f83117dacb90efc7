"""The log topics switched from code (``set_logs``), by torch's own switches
(``torch._logging.set_logs``, ``TORCH_LOGS``) and by ``SAPWOOD_LOGS``."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
import torch

import sapwood_tracer
from sapwood_tracer.api import events


@pytest.fixture(autouse=True)
def _logs_off():
    yield
    sapwood_tracer.set_logs()
    torch._logging.set_logs()


def _recompile_twice(caplog):
    def fn(x, n):
        return x * n

    compiled = sapwood_tracer.compile(fn, backend=lambda gm, ex: gm.forward, dynamic=False)
    with caplog.at_level(logging.INFO, logger="sapwood"):
        compiled(torch.ones(2), 2)
        compiled(torch.ones(2), 3)
    return caplog.text


def test_set_logs_turns_topics_on_and_off(caplog) -> None:
    sapwood_tracer.set_logs(recompiles=True)
    assert events.enabled_topics() == {"recompiles"}
    assert "guard failed: L['n'] == 2; seen: 3" in _recompile_twice(caplog)
    sapwood_tracer.set_logs()
    caplog.clear()
    assert "guard failed" not in _recompile_twice(caplog)
    sapwood_tracer.set_logs(all=True)
    assert events.enabled_topics() == set(events.TOPICS)


def test_set_logs_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="takes True or False"):
        sapwood_tracer.set_logs(recompiles="yes")
    with pytest.raises(TypeError):
        sapwood_tracer.set_logs(dynamo=True)  # not a sapwood topic


def test_torchs_switches_turn_on_the_same_topics(caplog) -> None:
    torch._logging.set_logs(recompiles=True, graph_code=True)
    assert events.enabled_topics() == {"recompiles", "graphs"}
    assert "guard failed" in _recompile_twice(caplog)


def test_torch_logs_in_the_environment() -> None:
    code = (
        "import torch, sapwood_tracer\n"
        "from sapwood_tracer.api import events\n"
        "print(sorted(events.enabled_topics()))\n"
    )
    env = dict(os.environ, TORCH_LOGS="graph_breaks,guards", SAPWOOD_LOGS="bytecode")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "['bytecode', 'graph_breaks', 'guards']"


def test_the_compile_topic_says_each_stage_and_compile_times_sum_them(caplog) -> None:
    def fn(x):
        return x.sin() + 1

    before = sapwood_tracer.compile_times()
    backend_calls = []

    def backend(gm, example_inputs):
        backend_calls.append(gm)
        gm.meta["sapwood_stage_times"] = {"aot_autograd": 0.25, "inductor": 0.5}
        return gm.forward

    sapwood_tracer.set_logs(compile=True)
    with caplog.at_level(logging.INFO, logger="sapwood"):
        sapwood_tracer.compile(fn, backend=backend)(torch.ones(3))
    text = caplog.text
    assert "] tracing " in text or "tracing test_" in text
    assert "compiling the graph of" in text and "(3 ops) with backend" in text
    assert "<locals>.fn (" in text and "AOT autograd 0.25 s, Inductor 0.50 s" in text
    after = sapwood_tracer.compile_times()
    assert after["captures"] == before.get("captures", 0) + 1
    assert after["inductor"] - before.get("inductor", 0.0) == pytest.approx(0.5)
    assert after["total"] > before.get("total", 0.0)


def test_torchs_dynamo_log_turns_the_compile_topic_on(caplog) -> None:
    torch._logging.set_logs(dynamo=logging.INFO)
    assert "compile" in events.enabled_topics()
    torch._logging.set_logs()
    assert "compile" not in events.enabled_topics()
