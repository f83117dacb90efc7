"""Statements of the fuzzer's programs, one method per construct, with their weights.

:meth:`StatementWriter.statement` picks a construct for a scope: assignments, in-place ops,
graph breaks (``sapwood.graph_break()``, ``print``, ``.item()``, disabled functions),
globals, containers, the module, comprehensions, ``if``/``for``/``while`` on constants and on
tensor data, ``try``/``except``/``finally``, nested functions with ``nonlocal``, generators,
``return`` and exceptions that escape. Each returns its lines, unindented; blocks indent
their bodies. The invariants are listed in :mod:`fuzz.generator`.
"""

from __future__ import annotations

from collections.abc import Callable

from .expressions import ExpressionWriter, Scope, indent
from .oddities import ODD_ERRORS, odd_use

__all__ = ["StatementWriter"]


class StatementWriter(ExpressionWriter):
    """Writes statements; :mod:`fuzz.generator` assembles them into programs."""

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
        if self.odd:
            options.append((1.5, lambda: self.odd_statement(s)))
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
        return [f"{self.choice(s.tensors)} {op} {self._operand(s)}"]

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
                        (3, lambda: f"{target}.add_({self._operand(s)})"),
                        (2, lambda: f"{target}.mul_({self.scalar(s)})"),
                        (1, lambda: f"{target}.clamp_(-3, 3)"),
                        (1, lambda: f"{target}.sub_({self._operand(s)}.tanh())"),
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

    def _operand(self, s: Scope) -> str:
        """An operand of an in-place op that cannot be a view of its target: an operand that
        overlaps the tensor written to makes the op raise when it runs, and the side effects
        traced before such an op are then lost (a documented limitation of graph capture, as
        in torch.compile: FINDINGS.md #2), which is not what the fuzzer looks for."""
        expr = self.broadcast_expr(s, 2)
        return f"({expr}).clone()" if "[" in expr else expr

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
        lines = [f"if {self.static_cond(s)}:", *indent(self.block(s.child(), 1, 2))]
        if self.chance(0.3):
            lines += [f"elif {self.static_cond(s)}:", *indent(self.block(s.child(), 1, 2))]
        if self.chance(0.6):
            lines += ["else:", *indent(self.block(s.child(), 1, 2))]
        return lines

    def if_data(self, s: Scope) -> list[str]:
        lines = [f"if {self.data_cond(s)}:", *indent(self.block(s.child(), 1, 2))]
        if self.chance(0.6):
            lines += ["else:", *indent(self.block(s.child(), 1, 2))]
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
            return [header, *indent(self.block(child, 1, 2))]
        if s.inputs and kind < 0.36:
            key, val = self.fresh("key"), self.fresh("val")
            child = s.child(in_loop=True, ro_tensors=[*s.ro_tensors, val])
            return [
                f"for {key}, {val} in list(d.items()):",
                f"    if not isinstance({val}, torch.Tensor):",
                "        continue",
                *indent(self.block(child, 1, 2)),
            ]
        if kind < 0.4:
            u = self.fresh("u")
            child = s.child(in_loop=True, ro_tensors=[*s.ro_tensors, u], ro_ints=[*s.ro_ints, var])
            return [
                f"for {var}, {u} in enumerate([{self.choice(s.all_tensors())}, "
                f"{self.choice(s.all_tensors())}]):",
                *indent(self.block(child, 1, 2)),
            ]
        child = s.child(in_loop=True, ro_ints=[*s.ro_ints, var])
        return [f"for {var} in range({self.small_count(s)}):", *indent(self.block(child, 1, 2))]

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
            *indent(body),
        ]

    def no_grad_block(self, s: Scope) -> list[str]:
        self.use("with blocks")
        manager = self.choice(["torch.no_grad()", "torch.enable_grad()"])
        return [f"with {manager}:", *indent(self.block(s.child(), 1, 2))]

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
        if self.odd:
            raising.append((2, lambda: (ODD_ERRORS, [odd_use(self.rng, self.odd, t, k)])))
        picked = self.pick(raising)
        assert isinstance(picked, tuple)
        exc, raise_lines = picked
        body = self.block(inner, 0, 1)
        if self.chance(0.5):
            body = [line for line in body if line != "pass"] + raise_lines
        else:
            body = raise_lines + [line for line in body if line != "pass"]
        body += [line for line in self.block(inner, 0, 1) if line != "pass"]
        lines = ["try:", *indent(body or ["pass"])]
        caught = exc or "ValueError"
        handler = self.choice([caught, f"({caught}, KeyError)", "Exception", f"{caught} as e"])
        handler_body = self.block(s.child(), 1, 1)
        if handler.endswith(" as e"):
            handler_body = [f"{self.choice(s.ints)} = len(str(e)) % 5", *handler_body]
        lines += [f"except {handler}:", *indent(handler_body)]
        if self.chance(0.3):
            lines += ["else:", *indent(self.block(s.child(), 1, 1))]
        if self.chance(0.4):
            self.use("finally")
            lines += ["finally:", *indent(self.block(s.child(in_try=True), 1, 1))]
        return lines

    def odd_statement(self, s: Scope) -> list[str]:
        """A use of ``G_ODD`` whose refused results are caught: the error's message is
        recorded with the calls, so both sides must raise the same words."""
        use = odd_use(self.rng, self.odd, self.choice(s.tensors), self.choice(s.ints))
        return [
            "try:",
            f"    {use}",
            f"except {ODD_ERRORS} as e:",
            "    G_CALLS.append(f'{type(e).__name__}: {e}')",
        ]

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
        lines = [*header, *indent(body), f"    return {self.tensor_expr(inner, 3)}"]
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
