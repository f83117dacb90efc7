"""The compiled artifacts, shipped to another process: its compile of the same model hits
Inductor's caches (no code generated again) and gives the same outputs.

Each process has its own empty Inductor cache folder, so the second one can only hit what
``load_artifacts`` brought.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent(
    """
    import json, sys, torch, sapwood
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    mode, path = sys.argv[1], sys.argv[2]
    loaded = sapwood.load_artifacts(path) if mode == "load" else None
    with torch.no_grad():
        out = sapwood.compile(model)(x)
    saved = sapwood.save_artifacts(path) if mode == "save" else None
    print(json.dumps({
        "loaded": loaded, "saved": saved, "out": out.flatten().tolist(),
        "hits": counters["inductor"]["fxgraph_cache_hit"],
        "misses": counters["inductor"]["fxgraph_cache_miss"],
    }))
    """
)


def _run(tmp_path, mode: str, cache: str) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / cache)}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode, str(tmp_path / "model.artifacts")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_second_process_loads_the_artifacts_and_hits_the_caches(tmp_path) -> None:
    first = _run(tmp_path, "save", "cache-first")
    assert first["saved"] is True and first["misses"] >= 1 and first["hits"] == 0
    second = _run(tmp_path, "load", "cache-second")
    assert second["loaded"] is True
    assert second["hits"] >= 1 and second["misses"] == 0
    assert second["out"] == first["out"]
