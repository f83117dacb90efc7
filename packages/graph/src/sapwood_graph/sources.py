"""Sources: where a value seen by a frontend came from.

A source is a small immutable description such as "the local ``x``", "attribute ``weight`` of
the local ``self``" or "element 0 of the global ``cfg``". Graph inputs are keyed by source and
guards are stated over sources, so two invariants matter:

* Sources are frozen dataclasses: equal descriptions are equal and hash alike, whatever object
  built them. Asking an :class:`~sapwood_graph.OutputGraph` for the input of an equal source
  gives back the same placeholder.
* ``str(source)`` (also ``source.name``) is a Python-like expression over the three roots
  ``L`` (the frame's locals), ``G`` (its globals) and ``F`` (the function being traced), e.g.
  ``L['self'].layers[0].weight`` or ``L['x'].size()[1]``. :meth:`Source.resolve` evaluates a
  source against concrete roots without ``eval`` of any text, so a user-controlled name can
  never become code.

Example::

    >>> from sapwood_graph import AttrSource, ItemSource, LocalSource
    >>> str(ItemSource(AttrSource(LocalSource("self"), "layers"), 0))
    "L['self'].layers[0]"
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Literal

__all__ = [
    "AttrSource",
    "ClosureCellSource",
    "DefaultArgSource",
    "FunctionSource",
    "GlobalSource",
    "ItemSource",
    "LocalSource",
    "Source",
    "SyntheticSource",
    "TensorPropertySource",
    "TypeSource",
]


class Source:
    """Base of every source. Subclasses are frozen dataclasses (hashable, comparable, with
    slots so they stay small and cheap to hash)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        """The Python-like expression this source stands for (the same as ``str(source)``)."""
        return self._render()

    def __str__(self) -> str:
        return self._render()

    def _render(self) -> str:
        raise NotImplementedError

    @property
    def base(self) -> Source | None:
        """The source this one is derived from, or ``None`` for a root (local, global, …)."""
        return None

    @property
    def root(self) -> Source:
        """The root source of the chain (a local, global, function, or synthetic source)."""
        source: Source = self
        while source.base is not None:
            source = source.base
        return source

    def resolve(
        self,
        f_locals: Mapping[str, Any],
        f_globals: Mapping[str, Any],
        function: Callable[..., Any] | None = None,
    ) -> Any:
        """The value this source designates, given the frame's locals, globals and function.

        Raises ``LookupError``/``AttributeError`` like the equivalent Python expression would.
        """
        raise NotImplementedError


class _Printable:
    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class LocalSource(_Printable, Source):
    """A local variable (or argument) of the traced frame: ``L['x']``."""

    local_name: str

    def _render(self) -> str:
        return f"L[{self.local_name!r}]"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return f_locals[self.local_name]


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class GlobalSource(_Printable, Source):
    """A global variable of the traced frame's module: ``G['x']``."""

    global_name: str

    def _render(self) -> str:
        return f"G[{self.global_name!r}]"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return f_globals[self.global_name]


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class FunctionSource(_Printable, Source):
    """The function being traced itself: ``F``. Root of its default arguments and closure."""

    def _render(self) -> str:
        return "F"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        if function is None:
            raise LookupError("FunctionSource needs the traced function to resolve")
        return function


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class SyntheticSource(_Printable, Source):
    """A value with no location in user code (made up by a frontend): ``<label>``.

    It cannot be resolved; guards over it are meaningless, so frontends should avoid them.
    """

    label: str

    def _render(self) -> str:
        return f"<{self.label}>"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        raise LookupError(f"synthetic source {self} has no value outside the trace")


class _Chained(_Printable, Source):
    __slots__ = ()

    @property
    def base(self) -> Source | None:
        return self.of  # type: ignore[attr-defined, no-any-return]


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class AttrSource(_Chained):
    """Attribute ``attr`` of ``of``: ``L['self'].weight``."""

    of: Source
    attr: str

    def _render(self) -> str:
        return f"{self.of}.{self.attr}"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return getattr(self.of.resolve(f_locals, f_globals, function), self.attr)


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class ItemSource(_Chained):
    """Item ``index`` of ``of`` (a list, tuple or dict element): ``L['xs'][0]``.

    ``index`` must be a hashable constant (an int, a str, a tuple of those, …).
    """

    of: Source
    index: Hashable

    def _render(self) -> str:
        return f"{self.of}[{self.index!r}]"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return self.of.resolve(f_locals, f_globals, function)[self.index]


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class TypeSource(_Chained):
    """The type of ``of``: ``type(L['x'])``."""

    of: Source

    def _render(self) -> str:
        return f"type({self.of})"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        return type(self.of.resolve(f_locals, f_globals, function))


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class ClosureCellSource(_Chained):
    """The contents of the closure cell for free variable ``cell_name`` of the function ``of``.

    Renders as ``F.__closure__['y']`` style text: ``{of}.__closure__[<cell_name>]``; resolving
    looks the name up in ``of.__code__.co_freevars``.
    """

    of: Source
    cell_name: str

    def _render(self) -> str:
        return f"{self.of}.__closure__[{self.cell_name!r}]"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        fn = self.of.resolve(f_locals, f_globals, function)
        index = fn.__code__.co_freevars.index(self.cell_name)
        return fn.__closure__[index].cell_contents


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class DefaultArgSource(_Chained):
    """A default argument value of the function ``of``.

    ``index`` is a position in ``__defaults__`` (int) or a keyword-only name in
    ``__kwdefaults__`` (str): ``F.__defaults__[0]``, ``F.__kwdefaults__['eps']``.
    """

    of: Source
    index: int | str

    def _render(self) -> str:
        if isinstance(self.index, str):
            return f"{self.of}.__kwdefaults__[{self.index!r}]"
        return f"{self.of}.__defaults__[{self.index}]"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        fn = self.of.resolve(f_locals, f_globals, function)
        if isinstance(self.index, str):
            return fn.__kwdefaults__[self.index]
        return fn.__defaults__[self.index]


TensorProperty = Literal["size", "stride", "storage_offset"]


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class TensorPropertySource(_Chained):
    """A size, stride or storage offset of the tensor ``of``: ``L['x'].size()[0]``.

    These are the sources that bind the symbols of a tensor's dynamic dims.
    ``index`` is the dim (``None`` for ``storage_offset``).
    """

    of: Source
    prop: TensorProperty
    index: int | None = None

    def __post_init__(self) -> None:
        if (self.prop == "storage_offset") != (self.index is None):
            raise ValueError("storage_offset takes no index; size and stride need one")

    def _render(self) -> str:
        if self.index is None:
            return f"{self.of}.{self.prop}()"
        return f"{self.of}.{self.prop}()[{self.index}]"

    def resolve(self, f_locals, f_globals, function=None):  # type: ignore[no-untyped-def]
        tensor = self.of.resolve(f_locals, f_globals, function)
        value = getattr(tensor, self.prop)()
        return value if self.index is None else value[self.index]
