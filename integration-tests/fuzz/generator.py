"""A seeded generator of readable Python programs over tensors, for the differential fuzzer.

``generate(seed)`` returns a :class:`Program`: the source text of a small module (globals,
helpers, a ``Box`` class, a ``Counter`` module, the entry point and ``make_inputs``) and the
2 to 4 calls to make of it, each with its own input shape, dtype and int argument. The same
seed always gives the same program.

The entry point is either a function ``program(a, b, n, xs, d, box, mod)`` or the forward of
a module ``Program`` (``forward(self, a, b, n, xs, d, box)``, with ``mod = self.sub``).
``a`` and ``b`` are 2-d float tensors, ``n`` a small int, ``xs`` a list of two tensors,
``d`` a dict ``{"w": tensor, "k": int}``, ``box`` a ``Box`` with attributes ``v`` (tensor)
and ``n`` (int), ``mod`` a ``Counter`` (an ``nn.Module`` that counts its calls).

Invariants the generator keeps so that programs run eagerly without unintended errors:

* Every tensor variable holds a tensor of the inputs' shape ("full shape"); reductions and
  rows only appear as operands that broadcast back to it.
* Every variable a block may read is bound before the body starts (``t0``, ``t1``, ``k0``,
  ``k1`` are set first); loops, comprehensions and nested functions bind their own names.
* ``xs`` keeps at least two elements (no ``pop`` without a matching ``append``) and never
  grows while it is iterated; ``d["w"]`` stays a tensor, ``d["k"]``, ``box.n`` ints.
* A nested function assigns only its parameters, its own locals and the names it declares
  ``nonlocal``; it reads other enclosing names as free variables.
* Exceptions are raised on purpose (by a constant or int condition, or by data where the
  graph must break), mostly inside ``try`` blocks that catch them; a few escape the call.

Features are weighted; each program records the features it used (``Program.features``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

__all__ = ["CallSpec", "Program", "generate"]

DTYPES = ("float32", "float64", "float16", "bfloat16")


@dataclass(frozen=True)
class CallSpec:
    """One call of a program: the inputs' shape and dtype, the int argument, a data seed."""

    shape: tuple[int, int]
    dtype: str
    n: int
    data_seed: int


@dataclass(frozen=True)
class Program:
    seed: int
    source: str
    entry: str  # "function" (program) or "module" (Program().forward)
    calls: tuple[CallSpec, ...]
    features: frozenset[str]

    @property
    def filename(self) -> str:
        return f"<fuzz program {self.seed}>"


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


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


class _Generator:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.features: set[str] = set()
        self.counter = 0  # fresh names
        self.helpers: list[str] = []  # module-level tensor helpers: name(t, k)
        self.disabled: list[str] = []  # module-level @sapwood.disable helpers: name(t)
        self.grows_xs = False  # the function being generated appends to xs

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

    # ------------------------------------------------------------------ statements

    def block(self, s: Scope, low: int, high: int) -> list[str]:
        lines: list[str] = []
        for _ in range(self.rng.randint(low, high)):
            lines += self.statement(s)
        return lines or ["pass"]

    def statement(self, s: Scope) -> list[str]:
        deep = s.depth >= 2
        options: list[tuple[float, Callable[[], list[str]]]] = [
            (6, lambda: self.assign_tensor(s)),
            (3, lambda: self.assign_int(s)),
            (2, lambda: self.augmented(s)),
            (2, lambda: self.in_place(s)),
            (2, lambda: self.graph_break(s)),
            (1, lambda: self.global_effect(s)),
            (1, lambda: self.comprehension(s)),
            (0.5, lambda: self.lambda_call(s)),
            (1, lambda: self.python_idiom(s)),
            (0.3, lambda: [f"assert {self.static_cond(s)} or True"]),
        ]
        if not deep:
            options += [
                (2.5, lambda: self.if_static(s)),
                (1.2, lambda: self.if_data(s)),
                (2, lambda: self.for_loop(s)),
                (0.8, lambda: self.while_loop(s)),
                (1.5, lambda: self.try_block(s)),
                (0.5, lambda: self.no_grad_block(s)),
            ]
            if s.def_depth < 2:
                options.append((1.5, lambda: self.nested_function(s)))
                options.append((0.4, lambda: self.generator_function(s)))
        if s.inputs:
            options += [
                (2, lambda: self.container_effect(s)),
                (1.2, lambda: self.module_effect(s)),
            ]
        if s.in_loop:
            options.append((0.6, lambda: [f"if {self.static_cond(s)}:", "    break"]))
            options.append((0.4, lambda: [f"if {self.static_cond(s)}:", "    continue"]))
        if s.kind in ("program", "nested", "helper") and not s.in_try:
            options.append((0.15, lambda: self.escape(s)))
        if s.kind in ("program", "nested") and s.depth > 0:
            options.append((0.3, lambda: [f"if {self.static_cond(s)}:", *self.return_lines(s)]))
        result = self.pick(options)
        assert isinstance(result, list)
        return result

    def assign_tensor(self, s: Scope) -> list[str]:
        return [f"{self.choice(s.tensors)} = {self.tensor_expr(s)}"]

    def assign_int(self, s: Scope) -> list[str]:
        return [f"{self.choice(s.ints)} = {self.int_expr(s)} % {self.rng.randint(3, 7)}"]

    def augmented(self, s: Scope) -> list[str]:
        if self.chance(0.3):
            return [f"{self.choice(s.ints)} += {self.rng.randint(1, 2)}"]
        # `t += e` on a tensor is in place: it mutates an input when t still aliases one
        self.use("augmented assignment")
        op = self.choice(["+=", "-=", "*="])
        return [f"{self.choice(s.tensors)} {op} {self.broadcast_expr(s, 2)}"]

    def in_place(self, s: Scope) -> list[str]:
        self.use("in-place mutation")
        if s.inputs and self.chance(0.3):
            target = self.choice(["xs[0]", "xs[-1]", 'd["w"]', "box.v"])
        else:
            target = self.choice(s.all_tensors())
        return [
            str(
                self.pick(
                    [
                        (3, lambda: f"{target}.add_({self.broadcast_expr(s, 2)})"),
                        (2, lambda: f"{target}.mul_({self.scalar(s)})"),
                        (1, lambda: f"{target}.clamp_(-3, 3)"),
                        (1, lambda: f"{target}.sub_({self.broadcast_expr(s, 2)}.tanh())"),
                        (1, lambda: f"{target}[0] = {self.scalar(s)}"),
                        (
                            1,
                            lambda: (
                                f"{target}[:, 0] = {self.tensor_expr(s, 2)}[:, 1 % {target}.shape[1]]"
                            ),
                        ),
                        (1, lambda: f"{target}[0].add_(1)"),
                        (0.5, lambda: f"{target}.copy_({self.tensor_expr(s, 2)})"),
                        (0.5, lambda: f"{target}.zero_()"),
                    ]
                )
            )
        ]

    def graph_break(self, s: Scope) -> list[str]:
        self.use("graph breaks")
        t = self.choice(s.all_tensors())
        k = self.choice(s.ints)
        options: list[tuple[float, Callable[[], object]]] = [
            (2, lambda: ["sapwood.graph_break()"]),
            (
                2,
                lambda: [
                    f'print("at {self.fresh("p")}", {self.int_expr(s, 2)}, tuple({t}.shape), {t}.dtype)'
                ],
            ),
            (1, lambda: [f"print({t}.detach().sum())"]),
            (
                2,
                lambda: [
                    f"{k} = int(torch.nan_to_num({t}).sum().clamp(-50, 50).item()) % "
                    f"{self.rng.randint(2, 5)}"
                ],
            ),
            (0.5, lambda: [f"{k} = len({t}.tolist()) % 4"]),
        ]
        if self.disabled:
            options.append(
                (1, lambda: [f"{self.choice(s.tensors)} = {self.choice(self.disabled)}({t})"])
            )
        if s.inputs:
            options.append((0.5, lambda: ['print("d has", sorted(d), len(xs))']))
        result = self.pick(options)
        assert isinstance(result, list)
        return result

    def global_effect(self, s: Scope) -> list[str]:
        self.use("globals")

        def write(name: str, line: str) -> list[str]:
            s.globals_written.add(name)
            return [line]

        t = self.choice(s.all_tensors())
        result = self.pick(
            [
                (2, lambda: write("G_N", "G_N += 1")),
                (1, lambda: write("G_N", f"G_N = (G_N + {self.int_expr(s, 2)}) % 5")),
                (1, lambda: write("G_T", f"G_T = G_T + {t}.sum().detach()")),
                (0.5, lambda: write("G_T", "G_T = G_T * 0.5")),
                (1, lambda: write("G_FLAG", "G_FLAG = not G_FLAG")),
                (1.5, lambda: [f"G_LIST.append({self.int_expr(s, 2)})"]),
                (0.5, lambda: [f'G_D["{self.choice(["x", "y"])}"] = {self.int_expr(s, 2)}']),
                (
                    1,
                    lambda: [f"{self.choice(s.tensors)} = {t} * G_SCALE + G_T"],
                ),
            ]
        )
        assert isinstance(result, list)
        return result

    def container_effect(self, s: Scope) -> list[str]:
        t = self.choice(s.all_tensors())
        k = self.choice(s.ints)
        options: list[tuple[float, Callable[[], object]]] = [
            (2, lambda: [f"xs[{self.choice(['0', '1', '-1'])}] = {self.tensor_expr(s, 2)}"]),
            (1, lambda: [f"{self.choice(s.tensors)} = xs[0] + xs[-1] * len(xs)"]),
            (2, lambda: [f'd["w"] = {self.tensor_expr(s, 2)}']),
            (1, lambda: [f'd["k"] = d["k"] + {self.int_expr(s, 1)}']),
            (1, lambda: [f'd["extra"] = {self.int_expr(s, 2)}']),
            (0.5, lambda: [f'd["extra"] = [{k}, {t}.shape[0]]']),
            (
                0.5,
                lambda: [
                    f'{k} = d.get("extra", {self.int_expr(s, 1)}) if "extra" not in d or isinstance(d["extra"], int) else len(d["extra"])'
                ],
            ),
            (0.5, lambda: ['d.pop("extra", None)']),
            (1, lambda: [f'{self.choice(s.tensors)} = d.get("missing", {t}) * 2']),
            (1.5, lambda: [f"box.v = {self.tensor_expr(s, 2)}"]),
            (1, lambda: [f"box.n = box.n + {self.int_expr(s, 1)}"]),
            (0.7, lambda: [f"box.extra = {k}"]),
            (0.5, lambda: [f'{k} = getattr(box, "extra", {self.int_expr(s, 1)}) % 5']),
        ]
        if not s.iterating_xs:
            options += [
                (2, lambda: self.grow([f"xs.append({self.tensor_expr(s, 2)})"])),
                (0.5, lambda: self.grow([f"xs.insert(0, {t})"])),
                (
                    0.7,
                    lambda: [
                        f"xs.append({t} * {self.scalar(s)})",
                        f"{self.choice(s.tensors)} = xs.pop()",
                    ],
                ),
                (0.5, lambda: self.grow([f"xs.extend([{t}, {t}.cos()])"])),
            ]
        result = self.pick(options)
        assert isinstance(result, list)
        if any(x.startswith(("xs", "d[", "d.", "box")) for x in result):
            self.use("containers mutated")
        return result

    def grow(self, lines: list[str]) -> list[str]:
        self.grows_xs = True
        return lines

    def module_effect(self, s: Scope) -> list[str]:
        self.use("module attribute mutation")
        result = self.pick(
            [
                (2, lambda: [f"{self.choice(s.tensors)} = mod({self.tensor_expr(s, 2)})"]),
                (1, lambda: ["mod.count += 1"]),
                (1, lambda: ["mod.scale = mod.scale * 0.5 + 1"]),
                (1, lambda: [f"mod.history.append({self.int_expr(s, 2)})"]),
                (0.7, lambda: [f"mod.last = {self.tensor_expr(s, 2)}.sum()"]),
                (0.5, lambda: ["mod.train(not mod.training)"]),
                (
                    0.5,
                    lambda: [f"{self.choice(s.tensors)} = {self.choice(s.all_tensors())} * mod.w"],
                ),
            ]
        )
        assert isinstance(result, list)
        return result

    def python_idiom(self, s: Scope) -> list[str]:
        """Plain Python around the tensors: unpacking, strings, dict deletion, kwargs."""
        t = self.choice(s.all_tensors())
        k = self.choice(s.ints)
        options: list[tuple[float, Callable[[], object]]] = [
            (
                1,
                lambda: (
                    ["{0}, {1} = {1}, {0}".format(*self.rng.sample(s.tensors, 2))]
                    if len(s.tensors) > 1
                    else [f"{k}, = ({k},)"]
                ),
            ),
            (1, lambda: [f'{k} = len("-".join(str(c) for c in range({self.small_count(s)})))']),
            (1, lambda: [f'print(f"{{{k}}}:{{tuple({t}.shape)}}:{{{t}.dtype}}")']),
            (0.7, lambda: [f"{k} = int({t}.shape[0] > 1) + (not G_FLAG)"]),
        ]
        if s.inputs:
            options += [
                (1, lambda: ["first, *rest = xs", f"{self.choice(s.tensors)} = first + len(rest)"]),
                (0.7, lambda: ['if "extra" in d:', '    del d["extra"]']),
                (0.5, lambda: [f"{k} = sum(len(v.shape) for v in xs) % 5"]),
            ]
        if self.helpers:
            options.append(
                (
                    1,
                    lambda: [
                        f"{self.choice(s.tensors)} = {self.choice(self.helpers)}(t={t}, k={self.int_expr(s, 1)})"
                    ],
                )
            )
        self.use("python idioms")
        result = self.pick(options)
        assert isinstance(result, list)
        return result

    def generator_function(self, s: Scope) -> list[str]:
        """A nested generator, consumed at once."""
        self.use("generator functions")
        name = self.fresh("gen")
        t = self.choice(s.all_tensors())
        return [
            f"def {name}(t, count):",
            "    for c in range(count):",
            f"        yield t * c + {self.choice(s.all_tensors())}",
            f"{self.choice(s.tensors)} = sum({name}({t}, {self.rng.randint(1, 3)}), {t})",
        ]

    def lambda_call(self, s: Scope) -> list[str]:
        self.use("closures")
        name = self.fresh("fn")
        captured = self.choice(s.all_ints())
        body = f"lambda t, s={self.rng.randint(1, 3)}: t * s + {captured}"
        return [
            f"{name} = {body}",
            f"{self.choice(s.tensors)} = {name}({self.tensor_expr(s, 2)})",
        ]

    def comprehension(self, s: Scope) -> list[str]:
        self.use("comprehensions")
        t = self.choice(s.all_tensors())
        target = self.choice(s.tensors)
        k = self.choice(s.ints)
        options: list[tuple[float, Callable[[], object]]] = [
            (
                2,
                lambda: [
                    f"ys = [{t} * c + {self.int_expr(s, 1)} for c in range(1, "
                    f"{self.rng.randint(2, 4)})]",
                    f"{target} = ys[-1] - len(ys)",
                ],
            ),
            (
                1.5,
                lambda: [
                    f'dd = {{f"k{{c}}": {t} + c for c in range({self.rng.randint(1, 3)})}}',
                    f'{target} = dd["k0"] * len(dd)',
                ],
            ),
            (
                1,
                lambda: [
                    f"ss = {{c % 3 for c in range({self.int_expr(s, 2)} % 5)}}",
                    f"{k} = len(ss) + max(ss, default=0)",
                ],
            ),
            (1, lambda: [f"{k} = sum(1 for c in range({self.small_count(s)}) if c != 1)"]),
            (
                1,
                lambda: [
                    f"{target} = sum(({t}.sin() * c for c in range({self.rng.randint(1, 3)})), {t})"
                ],
            ),
            (
                0.5,
                lambda: [
                    f"{k} = len([c for c in ({t}, {self.choice(s.all_tensors())}) if c.sum() > 0])"
                ],
            ),
        ]
        if s.inputs:
            options += [
                (
                    1.5,
                    lambda: [
                        f"ys = [v * {self.scalar(s)} for v in xs]",
                        f"{target} = ys[0] + ys[-1]",
                    ],
                ),
                (
                    0.7,
                    lambda: [
                        "pairs = {i: v.shape[0] for i, v in enumerate(xs)}",
                        f"{k} = sum(pairs.values()) % 5",
                    ],
                ),
                (
                    0.5,
                    lambda: [
                        f"{k} = len({{key for key in d if key != 'w'}})",
                    ],
                ),
            ]
        result = self.pick(options)
        assert isinstance(result, list)
        return result

    def if_static(self, s: Scope) -> list[str]:
        lines = [f"if {self.static_cond(s)}:", *_indent(self.block(s.child(), 1, 2))]
        if self.chance(0.3):
            lines += [f"elif {self.static_cond(s)}:", *_indent(self.block(s.child(), 1, 2))]
        if self.chance(0.6):
            lines += ["else:", *_indent(self.block(s.child(), 1, 2))]
        return lines

    def if_data(self, s: Scope) -> list[str]:
        lines = [f"if {self.data_cond(s)}:", *_indent(self.block(s.child(), 1, 2))]
        if self.chance(0.6):
            lines += ["else:", *_indent(self.block(s.child(), 1, 2))]
        return lines

    def for_loop(self, s: Scope) -> list[str]:
        self.use("loops")
        var = self.fresh("i")
        kind = self.rng.random()
        if s.inputs and kind < 0.3 and not s.iterating_xs:
            v = self.fresh("v")
            child = s.child(in_loop=True, iterating_xs=True, ro_tensors=[*s.ro_tensors, v])
            header = self.choice(
                [
                    f"for {v} in xs:",
                    f"for {var}, {v} in enumerate(xs):",
                    f"for {v}, {var} in zip(xs, range(len(xs) - 1, -1, -1)):",
                ]
            )
            if var in header:
                child.ro_ints = [*child.ro_ints, var]
            return [header, *_indent(self.block(child, 1, 2))]
        if s.inputs and kind < 0.36:
            key, val = self.fresh("key"), self.fresh("val")
            child = s.child(in_loop=True, ro_tensors=[*s.ro_tensors, val])
            return [
                f"for {key}, {val} in list(d.items()):",
                f"    if not isinstance({val}, torch.Tensor):",
                "        continue",
                *_indent(self.block(child, 1, 2)),
            ]
        if kind < 0.4:
            u = self.fresh("u")
            child = s.child(in_loop=True, ro_tensors=[*s.ro_tensors, u], ro_ints=[*s.ro_ints, var])
            return [
                f"for {var}, {u} in enumerate([{self.choice(s.all_tensors())}, "
                f"{self.choice(s.all_tensors())}]):",
                *_indent(self.block(child, 1, 2)),
            ]
        child = s.child(in_loop=True, ro_ints=[*s.ro_ints, var])
        return [f"for {var} in range({self.small_count(s)}):", *_indent(self.block(child, 1, 2))]

    def while_loop(self, s: Scope) -> list[str]:
        self.use("loops")
        var = self.fresh("w")
        child = s.child(in_loop=True, ro_ints=[*s.ro_ints, var])
        body = self.block(child, 1, 2)
        # the counter steps first, so `continue` cannot loop forever
        return [
            f"{var} = 0",
            f"while {var} < {self.small_count(s)}:",
            f"    {var} += 1",
            *_indent(body),
        ]

    def no_grad_block(self, s: Scope) -> list[str]:
        self.use("with blocks")
        manager = self.choice(["torch.no_grad()", "torch.enable_grad()"])
        return [f"with {manager}:", *_indent(self.block(s.child(), 1, 2))]

    def try_block(self, s: Scope) -> list[str]:
        self.use("try/except")
        inner = s.child(in_try=True)
        k = self.choice(s.ints)
        t = self.choice(s.tensors)
        raising: list[tuple[float, Callable[[], object]]] = [
            (
                3,
                lambda: (
                    "ValueError",
                    [f"if {self.static_cond(s)}:", '    raise ValueError("bad value")'],
                ),
            ),
            (
                1,
                lambda: (
                    "IndexError",
                    [f"{k} = xs[len(xs) + {self.rng.randint(0, 2)}].dim()"]
                    if s.inputs
                    else [f"{k} = [1, 2][{self.rng.randint(2, 4)}]"],
                ),
            ),
            (
                1,
                lambda: (
                    "KeyError",
                    [f'{t} = {t} + (d if {self.static_cond(s)} else {{}})["w"]']
                    if s.inputs
                    else [f'{k} = {{"a": 1}}["b"]'],
                ),
            ),
            (1, lambda: ("ZeroDivisionError", [f"{k} = {k} // ({self.int_expr(s, 1)} * 0)"])),
            (
                0.8,
                lambda: (
                    "RuntimeError",
                    [f"if {self.data_cond(s)}:", '    raise RuntimeError("data")'],
                ),
            ),
            (0.5, lambda: ("TypeError", [f"{k} = len({t}.shape[0])"])),
            (0.5, lambda: ("AttributeError", [f"{k} = {t}.no_such_attribute"])),
            (0.7, lambda: ("", [])),  # nothing raises
        ]
        if self.helpers:
            raising.append(
                (0.5, lambda: ("ValueError", [f"{t} = {self.choice(self.helpers)}({t}, 99)"]))
            )
        picked = self.pick(raising)
        assert isinstance(picked, tuple)
        exc, raise_lines = picked
        body = self.block(inner, 0, 1)
        if self.chance(0.5):
            body = [line for line in body if line != "pass"] + raise_lines
        else:
            body = raise_lines + [line for line in body if line != "pass"]
        body += [line for line in self.block(inner, 0, 1) if line != "pass"]
        lines = ["try:", *_indent(body or ["pass"])]
        caught = exc or "ValueError"
        handler = self.choice([caught, f"({caught}, KeyError)", "Exception", f"{caught} as e"])
        handler_body = self.block(s.child(), 1, 1)
        if handler.endswith(" as e"):
            handler_body = [f"{self.choice(s.ints)} = len(str(e)) % 5", *handler_body]
        lines += [f"except {handler}:", *_indent(handler_body)]
        if self.chance(0.3):
            lines += ["else:", *_indent(self.block(s.child(), 1, 1))]
        if self.chance(0.4):
            self.use("finally")
            lines += ["finally:", *_indent(self.block(s.child(in_try=True), 1, 1))]
        return lines

    def escape(self, s: Scope) -> list[str]:
        self.use("escaping exceptions")
        exc = self.choice(["ValueError", "RuntimeError", "KeyError"])
        return [f"if {self.static_cond(s)}:", f'    raise {exc}("escaped")']

    def nested_function(self, s: Scope) -> list[str]:
        """``def inner(t, s=K)`` reading enclosing names, some declared ``nonlocal``."""
        self.use("nested functions")
        name = self.fresh("inner")
        nonlocal_names: list[str] = []
        # the parameters of the new function cannot also be nonlocal
        candidates = [v for v in s.tensors + s.ints if v not in ("t", "s")]
        if candidates and self.chance(0.5):
            count = self.rng.randint(1, min(2, len(candidates)))
            nonlocal_names = self.rng.sample(candidates, count)
            self.use("nonlocal")
        if s.kind != "helper" or s.def_depth > 0:
            self.use("closures")
        tensors = ["t"] + [v for v in nonlocal_names if v in s.tensors]
        ints = ["s"] + [v for v in nonlocal_names if v in s.ints]
        inner = Scope(
            kind="nested",
            tensors=tensors,
            ints=ints,
            ro_tensors=[v for v in s.all_tensors() if v not in tensors],
            ro_ints=[v for v in s.all_ints() if v not in ints],
            callables=list(s.callables),
            inputs=s.inputs,
            depth=1,
            def_depth=s.def_depth + 1,
            iterating_xs=s.iterating_xs,
        )
        grew = self.grows_xs
        self.grows_xs = False
        body = self.block(inner, 1, 2)
        header = [f"def {name}(t, s={self.rng.randint(1, 3)}):"]
        if nonlocal_names:
            header.append(f"    nonlocal {', '.join(nonlocal_names)}")
        if inner.globals_written:
            header.append(f"    global {', '.join(sorted(inner.globals_written))}")
        lines = [*header, *_indent(body), f"    return {self.tensor_expr(inner, 3)}"]
        if not self.grows_xs:
            s.callables.append(name)
        else:
            s.growing_callables.append(name)
        self.grows_xs = grew or self.grows_xs
        target = self.choice(s.tensors)
        lines.append(f"{target} = {name}({self.tensor_expr(s, 2)})")
        if self.chance(0.4):
            lines.append(f"{self.choice(s.tensors)} = {name}({target}, {self.int_expr(s, 1)})")
        return lines

    def return_lines(self, s: Scope) -> list[str]:
        if s.kind == "nested":
            return [f"    return {self.tensor_expr(s, 2)}"]
        return [f"    return {self.return_value(s)}"]

    def return_value(self, s: Scope) -> str:
        self.use("containers out")
        t = lambda: self.choice(s.all_tensors())  # noqa: E731
        k = lambda: self.choice(s.all_ints())  # noqa: E731
        items: list[tuple[float, Callable[[], object]]] = [
            (4, t),
            (2, k),
            (1, lambda: f"[{t()}, {k()}]"),
            (1, lambda: f'{{"t": {t()}, "k": {k()}}}'),
            (1, lambda: f"({t()}, ({k()}, {t()}))"),
            (0.5, lambda: "None"),
            (0.3, lambda: "G_N"),
            (0.3, lambda: "G_T"),
            (0.5, lambda: f"{t()}.shape"),
        ]
        if s.inputs:
            items += [
                (1, lambda: "xs"),
                (0.7, lambda: "d"),
                (0.5, lambda: "box.n"),
                (0.5, lambda: "mod.count"),
                (0.5, lambda: "a"),
                (0.3, lambda: "box"),
            ]
        parts = [str(self.pick(items)) for _ in range(self.rng.randint(1, 4))]
        return parts[0] if len(parts) == 1 else ", ".join(parts)

    # ------------------------------------------------------------------ program parts

    def helper_function(self, index: int) -> list[str]:
        name = f"helper{index}"
        s = Scope(kind="helper", tensors=["t", "u"], ints=["k", "j"], depth=1)
        body = self.block(s, 1, 3)
        lines = [f"def {name}(t, k=1):"]
        if s.globals_written:
            lines.append(f"    global {', '.join(sorted(s.globals_written))}")
        lines += [
            "    if k == 99:",
            '        raise ValueError("helper got 99")',
            "    u = t * 0.5",
            "    j = k % 3",
            *_indent(body),
            f"    return {self.tensor_expr(s, 3)}",
        ]
        self.helpers.append(name)
        return lines

    def disabled_function(self, index: int) -> list[str]:
        self.use("disabled functions")
        name = f"eager_only{index}"
        self.disabled.append(name)
        return [
            "@sapwood.disable",
            f"def {name}(t):",
            f"    return t * {self.rng.randint(1, 3)} - t.mean()",
        ]

    def counter_module(self) -> list[str]:
        s = Scope(kind="forward", tensors=["x"], ints=["c"], depth=1)
        body: list[str] = ["self.count += 1", "c = self.count % 3"]
        extras = [
            ["self.history.append(self.count)"],
            ["self.total.add_(x.detach().mean().to(self.total.dtype))"],
            ["self.last = x.sum()"],
            ["if self.count % 2 == 0:", "    x = x * 2"],
            ["self.scale = self.scale + 0.5"],
            ["sapwood.graph_break()"],
            ['print("counter", self.count, tuple(x.shape))'],
            [f"x = {self.tensor_expr(s, 2)}"],
            ["if self.training:", "    x = x + 1"],
        ]
        for extra in self.rng.sample(extras, self.rng.randint(0, 3)):
            body += extra
        if any("graph_break" in line or "print" in line for line in body):
            self.use("graph breaks in a module")
        ret = self.choice(
            ["x * self.w + self.scale", "x * self.scale + self.total", "x + c", "x * self.w"]
        )
        return [
            "class Counter(torch.nn.Module):",
            "    def __init__(self):",
            "        super().__init__()",
            "        self.w = torch.nn.Parameter(torch.tensor(0.5))",
            '        self.register_buffer("total", torch.zeros(()))',
            "        self.count = 0",
            "        self.scale = 1.5",
            "        self.history = []",
            "",
            "    def forward(self, x):",
            *_indent(_indent(body)),
            f"        return {ret}",
        ]

    def inputs_function(self) -> list[str]:
        alias = self.rng.random()
        xs = "[torch.randn(shape, dtype=dtype, generator=g) for _ in range(2)]"
        w = "torch.randn(shape, dtype=dtype, generator=g)"
        v = "torch.randn(shape, dtype=dtype, generator=g)"
        if alias < 0.1:
            xs = "[a, torch.randn(shape, dtype=dtype, generator=g)]"
            self.use("aliased inputs")
        elif alias < 0.15:
            w = "b"
            self.use("aliased inputs")
        elif alias < 0.2:
            v = "a"
            self.use("aliased inputs")
        return [
            "def make_inputs(shape, dtype, n, seed):",
            "    g = torch.Generator().manual_seed(seed)",
            "    a = torch.randn(shape, dtype=dtype, generator=g)",
            "    b = torch.randn(shape, dtype=dtype, generator=g)",
            f"    xs = {xs}",
            f'    d = {{"w": {w}, "k": n + 1}}',
            f"    box = Box({v}, n)",
            "    return a, b, n, xs, d, box",
        ]

    def calls(self) -> tuple[CallSpec, ...]:
        def shape() -> tuple[int, int]:
            return (self.rng.choice([1, 2, 3, 3, 4, 5]), self.rng.choice([1, 2, 3, 4, 4, 5]))

        def dtype() -> str:
            return self.rng.choices(DTYPES, weights=[70, 20, 5, 5])[0]

        first = CallSpec(shape(), dtype(), self.rng.randint(-2, 4), self.rng.getrandbits(31))
        calls = [first]
        for _ in range(self.rng.choices([1, 2, 3], weights=[55, 30, 15])[0]):
            prev = calls[-1]
            change = self.rng.choices(
                ["same", "shape", "dtype", "n", "all"], weights=[25, 35, 15, 15, 10]
            )[0]
            new = replace(prev, data_seed=self.rng.getrandbits(31))
            if change in ("shape", "all"):
                new = replace(new, shape=shape())
            if change in ("dtype", "all"):
                new = replace(new, dtype=dtype())
            if change in ("n", "all"):
                new = replace(new, n=self.rng.randint(-2, 4))
            calls.append(new)
        if len({c.shape for c in calls}) > 1:
            self.use("new shapes")
        if len({c.dtype for c in calls}) > 1:
            self.use("new dtypes")
        return tuple(calls)

    def program(self) -> Program:
        header = [
            f"# sapwood fuzz program, seed {self.seed}",
            "import torch",
            "",
            "import sapwood",
            "",
            "G_N = 0",
            "G_T = torch.tensor(1.0)",
            "G_FLAG = True",
            "G_SCALE = 0.75",
            "G_LIST = []",
            "G_D = {}",
            "",
            "",
            "class Box:",
            "    def __init__(self, v, n):",
            "        self.v = v",
            "        self.n = n",
            "",
        ]
        parts: list[list[str]] = []
        for i in range(self.rng.choice([0, 0, 1, 1, 2])):
            parts.append(self.disabled_function(i))
        for i in range(self.rng.choice([0, 1, 1, 2])):
            self.use("helper functions")
            parts.append(self.helper_function(i))
        parts.append(self.counter_module())

        entry = "module" if self.chance(0.2) else "function"
        s = Scope(
            kind="program",
            tensors=["a", "b", "t0", "t1"],
            ints=["k0", "k1"],
            ro_ints=["n"],
            inputs=True,
        )
        prologue = [
            self.choice(["t0 = a", "t0 = a * 1", "t0 = a.clone()"]),
            self.choice(["t1 = b + 0", "t1 = b", "t1 = torch.sin(b)"]),
            "k0 = n % 3",
            self.choice(["k1 = len(xs)", "k1 = 1", "k1 = a.shape[1]"]),
        ]
        body = self.block(s, 2, 6)
        returned = self.return_value(s)
        declarations = []
        if s.globals_written:
            declarations.append(f"global {', '.join(sorted(s.globals_written))}")
        if entry == "function":
            self.use("function entry")
            entry_lines = [
                "def program(a, b, n, xs, d, box, mod):",
                *_indent(declarations + prologue + body),
                f"    return {returned}",
            ]
        else:
            self.use("module entry")
            entry_lines = [
                "class Program(torch.nn.Module):",
                "    def __init__(self):",
                "        super().__init__()",
                "        self.sub = Counter()",
                "        self.calls = 0",
                "",
                "    def forward(self, a, b, n, xs, d, box):",
                *_indent(
                    _indent([*declarations, "mod = self.sub", "self.calls += 1", *prologue, *body])
                ),
                f"        return {returned}",
            ]
        parts.append(entry_lines)
        parts.append(self.inputs_function())
        source = "\n".join(header + [line for part in parts for line in [*part, "", ""]])
        return Program(
            seed=self.seed,
            source=source.rstrip() + "\n",
            entry=entry,
            calls=self.calls(),
            features=frozenset(self.features),
        )


def generate(seed: int) -> Program:
    """The program of ``seed`` (deterministic)."""
    return _Generator(seed).program()
