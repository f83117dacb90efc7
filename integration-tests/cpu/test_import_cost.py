"""What ``import sapwood`` loads: none of the torch stack it replaces or compiles with, and
not sympy (sapwood's graph and guard code imports it at first use).

torch._dynamo (TorchDynamo, the front end sapwood replaces) and torch._inductor are loaded
when a compile first needs them (torch's ShapeEnv, a backend), not by the import: a program
that imports sapwood and never compiles pays for neither. Measured in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys

_HEAVY = (
    "torch._dynamo",
    "torch._inductor",
    "torch._numpy",
    "torch._functorch.aot_autograd",
    # sympy and torch's symbolic shapes: a quarter of a second, first needed by a trace
    "sympy",
    "torch.fx.experimental.symbolic_shapes",
)


def test_import_sapwood_loads_neither_dynamo_nor_inductor_nor_sympy() -> None:
    code = (
        "import sys, torch\n"
        f"before = {{m for m in {_HEAVY!r} if m in sys.modules}}\n"
        "import sapwood\n"
        f"after = sorted(m for m in {_HEAVY!r} if m in sys.modules and m not in before)\n"
        "print(after)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_dynamos_own_is_compiling_is_answered_once_dynamo_is_loaded_later() -> None:
    code = (
        "import torch, sapwood\n"
        "import torch._dynamo\n"
        "def f(x):\n"
        "    return x + (1 if torch._dynamo.is_compiling() else 0)\n"
        "print(sapwood.compile(f, backend='eager', fullgraph=True)(torch.zeros(1)).item())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "1.0"
