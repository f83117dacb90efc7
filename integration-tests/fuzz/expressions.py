"""Expressions of the fuzzer's programs: ints, conditions, tensors, and what they may read.

:class:`Scope` says which names a block of generated code may read and assign;
:class:`ExpressionWriter` draws weighted random expressions over a scope, all from one seeded
``random.Random`` (the same seed writes the same text). Every tensor expression has the
inputs' shape ("full shape"); :meth:`ExpressionWriter.broadcast_expr` adds reductions, rows
and scalars that broadcast back to it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

__all__ = ["ExpressionWriter", "Scope", "indent"]


@dataclass
class Scope:
    """What a block of code may read and write."""

    kind: str  # "program", "nested", "helper", "forward"
    tensors: list[str]  # full-shape tensor names the block may assign
    ints: list[str]  # int names the block may assign
    ro_tensors: list[str] = field(default_factory=list)  # read-only (free variables)
    ro_ints: list[str] = field(default_factory=list)
    callables: list[str] = field(default_factory=list)  # tensor -> tensor functions in reach
    growing_callables: list[str] = field(default_factory=list)  # ... that append to xs
    inputs: bool = False  # xs, d, box, mod, n readable
    depth: int = 0  # statement nesting
    def_depth: int = 0  # function nesting below the entry point
    in_loop: bool = False
    iterating_xs: bool = False
    in_try: bool = False
    globals_written: set[str] = field(default_factory=set)

    def all_tensors(self) -> list[str]:
        return self.tensors + self.ro_tensors

    def all_ints(self) -> list[str]:
        return self.ints + self.ro_ints

    def child(self, **changes: object) -> Scope:
        new = replace(self, depth=self.depth + 1, **changes)  # type: ignore[arg-type]
        new.callables = list(self.callables)
        new.growing_callables = list(self.growing_callables)
        new.globals_written = self.globals_written  # shared: declared once per function
        return new


def indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


class ExpressionWriter:
    """Weighted random expressions; subclasses add statements and whole programs."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.features: set[str] = set()
        self.counter = 0  # fresh names
        self.helpers: list[str] = []  # module-level tensor helpers: name(t, k)
        self.disabled: list[str] = []  # module-level @sapwood.disable helpers: name(t)
        self.grows_xs = False  # the function being generated appends to xs
        self.odd: list[str] = []  # the special methods of G_ODD, if the program has one

    # ------------------------------------------------------------------ small utilities

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, options: list[tuple[float, Callable[[], object]]]) -> object:
        total = sum(w for w, _ in options)
        x = self.rng.random() * total
        for weight, make in options:
            x -= weight
            if x < 0:
                return make()
        return options[-1][1]()

    def choice(self, seq: list[str] | tuple[str, ...]) -> str:
        return self.rng.choice(list(seq))

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def use(self, feature: str) -> None:
        self.features.add(feature)

    # ------------------------------------------------------------------ int expressions

    def int_leaf(self, s: Scope) -> str:
        options: list[tuple[float, Callable[[], object]]] = [
            (4, lambda: self.choice(s.all_ints())),
            (2, lambda: str(self.rng.randint(-2, 4))),
            (1, lambda: f"{self.choice(s.all_tensors())}.shape[{self.rng.randint(0, 1)}]"),
            (0.5, lambda: f"{self.choice(s.all_tensors())}.size({self.rng.randint(0, 1)})"),
            (0.3, lambda: f"{self.choice(s.all_tensors())}.dim()"),
        ]
        if s.inputs:
            options += [
                (1, lambda: "n"),
                (1, lambda: "len(xs)"),
                (0.5, lambda: "len(d)"),
                (0.5, lambda: 'd["k"]'),
                (0.5, lambda: "box.n"),
                (0.5, lambda: "mod.count"),
            ]
        options += [(0.4, lambda: "G_N"), (0.2, lambda: "len(G_LIST)")]
        leaf = str(self.pick(options))
        if "shape" in leaf or "size(" in leaf:
            self.use("shape arithmetic")
        return leaf

    def int_expr(self, s: Scope, budget: int = 3) -> str:
        if budget <= 1 or self.chance(0.4):
            return self.int_leaf(s)
        left = self.int_expr(s, budget - 1)
        right = self.int_expr(s, budget - 1)
        return str(
            self.pick(
                [
                    (3, lambda: f"({left} + {right})"),
                    (2, lambda: f"({left} - {right})"),
                    (1, lambda: f"({left} * {right})"),
                    (1, lambda: f"({left} % {self.rng.randint(2, 5)})"),
                    (0.5, lambda: f"({left} // {self.rng.randint(1, 3)})"),
                    (1, lambda: f"max({left}, {right})"),
                    (1, lambda: f"min({left}, {right})"),
                    (0.5, lambda: f"abs({left})"),
                ]
            )
        )

    def small_count(self, s: Scope) -> str:
        """An int expression for a loop bound: 0..3."""
        if self.chance(0.5):
            return str(self.rng.randint(0, 3))
        return f"{self.int_expr(s, 2)} % {self.rng.randint(2, 4)}"

    # ------------------------------------------------------------------ conditions

    def static_cond(self, s: Scope) -> str:
        """A condition decided by Python values (ints, shapes, dtypes, flags), not tensor data."""
        options: list[tuple[float, Callable[[], object]]] = [
            (
                5,
                lambda: (
                    f"{self.int_expr(s, 2)} {self.choice(['>', '<', '==', '!=', '>=', '<='])} "
                    f"{self.rng.randint(-1, 3)}"
                ),
            ),
            (1, lambda: f"{self.int_expr(s, 2)} % 2 == 0"),
            (
                1,
                lambda: (
                    f"{self.choice(s.all_tensors())}.dtype == torch."
                    f"{self.choice(['float32', 'float64'])}"
                ),
            ),
            (1, lambda: f"{self.choice(s.all_tensors())}.shape[0] > {self.rng.randint(1, 3)}"),
            (0.5, lambda: "G_FLAG"),
            (0.3, lambda: "not G_FLAG"),
            (0.3, lambda: f"{self.choice(s.all_tensors())}.requires_grad"),
        ]
        if s.inputs:
            options += [
                (1, lambda: f"len(xs) > {self.rng.randint(1, 3)}"),
                (0.5, lambda: f'"{self.choice(["w", "k", "extra"])}" in d'),
                (0.5, lambda: f'hasattr(box, "{self.choice(["v", "extra"])}")'),
                (0.5, lambda: "mod.training"),
                (0.5, lambda: f"isinstance(d.get('extra'), {self.choice(['int', 'list'])})"),
            ]
        self.use("control flow on constants")
        return str(self.pick(options))

    def data_cond(self, s: Scope) -> str:
        """A condition on tensor data: the graph must break (or the branch be specialised)."""
        self.use("control flow on tensors")
        t = self.choice(s.all_tensors())
        return str(
            self.pick(
                [
                    (3, lambda: f"{t}.sum() > 0"),
                    (1, lambda: f"({t} > 0.5).any()"),
                    (1, lambda: f"{t}.mean().item() < 0.1"),
                    (0.5, lambda: f"bool({t}.max() > 1)"),
                    (0.5, lambda: f"{t}.abs().sum() > {t}.numel()"),
                ]
            )
        )

    # ------------------------------------------------------------------ tensor expressions

    def tensor_leaf(self, s: Scope) -> str:
        options: list[tuple[float, Callable[[], object]]] = [
            (6, lambda: self.choice(s.all_tensors())),
        ]
        if s.inputs:
            options += [
                (1, lambda: f"xs[{self.choice(['0', '1', '-1'])}]"),
                (0.7, lambda: 'd["w"]'),
                (0.7, lambda: "box.v"),
            ]
        return str(self.pick(options))

    def broadcast_expr(self, s: Scope, budget: int) -> str:
        """Broadcastable to the full shape: a reduction, a row, a column, a scalar."""
        full = self.tensor_expr(s, budget)
        return str(
            self.pick(
                [
                    (3, lambda: full),
                    (1, lambda: f"{full}.sum(0, keepdim=True)"),
                    (1, lambda: f"{full}.mean(1, keepdim=True)"),
                    (1, lambda: f"{full}.amax(-1, keepdim=True)"),
                    (1, lambda: f"{full}.sum()"),
                    (1, lambda: f"{full}[0]"),
                    (0.5, lambda: f"{full}[:, :1]"),
                    (0.5, lambda: f"{full}[-1:]"),
                    (0.5, lambda: "G_T"),
                    (
                        0.5,
                        lambda: (
                            f"torch.arange({self.choice(s.all_tensors())}.shape[1], "
                            f"dtype={self.choice(s.all_tensors())}.dtype)"
                        ),
                    ),
                    (0.3, lambda: self._data_dependent_scalar(s, full)),
                ]
            )
        )

    def _data_dependent_scalar(self, s: Scope, full: str) -> str:
        self.use("data-dependent ops")
        return str(
            self.pick(
                [
                    (1, lambda: f"{full}[{full} > 0].sum()"),
                    (1, lambda: f"({full}.mean() * torch.nonzero({full} > 0).shape[0])"),
                ]
            )
        )

    def scalar(self, s: Scope) -> str:
        return str(
            self.pick(
                [
                    (3, lambda: self.choice(["0.5", "2", "1.5", "-1", "0.25", "3"])),
                    (2, lambda: self.int_expr(s, 2)),
                    (0.5, lambda: "G_SCALE"),
                    (0.5, lambda: "mod.scale" if s.inputs else "G_SCALE"),
                ]
            )
        )

    def tensor_expr(self, s: Scope, budget: int = 3) -> str:
        """A tensor of the full shape."""
        if budget <= 1 or self.chance(0.25):
            return self.tensor_leaf(s)
        inner = self.tensor_expr(s, budget - 1)
        options: list[tuple[float, Callable[[], object]]] = [
            (
                4,
                lambda: (
                    f"({inner} {self.choice(['+', '-', '*'])} {self.broadcast_expr(s, budget - 1)})"
                ),
            ),
            (
                1,
                lambda: f"({self.broadcast_expr(s, budget - 1)} {self.choice(['+', '*'])} {inner})",
            ),
            (2, lambda: f"({inner} {self.choice(['+', '-', '*'])} {self.scalar(s)})"),
            (1, lambda: f"({inner} / ({self.broadcast_expr(s, budget - 1)}.abs() + 1))"),
            (
                3,
                lambda: (
                    "torch."
                    + self.choice(["sin", "cos", "tanh", "relu", "sigmoid", "abs", "neg"])
                    + f"({inner})"
                ),
            ),
            (
                2,
                lambda: (
                    f"{inner}."
                    + self.choice(
                        [
                            "sin()",
                            "tanh()",
                            "clone()",
                            "t().t()",
                            "flip(0)",
                            "softmax(-1)",
                            "clamp(-2, 2)",
                            "pow(2)",
                            "relu()",
                            "detach()",
                            "contiguous()",
                            "transpose(0, 1).transpose(0, 1)",
                        ]
                    )
                ),
            ),
            (1, lambda: f"torch.nn.functional.gelu({inner})"),
            (1, lambda: f"{inner}.reshape(-1).view_as({self.choice(s.all_tensors())})"),
            (
                1,
                lambda: f"torch.where({inner} > 0, {inner}, {self.tensor_expr(s, budget - 2)})",
            ),
            (1, lambda: f"torch.maximum({inner}, {self.tensor_expr(s, budget - 2)})"),
            (
                0.7,
                lambda: (
                    f"torch.tanh(({inner} @ {self.tensor_expr(s, budget - 2)}.t()) @ "
                    f"{self.choice(s.all_tensors())})"
                ),
            ),
            (
                0.7,
                lambda: f"torch.stack([{inner}, {self.tensor_expr(s, budget - 2)}]).mean(0)",
            ),
            (
                0.5,
                lambda: (
                    f"torch.cat([{inner}, {self.choice(s.all_tensors())}], 0)"
                    f"[: {self.choice(s.all_tensors())}.shape[0]]"
                ),
            ),
            (0.7, lambda: f"torch.full_like({inner}, {self.int_expr(s, 2)})"),
            (0.5, lambda: f"(torch.zeros_like({inner}) + {self.int_expr(s, 2)})"),
            (
                0.7,
                lambda: (
                    f"({inner} if {self.static_cond(s)} else {self.tensor_expr(s, budget - 2)})"
                ),
            ),
            (
                0.7,
                lambda: (
                    f"sum(({inner} * {self.choice(['c', 'c + 1'])} for c in range("
                    f"{self.small_count(s)})), torch.zeros_like({self.choice(s.all_tensors())}))"
                ),
            ),
        ]
        if s.inputs:
            options += [
                (1, lambda: f"mod({inner})"),
                (0.5, lambda: f"(torch.stack(xs).mean(0) + {inner})"),
                (0.3, lambda: f"(sum(xs) * {self.scalar(s)} + {inner})"),
            ]
        if self.helpers:
            options.append(
                (1, lambda: f"{self.choice(self.helpers)}({inner}, {self.int_expr(s, 1)})")
            )
        reachable = s.callables + ([] if s.iterating_xs else s.growing_callables)
        if reachable:
            options.append((1.5, lambda: self.call_nested(reachable, s, inner)))
        expr = str(self.pick(options))
        if "mod(" in expr:
            self.use("module calls")
        if "for c in" in expr:
            self.use("comprehensions")
        if "sum(xs)" in expr or "stack(xs)" in expr:
            self.use("containers in")
        return expr

    def call_nested(self, names: list[str], s: Scope, argument: str) -> str:
        name = self.choice(names)
        if name in s.growing_callables:
            self.grows_xs = True
        return f"{name}({argument})"
