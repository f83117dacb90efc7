"""The upstream test files, and which of their tests read Dynamo's internals.

The files are PyTorch's own ``test/dynamo/test_*.py``, kept unchanged in ``upstream/``
(see ``upstream/README.md`` for the commit each was read at). A test *reads internals*
when what it checks only has a meaning for Dynamo: its counters, guard hooks, config knobs,
exception classes, logs, ``explain`` report. Such a test is reported as ``internals`` for
both engines and not run: its pass or failure would say nothing about sapwood.

The rule is static, on the test method's source (decorators included) and on the names the
test file imports from Dynamo's internal modules; :mod:`torch_tests.shim` adds a dynamic one
(:class:`~torch_tests.shim.DynamoOnly`) for entry points met while running.
"""

from __future__ import annotations

import ast
import inspect
import re
import types
from functools import cache
from pathlib import Path
from typing import Any

import torch
import torch._dynamo

__all__ = ["DEFAULT_FILES", "UPSTREAM", "internals_reason", "provide_removed_names", "resolve"]

UPSTREAM = Path(__file__).resolve().parent / "upstream"

DEFAULT_FILES = [
    "test_functions",
    "test_subgraphs",
    "test_exceptions",
    "test_dicts",
    "test_sets",
    "test_model_output",
]

# Source patterns that make a test read Dynamo's internals, and what each names.
_PATTERNS: list[tuple[str, str]] = [
    (r"\bcounters\b", "torch._dynamo.utils.counters"),
    (r"guard_fail|guard_export|guard_filter|GuardFail", "a guard hook"),
    (r"\bconvert_frame\b|\beval_frame\b|_C\._dynamo", "Dynamo's frame evaluation"),
    (
        r"_dynamo\.(bytecode_\w+|symbolic_convert|output_graph|side_effects|variables|guards"
        r"|source|utils|exc|logging|resume_execution|polyfills|trace_rules)\b",
        "a Dynamo-internal module",
    ),
    (r"\bexplain\(", "torch._dynamo.explain (a Dynamo-shaped report)"),
    (r"make_logging_test|getRecord|\brecords\b", "Dynamo's logs"),
    (r"_dynamo\.export|torch\.export\.|\bexport\(", "export"),
    (r"_inductor\.config|_functorch\.config|\binductor_config\b", "an Inductor/functorch knob"),
    (r"debug_disable_compile_counter|CompileCounterInt|compile_id", "Dynamo's bookkeeping"),
    (r"disable_cache_limit|cache_size_limit|recompile_limit", "Dynamo's recompile limit"),
]

# Dynamo config knobs whose setting changes nothing a sapwood run could check.
_NEUTRAL_KNOBS = {
    "inline_inbuilt_nn_modules",
    "enable_trace_unittest",
    "verbose",
    "log_compilation_metrics",
    "raise_on_ctx_manager_usage",
    "suppress_errors",
    "nested_graph_breaks",
}
_KNOB_PATTERNS = [
    r"config\.patch\(\s*(\w+)\s*=",
    r"config\.patch\(\s*[\"'](\w+)[\"']",
    r"_dynamo\.config,\s*[\"'](\w+)[\"']",
    r"_dynamo\.config\.(\w+)[\"']",
    r"\bconfig\.(\w+)\b",
]
# Internal modules of Dynamo: names a test file imports from them are internals.
_PUBLIC_DYNAMO_MODULES = {"torch._dynamo", "torch._dynamo.test_case", "torch._dynamo.testing"}


def provide_removed_names() -> None:
    """Give torch back the test helpers older upstream files import and torch 2.13 no
    longer has, so those files import at all (applied for both engines, before the import):

    - ``torch._dynamo.utils.ifdyn``, ``ifdynstaticdefault``, ``ifunspec``: pick an expected
      count by a config knob; they choose as torch did with its defaults since dynamic
      shapes became always on (the tests that reach them read a Dynamo knob and are
      ``internals`` anyway);
    - ``torch._dynamo.testing.requires_numpy_pytorch_interop`` and
      ``common_utils.disable_translation_validation_if_dynamic_shapes``: decorators that
      became no-ops (NumPy interop is always there; translation validation is off).
    """
    import torch._dynamo.testing as testing
    import torch._dynamo.utils as utils

    try:
        from torch.testing._internal import common_utils
    except ImportError:  # (it needs expecttest, which the nox session installs; files using
        common_utils = None  # common_utils cannot import without it anyway)

    def first_if(flag: bool) -> Any:
        return lambda count1, count2: count1 if flag else count2

    def unchanged(fn: Any) -> Any:
        return fn

    config = torch._dynamo.config
    removed = [
        (utils, "ifdyn", first_if(True)),
        (utils, "ifdynstaticdefault", first_if(config.assume_static_by_default)),
        (utils, "ifunspec", first_if(not getattr(config, "specialize_int", False))),
        (testing, "requires_numpy_pytorch_interop", unchanged),
        (common_utils, "disable_translation_validation_if_dynamic_shapes", unchanged),
    ]
    for module, name, helper in removed:
        if module is not None and not hasattr(module, name):
            setattr(module, name, helper)


def resolve(file: str) -> Path:
    """``test_dicts`` (or ``test_dicts.py``) in ``upstream/``, or a path to a ``.py`` file."""
    path = Path(file)
    if path.suffix == ".py" and path.exists():
        return path.resolve()
    return UPSTREAM / f"{path.stem}.py"


@cache
def _imported_internals(filename: str) -> frozenset[str]:
    try:
        tree = ast.parse(Path(filename).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return frozenset()
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            internal = node.module.startswith("torch._dynamo.") and (
                node.module not in _PUBLIC_DYNAMO_MODULES
            )
            if internal or node.module.startswith(("torch._inductor", "torch._functorch")):
                names.update(alias.asname or alias.name for alias in node.names)
    return frozenset(names)


def _source(function: types.FunctionType) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def internals_reason(cls: type, name: str) -> str | None:
    """Why test ``name`` of ``cls`` reads Dynamo's internals, or None when it does not."""
    function = getattr(cls, name)
    source = _source(function)
    for pattern, what in _PATTERNS:
        found = re.search(pattern, source)
        if found:
            return f"reads {what} ({found.group(0)!r})"
    for pattern in _KNOB_PATTERNS:
        for knob in re.findall(pattern, source):
            if knob != "patch" and knob not in _NEUTRAL_KNOBS:
                return f"sets the Dynamo config knob {knob}"
    filename = inspect.getsourcefile(inspect.unwrap(function)) or ""
    for imported in sorted(_imported_internals(filename)):
        if re.search(rf"\b{re.escape(imported)}\b", source):
            return f"uses {imported}, imported from a Dynamo-internal module"
    return None
