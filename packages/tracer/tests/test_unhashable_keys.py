"""An unhashable value used as a dict key or set member raises Python's TypeError in the
trace (``unhashable type: 'list'``), which the program may catch. It was an internal error
(PyTorch's own dynamo tests: ``OrderedSet.add([...])`` inside ``assertRaises``)."""

from __future__ import annotations

import pytest
import torch

import sapwood_tracer

from .conftest import CountingBackend


class EqOnly:
    def __eq__(self, other: object) -> bool:
        return True


def _store(d: dict, key: object) -> None:
    d[key] = None


@pytest.mark.parametrize(
    "make_key",
    [lambda: ["ab"], lambda: {"a": 1}, lambda: {1}, lambda: EqOnly()],
    ids=["list", "dict", "set", "eq-only-class"],
)
@pytest.mark.parametrize(
    "use",
    [
        _store,
        lambda d, key: d.get(key),
        lambda d, key: key in d,
        lambda d, key: {key},
        lambda d, key: {1, 2}.add(key),
    ],
    ids=["store", "get", "in", "set-display", "set-add"],
)
def test_an_unhashable_key_raises_pythons_type_error(make_key, use) -> None:
    def f(x: torch.Tensor):
        key = make_key()
        try:
            use({}, key)
        except TypeError as exc:
            return x + 1, str(exc)
        return x - 1, ""

    expected = f(torch.zeros(1))
    backend = CountingBackend()
    got = sapwood_tracer.compile(f, backend=backend, fullgraph=True)(torch.zeros(1))
    assert got[1] == expected[1] and got[1].startswith("unhashable type")
    torch.testing.assert_close(got[0], expected[0])
    assert backend.count == 1
