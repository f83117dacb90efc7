"""The numbers the documentation quotes are the code's: each limit named in
``docs/packages/tracer.md`` is read from the module that defines it, and the README's first
example runs on a machine without a GPU."""

from __future__ import annotations

import pathlib
import re

import pytest

from sapwood_tracer.api import cache
from sapwood_tracer.interpreter import budget

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRACER_DOC = (ROOT / "docs" / "packages" / "tracer.md").read_text()


def _quoted(number: int) -> str:
    return f"{number:,}" if number >= 10_000 else str(number)


@pytest.mark.parametrize(
    ("phrase", "value"),
    [
        ("After {} entries", cache.RECOMPILE_LIMIT),
        ("{} for a resume function", cache.RESUME_RECOMPILE_LIMIT),
        ("resume functions come to {} instructions", cache.BREAK_COST_LIMIT),
        ("their recompiles to {} instructions", cache.RECOMPILE_COST_LIMIT),
        ("one frame runs more than {} instructions", budget.FRAME_BUDGET),
        ("the whole trace runs more than {}", budget.TRACE_BUDGET),
        ("inlined more\nthan {} calls deep", budget.MAX_INLINE_DEPTH),
    ],
)
def test_the_tracer_docs_quote_the_codes_limits(phrase: str, value: int) -> None:
    pattern = r"\s+".join(re.escape(part) for part in phrase.format(_quoted(value)).split())
    assert re.search(pattern, TRACER_DOC), (
        f"docs/packages/tracer.md should say {phrase!r} with {value}"
    )


def test_the_torch_compile_page_quotes_the_codes_limits() -> None:
    page = (ROOT / "docs" / "from-torch-compile.md").read_text()
    expected = (
        f"sapwood's default is {cache.RECOMPILE_LIMIT} "
        f"({cache.RESUME_RECOMPILE_LIMIT} for a resume function)"
    )
    assert expected in page


def test_the_readmes_first_example_runs_without_a_gpu(monkeypatch) -> None:
    text = (ROOT / "README.md").read_text()
    example = re.search(r"```python\n(.*?)```", text, re.S)
    assert example is not None
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    exec(compile(example.group(1), "README.md", "exec"), {"__name__": "readme"})
