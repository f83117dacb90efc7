"""500 generated programs compiled by sapwood behave exactly as they do eagerly.

The programs come from the differential fuzzer (``integration-tests/fuzz``, ``nox -s fuzz``
runs 10,000): tensor ops, control flow on constants and on tensors, closures and
``nonlocal``, comprehensions, ``try``/``except``, containers in and out, in-place mutation
of inputs, module attribute mutation, globals, graph breaks, and 2 to 4 calls each with new
shapes or dtypes. Results, input mutations, module state, globals, printed output and
raised exceptions must all equal eager's. A failure prints the counts and the failing
program seeds; ``python -m fuzz --only SEED`` (from ``integration-tests/``) reruns one.
"""

from __future__ import annotations

import io

import pytest
from fuzz.runner import program_seeds, report, run_many

SEED = 0  # the first 500 programs of `nox -s fuzz`
COUNT = 500


@pytest.mark.slow
def test_generated_programs_behave_as_eager() -> None:
    summary = run_many(program_seeds(SEED, COUNT), workers=2)
    text = io.StringIO()
    report(summary, None, text)
    failures = {kind: summary.counts[kind] for kind in ("mismatch", "crash", "error")}
    assert failures == {"mismatch": 0, "crash": 0, "error": 0}, text.getvalue()
