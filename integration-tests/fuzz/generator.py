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
* A program may define ``G_ODD``, an object whose special methods return values Python may
  refuse (:mod:`fuzz.oddities`); it is used only inside ``try`` blocks that catch those
  errors.

Features are weighted; each program records the features it used (``Program.features``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .expressions import Scope, indent
from .oddities import odd_class
from .statements import StatementWriter

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


class _ProgramWriter(StatementWriter):
    """Writes the parts of a program around its entry point, and the calls."""

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
            *indent(body),
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
            *indent(indent(body)),
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
        if self.chance(0.3):
            self.use("odd special methods")
            lines, self.odd = odd_class(self.rng)
            header += lines
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
                *indent(declarations + prologue + body),
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
                *indent(
                    indent([*declarations, "mod = self.sub", "self.calls += 1", *prologue, *body])
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
    return _ProgramWriter(seed).program()
