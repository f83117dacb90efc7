"""Guard records: what a compiled graph assumed about its inputs.

A guard is a *record*, not a check: a kind, the source it is about, and the expected value.
Turning guards into fast runtime checks is the frontend's job; this module keeps them,
deduplicates them and renders them for people.

Invariants:

* :class:`Guard` is frozen and hashable; two guards are the same guard exactly when kind,
  source, expected value and symbol bindings are equal. :class:`GuardSet` keeps the first
  insertion of each and iterates in insertion order, so rendering is deterministic.
* Shape guards (:attr:`GuardKind.SHAPE`) carry a sympy boolean expression whose free symbols
  are all bound to sources in :attr:`Guard.symbols`; rendering substitutes the sources, so a
  person reads ``L['x'].size()[0] == L['y'].size()[1]``, never ``s0 == s1``.

Example::

    >>> from sapwood_graph import Guard, GuardKind, GuardSet, LocalSource
    >>> guards = GuardSet()
    >>> guards.add(Guard(GuardKind.CONSTANT_MATCH, LocalSource("n"), 3))
    True
    >>> print(guards.render())
    L['n'] == 3
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from sapwood_graph._lazy import lazy
from sapwood_graph.sources import Source

if TYPE_CHECKING:
    import sympy
else:
    sympy = lazy("sympy")

__all__ = ["Guard", "GuardKind", "GuardSet", "TensorSpec"]


class GuardKind(enum.Enum):
    """What a guard asserts about its source."""

    #: The tensor at ``source`` matches ``expected`` (a :class:`TensorSpec`).
    TENSOR_MATCH = "tensor_match"
    #: ``type(source) is expected``.
    TYPE_MATCH = "type_match"
    #: ``id(source) == expected`` (the frontend keeps the object alive).
    ID_MATCH = "id_match"
    #: ``source == expected`` for a constant (int, float, str, bool, None, tuple of those, …).
    CONSTANT_MATCH = "constant_match"
    #: ``source is expected`` where ``expected`` is another :class:`Source` (two inputs that
    #: were the same object and now share one graph input).
    ALIAS_MATCH = "alias_match"
    #: ``expected`` is a sympy boolean over symbols bound to sources in ``symbols``.
    SHAPE = "shape"


@dataclasses.dataclass(frozen=True, slots=True)
class TensorSpec:
    """The tensor properties a traced graph depends on.

    ``shape`` and ``stride`` hold ``None`` where a dim (or its stride) is symbolic.
    """

    tensor_type: type
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    shape: tuple[int | None, ...]
    stride: tuple[int | None, ...]
    dispatch_keys: int

    @classmethod
    def of(cls, tensor: torch.Tensor, dynamic_dims: Iterable[int] = ()) -> TensorSpec:
        """The spec of a real tensor, with ``dynamic_dims`` (and their strides) left free."""
        dynamic = {d % tensor.dim() for d in dynamic_dims} if tensor.dim() else set()
        shape = tuple(None if i in dynamic else s for i, s in enumerate(tensor.shape))
        # A stride that depends on a dynamic size is free too.
        stride = tuple(
            None if any(j in dynamic for j in range(i + 1, tensor.dim())) and st != 1 else st
            for i, st in enumerate(tensor.stride())
        )
        return cls(
            tensor_type=type(tensor),
            dtype=tensor.dtype,
            device=tensor.device,
            requires_grad=tensor.requires_grad,
            shape=shape,
            stride=stride,
            dispatch_keys=torch._C._dispatch_keys(tensor).raw_repr(),
        )

    @property
    def static(self) -> bool:
        """Whether the spec fixes every size and stride (no symbolic dim or stride)."""
        return None not in self.shape and None not in self.stride

    def matches(self, value: Any) -> bool:
        """Reference check (slow, exact): does ``value`` satisfy this spec?"""
        if type(value) is not self.tensor_type:
            return False
        tensor = cast(torch.Tensor, value)
        if (tensor.dtype, tensor.device, tensor.requires_grad) != (
            self.dtype,
            self.device,
            self.requires_grad,
        ):
            return False
        if tensor.dim() != len(self.shape):
            return False
        if any(e is not None and e != s for e, s in zip(self.shape, tensor.shape)):
            return False
        if any(e is not None and e != s for e, s in zip(self.stride, tensor.stride())):
            return False
        return torch._C._dispatch_keys(tensor).raw_repr() == self.dispatch_keys

    def describe(self) -> str:
        """A short human-readable form, e.g. ``Tensor(float32, cpu, [s, 3])``."""
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        grad = ", requires_grad" if self.requires_grad else ""
        return f"{self.tensor_type.__name__}({str(self.dtype).removeprefix('torch.')}, {self.device}, [{dims}]{grad})"


@dataclasses.dataclass(frozen=True, slots=True)
class Guard:
    """One assumption of a compiled graph.

    ``source`` is what the guard is about (``None`` only for shape guards, which may span
    several sources: those are in ``symbols``, pairs of sympy symbol and source).
    """

    kind: GuardKind
    source: Source | None
    expected: Hashable = None
    symbols: tuple[tuple[sympy.Symbol, Source], ...] = ()

    def __hash__(self) -> int:
        # An expected constant need not be hashable (a slice before Python 3.12, or a tuple
        # holding one): such a value hashes by its type and repr, which equal values share.
        try:
            expected_key = hash(self.expected)
        except TypeError:
            expected_key = hash((type(self.expected), repr(self.expected)))
        return hash((self.kind, self.source, expected_key, self.symbols))

    def render(self) -> str:
        """The guard as a Python-like condition a person can read."""
        kind, src, exp = self.kind, self.source, self.expected
        if kind is GuardKind.TENSOR_MATCH:
            assert isinstance(exp, TensorSpec)
            return f"{src} matches {exp.describe()}"
        if kind is GuardKind.TYPE_MATCH:
            name = getattr(exp, "__qualname__", repr(exp))
            return f"type({src}) is {getattr(exp, '__module__', '')}.{name}".replace(
                "builtins.", ""
            )
        if kind is GuardKind.ID_MATCH:
            return f"id({src}) == {exp}"
        if kind is GuardKind.CONSTANT_MATCH:
            return f"{src} == {exp!r}"
        if kind is GuardKind.ALIAS_MATCH:
            return f"{src} is {exp}"
        assert isinstance(exp, sympy.Basic)
        return render_expr(exp, dict(self.symbols))

    def __str__(self) -> str:
        return self.render()


class GuardSet:
    """An insertion-ordered, deduplicated collection of guards."""

    def __init__(self, guards: Iterable[Guard] = ()) -> None:
        self._guards: dict[Guard, None] = {}
        for guard in guards:
            self.add(guard)

    def add(self, guard: Guard) -> bool:
        """Add ``guard``; return ``False`` if an equal guard was already present."""
        if guard in self._guards:
            return False
        self._guards[guard] = None
        return True

    def update(self, guards: Iterable[Guard]) -> None:
        """Add every guard of ``guards``."""
        for guard in guards:
            self.add(guard)

    def __contains__(self, guard: object) -> bool:
        return guard in self._guards

    def __iter__(self) -> Iterator[Guard]:
        return iter(self._guards)

    def __len__(self) -> int:
        return len(self._guards)

    def of_kind(self, kind: GuardKind) -> list[Guard]:
        """The guards of one kind, in insertion order."""
        return [g for g in self._guards if g.kind is kind]

    def about(self, source: Source) -> list[Guard]:
        """The guards whose source is ``source`` or mention it in a shape expression."""
        return [
            g for g in self._guards if g.source == source or any(s == source for _, s in g.symbols)
        ]

    def render(self) -> str:
        """One guard per line, in insertion order."""
        return "\n".join(g.render() for g in self._guards)

    def __repr__(self) -> str:
        return f"GuardSet({len(self)} guards)"


@functools.cache
def _source_printer() -> type:
    """sympy's printer, made when first needed (sympy is imported lazily)."""
    from sympy.printing.str import StrPrinter

    return type("_SourcePrinter", (_SourcePrinting, StrPrinter), {})


class _SourcePrinting:
    """Prints sympy with symbols replaced by source text and relations in Python syntax
    (mixed into sympy's ``StrPrinter``)."""

    _print: Any

    def __init__(self, names: dict[sympy.Symbol, str]) -> None:
        super().__init__()
        self._names = names

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        return self._names.get(expr, expr.name)

    def _print_Relational(self, expr: Any) -> str:
        op = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}[expr.rel_op]
        return f"{self._print(expr.lhs)} {op} {self._print(expr.rhs)}"

    def _print_Not(self, expr: Any) -> str:
        return f"not ({self._print(expr.args[0])})"

    def _print_And(self, expr: Any) -> str:
        return " and ".join(f"({self._print(a)})" for a in expr.args)

    def _print_Or(self, expr: Any) -> str:
        return " or ".join(f"({self._print(a)})" for a in expr.args)

    def _print_FloorDiv(self, expr: Any) -> str:
        return f"({self._print(expr.args[0])} // {self._print(expr.args[1])})"

    def _print_PythonMod(self, expr: Any) -> str:
        return f"({self._print(expr.args[0])} % {self._print(expr.args[1])})"

    _print_Mod = _print_PythonMod


def render_expr(expr: sympy.Basic, sources: dict[sympy.Symbol, Source] | Sequence[Any]) -> str:
    """Render a sympy expression with each bound symbol written as its source."""
    mapping = dict(sources)
    printer = _source_printer()({sym: str(src) for sym, src in mapping.items()})
    return cast(str, printer.doprint(expr))
