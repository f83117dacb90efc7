"""PyTorch idioms that torch.compile captures in one graph, captured in one graph here too.

Each test is differential (eager's result) and counts graphs: the number torch.compile gets
for the same code is the one asserted (one, for each of these).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.utils import _ntuple, _pair, _quadruple, _single, _triple

X = torch.randn(2, 3, 8, 8)


class Activated(nn.Module):
    def __init__(self, act) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if self.act:  # a function object, or None
            y = self.act(y)
        return y


@pytest.mark.parametrize("act", [F.relu, torch.tanh, torch.sigmoid, F.gelu, None])
def test_the_truth_of_a_torch_function_attribute(check, act) -> None:
    torch.manual_seed(0)
    model = Activated(act).eval()
    check(model, (X,), graphs=1)


def test_a_torch_function_in_a_boolean_expression(check) -> None:
    def pick(x: torch.Tensor, fn=F.relu) -> torch.Tensor:
        chosen = fn or torch.tanh
        return chosen(x) if fn is not None and bool(fn) else x

    check(pick, (X,), graphs=1)


def test_torch_nn_tuple_helpers_are_traced(check) -> None:
    def pad_of(x: torch.Tensor, k: int) -> torch.Tensor:
        ph, pw = _pair(k // 2)
        (s,) = _single(1)
        d = _triple((1, 2, 3))
        q = _quadruple(0)
        five = _ntuple(5, "_five")(2)
        return F.pad(x, (pw, pw, ph, ph)) * s + sum(d) + len(q) + five[4]

    check(pad_of, (X, 3), (X, 5), graphs=2)


def test_a_tuple_helper_given_a_tuple_returns_it_as_a_tuple(check) -> None:
    def stride_of(x: torch.Tensor) -> tuple:
        return x.sum(), _pair((2, 3)), _pair([4, 5])

    check(stride_of, (X,), graphs=1)
