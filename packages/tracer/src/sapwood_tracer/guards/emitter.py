"""Generated Python for cache entries: the guard check and the runner.

Both are compiled from source text made *only* of generated identifiers (``v3``, ``k7``),
integer literals and fixed keywords. Every user-controlled string (an attribute name, a dict
key, a global's name) and every object (a class, a held module, an expected constant) is
bound to a ``k<n>`` name in the function's namespace instead of being written into the text,
so no user input can ever become code. Functions, classes and Python modules checked by
identity are bound weakly (an ``id`` compared, a weak reference called): the cache entry
records them in ``Emitter.weak_targets`` and is dropped when one dies, so an ``id`` never
outlives its object while an entry compares it.

The generated functions take ``(L, C, G)``: the frame's arguments in binding order (a tuple),
the function's closure cells and its globals dict.

One function per cache entry checks the guards and, when they all hold, runs the entry: it
returns a :class:`Miss` naming the first guard that failed (or raised), else the result.
Values computed for the guards (``L['self'].fc.weight``, ...) are reused to feed the graph.

Each source's value gets its own local (``v<n>``) while the text is built; :meth:`Emitter.build`
then gives locals whose values are dead to later ones (``r<n>``), so a function checking
thousands of guards keeps a small frame: CPython gives a frame bigger than its 16 KiB
data-stack chunk a fresh memory mapping on every call.
"""

from __future__ import annotations

import re
import types
from typing import Any

import torch

from sapwood_graph import (
    AttrSource,
    ClosureCellSource,
    DefaultArgSource,
    FunctionSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    Source,
    TensorPropertySource,
    TensorSpec,
    TypeSource,
)

from ..errors import Unsupported
from ..foreign import is_numpy_scalar
from ..pinned import BUILTINS
from .sources import (
    CellAtSource,
    ContainsSource,
    DistinctIdsSource,
    GlobalStateSource,
    HasAttrSource,
    HeldObjectSource,
    InstanceDictSource,
    KeysSource,
    LeafViewSource,
    LenSource,
    ModuleHooksSource,
    ReaderSource,
    ReduceSource,
    ViewedDictSource,
    WeakHandle,
    WeakRefTargetSource,
    dict_of_view,
    make_view_leaf,
    read_from,
)

__all__ = ["Emitter", "Miss", "address", "same_constant"]

_dispatch_keys = torch._C._dispatch_keys

#: An object's address as a hash (CPython's default ``__hash__``, which a class's own
#: ``__hash__`` does not replace here): a rotation of the address, so two live objects get
#: equal values exactly when they are one object, as with ``id``. Unlike ``id`` it raises no
#: audit event, which costs a call into every audit hook a library installed (filelock does).
address = object.__hash__


def _has_float(value: Any) -> bool:
    if isinstance(value, (float, complex)) or is_numpy_scalar(value):
        return True
    return isinstance(value, tuple) and any(_has_float(v) for v in value)


def same_constant(value: Any, expected: Any) -> bool:
    """Equality that tells -0.0 from 0.0 and lets nan equal nan (floats compared bit-wise)."""
    if type(value) is not type(expected):
        return False
    if is_numpy_scalar(expected):  # (its bytes: exact for every numpy float, int and bool)
        return bool(value.tobytes() == expected.tobytes())
    if isinstance(expected, float):
        return bool(value.hex() == expected.hex())
    if isinstance(expected, complex):
        return same_constant(value.real, expected.real) and same_constant(value.imag, expected.imag)
    if isinstance(expected, tuple):
        return len(value) == len(expected) and all(
            same_constant(v, e) for v, e in zip(value, expected)
        )
    return bool(value == expected)


def _closure_cell(fn: Any, name: str) -> Any:
    return fn.__closure__[fn.__code__.co_freevars.index(name)].cell_contents


class Emitter:
    """Builds the body of one generated function."""

    def __init__(
        self,
        code: types.CodeType,
        held: dict[int, Any],
        member_stores: dict[Source, str] | None = None,
    ) -> None:
        self.code = code
        self.member_stores = member_stores or {}
        #: module sources whose listed attributes are read from the instance ``__dict__``
        #: (set by :mod:`.fast_path`, which emits the checks that make this equal to
        #: attribute access)
        self.instance_attrs: dict[Source, frozenset[str]] = {}
        self.params = {name: i for i, name in enumerate(_parameters(code))}
        self.freevars = {name: i for i, name in enumerate(code.co_freevars)}
        self.held = held
        #: the modules the trace read, by source: guarded by class (not held), so the fast
        #: path may plan their reads; the generated code never refers to them
        self.module_examples: dict[Source, Any] = {}
        #: the weakly held objects the generated code relies on (the entry dies with them)
        self.weak_targets: list[WeakHandle] = []
        self.namespace: dict[str, Any] = {
            # the builtins as at import: a program replacing ``builtins.len`` must not change
            # what a guard checks (or make it raise)
            "__builtins__": BUILTINS,
            "_dispatch_keys": _dispatch_keys,
            "_closure_cell": _closure_cell,
            "_same_constant": same_constant,
            "_address": address,
        }
        self.lines: list[str] = []
        self._by_source: dict[Source, str] = {}
        self._locals = 0
        self._const_ids: dict[int, str] = {}
        self._temps = 0
        self._frozen: tuple[dict[Source, Any], dict[str, Any], Any] | None = None

    def const(self, value: Any) -> str:
        """A namespace name bound to ``value``."""
        key = id(value)
        name = self._const_ids.get(key)
        if name is not None and self.namespace[name] is value:
            return name
        name = f"k{len(self.namespace)}"
        self.namespace[name] = value
        self._const_ids[key] = name
        return name

    def blank(self) -> Emitter:
        """A fresh emitter for another function over the same frame (no lines, no locals)."""
        return Emitter(self.code, self.held, self.member_stores)

    def forget_reads_since(self, mark: int) -> None:
        """Read again, where needed later, every source first read since :meth:`reads` gave
        ``mark`` (those reads are inside a block that may not run).

        Reads are only ever added in between, so they are the table's last entries, taken off
        the end (no source is hashed: a deep source hashes its whole chain)."""
        by_source = self._by_source
        for _ in range(len(by_source) - mark):
            by_source.popitem()

    def reads(self) -> int:
        """A mark of the sources read so far (for :meth:`forget_reads_since`)."""
        return len(self._by_source)

    def temp(self) -> str:
        self._temps += 1
        return f"t{self._temps}"

    def freeze(self, roots: dict[Source, Any], f_locals: dict[str, Any], f_globals: Any) -> None:
        """Sources read from one of ``roots`` (modules declared frozen, see
        :mod:`sapwood_tracer.api.frozen_modules`) are the objects found there now, held."""
        self._frozen = (roots, f_locals, f_globals)

    def _frozen_object(self, source: Source) -> tuple[bool, Any]:
        if self._frozen is None:
            return False, None
        roots, f_locals, f_globals = self._frozen
        if not read_from(source, roots):
            return False, None
        try:
            return True, source.resolve(f_locals, f_globals)
        except Exception:  # (read at each call, as any source: exact, only slower)
            return False, None

    def source(self, source: Source, indent: str) -> str:
        """A local variable holding the value of ``source`` (emitting its computation once)."""
        known = self._by_source.get(source)
        if known is not None:
            return known
        frozen, obj = self._frozen_object(source)
        expr = self.const(obj) if frozen else self._expression(source, indent)
        name = f"v{self._locals}"
        self._locals += 1
        self.lines.append(f"{indent}{name} = {expr}")
        self._by_source[source] = name
        return name

    def _expression(self, source: Source, indent: str) -> str:
        if isinstance(source, LocalSource):
            index = self.params.get(source.local_name)
            if index is None:
                raise Unsupported(f"a guard on the non-argument local {source.local_name!r}")
            return f"L[{index}]"
        if isinstance(source, GlobalSource):
            return f"G[{self.const(source.global_name)}]"
        if isinstance(source, HeldObjectSource):
            if isinstance(source.held, WeakHandle):
                # weakly held: the cache entry is dropped when it dies (see api.cache)
                self.weak_targets.append(source.held)
                return f"{self.const(source.held.ref)}()"
            return self.const(source.held)
        if isinstance(source, GlobalStateSource):
            return f"{self.const(source.reader())}()"
        if isinstance(source, ClosureCellSource):
            if isinstance(source.of, FunctionSource):
                return f"C[{self.freevars[source.cell_name]}].cell_contents"
            base = self.source(source.of, indent)
            if isinstance(source, CellAtSource):
                return f"{base}.__closure__[{int(source.index)}].cell_contents"
            return f"_closure_cell({base}, {self.const(source.cell_name)})"
        if isinstance(source, DistinctIdsSource):
            parts = [self.source(s, indent) for s in source.sources]
            return "len({" + ", ".join(f"_address({p})" for p in parts) + "})"
        base_source = source.base
        if base_source is None:
            raise Unsupported(f"a guard over the source {source}")
        base = self.source(base_source, indent)
        if isinstance(source, AttrSource):
            if source.attr in ("__dict__", "__defaults__", "__kwdefaults__"):
                return f"{base}.{source.attr}"
            store = self.member_stores.get(source)
            readable = self.instance_attrs.get(base_source)
            if readable is not None and (store or source.attr) in readable:
                if store is not None:  # a parameter, buffer or submodule: from its registry
                    table = self.source(AttrSource(base_source, store), indent)
                    return f"{table}[{self.const(source.attr)}]"
                inst = self.source(AttrSource(base_source, "__dict__"), indent)
                return f"{inst}[{self.const(source.attr)}]"
            if store is not None:  # a module's parameter, buffer or submodule
                return f"{base}.{store}[{self.const(source.attr)}]"
            return f"getattr({base}, {self.const(source.attr)})"
        if isinstance(source, ItemSource):
            return f"{base}[{self.const(source.index)}]"
        if isinstance(source, TypeSource):
            return f"type({base})"
        if isinstance(source, DefaultArgSource):
            # (the tuple or dict read once per call: reading either raises an audit event,
            # a call into every audit hook a library installed)
            if isinstance(source.index, str):
                table = self.source(AttrSource(base_source, "__kwdefaults__"), indent)
                return f"{table}[{self.const(source.index)}]"
            table = self.source(AttrSource(base_source, "__defaults__"), indent)
            return f"{table}[{int(source.index)}]"
        if isinstance(source, LenSource):
            return f"len({base})"
        if isinstance(source, LeafViewSource):
            return f"{self.const(make_view_leaf)}({base}, {self.const(source.steps)})"
        if isinstance(source, ReaderSource):
            return f"{self.const(source.reader)}({base})"
        if isinstance(source, TensorPropertySource):  # a size or stride binding a symbol
            if source.index is None:
                return f"{base}.storage_offset()"
            method = "size" if source.prop == "size" else "stride"
            return f"{base}.{method}({int(source.index)})"
        if isinstance(source, KeysSource):
            return f"tuple({base})"
        if isinstance(source, WeakRefTargetSource):
            return f"{base}()"
        if isinstance(source, ViewedDictSource):
            return f"{self.const(dict_of_view)}({base})"
        if isinstance(source, ReduceSource):
            return f"{base}.__reduce__()"
        if isinstance(source, InstanceDictSource):
            # (one read per object and call: later reads of the dict reuse the local)
            return f"{self.const(object.__getattribute__)}({base}, {self.const('__dict__')})"
        if isinstance(source, HasAttrSource):
            return f"hasattr({base}, {self.const(source.attr)})"
        if isinstance(source, ModuleHooksSource):
            return (
                f"bool({base}._forward_hooks or {base}._forward_pre_hooks or "
                f"{base}._backward_hooks or {base}._backward_pre_hooks)"
            )
        if isinstance(source, ContainsSource):
            return f"({self.const(source.key)} in {base})"
        raise Unsupported(f"a guard over the source {source}")

    def build(self, name: str, body_lines: list[str]) -> Any:
        """The function ``name(L, C, G)`` of ``body_lines``. The top-level lines after a line
        :data:`CLEARING` run in a ``try`` whose ``finally`` sets every local to None (an entry
        that ends in a resume function: see :func:`_clearing`)."""
        body = _reuse_locals(sink_gated_reads(body_lines))
        text = f"def {name}(L, C, G):\n" + "\n".join(body) + "\n"
        if CLEARING in body:
            text = _clearing(name, body, self._locals_of(body, text, name))
        compiled = _compiled(text, name)
        scope: dict[str, Any] = {}
        exec(compiled, self.namespace, scope)
        fn = scope[name]
        fn.__sapwood_source__ = text  # for debugging and tests
        return fn

    def _locals_of(self, body: list[str], text: str, name: str) -> tuple[str, ...]:
        """The local variables of the function ``text``, read off its lines (each line the
        emitter writes is one statement); where a name found so is one the entry reads from
        its namespace or the builtins (it cannot be a local), from the compiled code."""
        found = {"L", "C", "G"}
        for line in body:
            bound = _BINDING.match(line) or _LOOP.match(line)
            if bound is not None:
                found.update(part.strip() for part in bound.group(1).split(","))
            found.update(_AS.findall(line))
        if found.isdisjoint(self.namespace) and found.isdisjoint(BUILTINS):
            return tuple(sorted(found))
        module = _compiled(text, name)
        return next(c for c in module.co_consts if isinstance(c, types.CodeType)).co_varnames


def _compiled(text: str, name: str) -> types.CodeType:
    # (none of this module's own `__future__` flags: code the entry runs at a graph break,
    # `exec` of a string say, would inherit them)
    return compile(text, f"<sapwood {name}>", "exec", dont_inherit=True)


#: a line of an entry's body after which the body runs in a ``try`` that clears the locals
CLEARING = "    # the locals are cleared from here on"


_BINDING = re.compile(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*=(?!=)")
_LOOP = re.compile(r"^\s*for\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s+in\b")
_AS = re.compile(r"\bas\s+([A-Za-z_]\w*)")


def _clearing(name: str, body: list[str], names: tuple[str, ...]) -> str:
    """The function's text with its body after :data:`CLEARING` in a ``try`` whose
    ``finally`` sets every local to None. An entry that ends in a resume function is that
    function's caller: if an exception passed to the resume function (one its handler is
    running, raised again there) outlives the call, its traceback holds the resume function's
    frame and through it this one. Locals kept here that hold the exception would be a
    reference cycle, keeping the call's values alive until the garbage collector runs.
    (Only the tail is wrapped: CPython copies a ``finally`` to every ``return`` inside its
    ``try``, and the guards before it return at each failing guard.)"""
    start = body.index(CLEARING)
    wrapped = [
        *body[:start],
        "    try:",
        *("    " + line for line in body[start + 1 :]),
        "    finally:",
        *(f"        {local} = None" for local in names),
    ]
    return f"def {name}(L, C, G):\n" + "\n".join(wrapped) + "\n"


_LOCAL = re.compile(r"\bv\d+\b")
_DEFINITION = re.compile(r"^\s*(v\d+) = ")


#: what :func:`sink_gated_reads` looks for: a read the gate ``n`` of the fast path put
#: before its block (``"<line>  #read-for n"``), and that block's ``if`` (``"<line>  #gate n"``)
READ_FOR = "  #read-for "
GATE = "  #gate "


def sink_gated_reads(lines: list[str]) -> list[str]:
    """``lines`` with each read put before a gated block moved into it where nothing outside
    that block uses it (the markers removed).

    The fast path reads the values a dict's gated guards look at before the block (see
    :func:`~sapwood_tracer.guards.fast_path.emit_guards`): later code (the result, replayed
    writes) must see them as they were before the graph. A read that no later line uses is
    needed only by the block, so it runs only when the block does. Each ``v<n>`` is assigned
    once, so a read is used outside the block exactly when its name appears there.
    """
    if not any(GATE in line for line in lines):
        return lines
    mentions: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        for token in set(_LOCAL.findall(line)):
            mentions.setdefault(token, []).append(i)
    reads: dict[str, list[int]] = {}
    opens: dict[str, int] = {}
    for i, line in enumerate(lines):
        if READ_FOR in line:
            reads.setdefault(line.rsplit(READ_FOR, 1)[1], []).append(i)
        elif GATE in line:
            opens[line.rsplit(GATE, 1)[1]] = i
    moved_into: dict[int, list[int]] = {}  # the gate's line -> the reads put at its start
    moved: set[int] = set()
    for gate, at in opens.items():
        depth = len(lines[at]) - len(lines[at].lstrip())
        end = at + 1
        while end < len(lines) and len(lines[end]) - len(lines[end].lstrip()) > depth:
            end += 1
        sunk: list[int] = []
        for i in reversed(reads.get(gate, [])):
            match = _DEFINITION.match(lines[i])
            if match is None:
                continue
            uses = mentions.get(match.group(1), ())
            if all(at < j < end or j == i or j in sunk for j in uses):
                sunk.append(i)
        if sunk:
            moved_into[at] = sorted(sunk)
            moved.update(sunk)
    out: list[str] = []
    for i, line in enumerate(lines):
        if i in moved:
            continue
        out.append(_unmarked(line))
        for j in moved_into.get(i, ()):
            out.append("    " + _unmarked(lines[j]))
    return out


def _unmarked(line: str) -> str:
    for marker in (READ_FOR, GATE):
        if marker in line:
            return line.rsplit(marker, 1)[0]
    return line


def _reuse_locals(lines: list[str]) -> list[str]:
    """``lines`` with the ``v<n>`` locals renamed so that a local whose value is dead (no
    later line reads it) lends its name to the next one defined.

    Sound for the code the emitters write: straight-line (no loops), each local assigned once
    before any read. Anything else (a loop, a second assignment, a read before the
    assignment) leaves the lines as they are.
    """
    if any(line.lstrip().startswith(("for ", "while ", "async ")) for line in lines):
        return lines
    defined: dict[str, int] = {}
    last_read: dict[str, int] = {}
    for i, line in enumerate(lines):
        match = _DEFINITION.match(line)
        if match is not None:
            if match.group(1) in defined:
                return lines
            defined[match.group(1)] = i
        for token in _LOCAL.findall(line):
            if token not in defined:
                return lines  # read before it is assigned
            last_read[token] = i
    rename: dict[str, str] = {}
    free: list[str] = []
    freed_after: dict[int, list[str]] = {}
    slots = 0
    for i, line in enumerate(lines):
        match = _DEFINITION.match(line)
        if match is not None:
            if free:
                name = free.pop()
            else:
                name = f"r{slots}"
                slots += 1
            rename[match.group(1)] = name
            freed_after.setdefault(last_read[match.group(1)], []).append(name)
        free.extend(freed_after.pop(i, ()))
    return [_LOCAL.sub(lambda t: rename[t.group(0)], line) for line in lines]


def _parameters(code: types.CodeType) -> tuple[str, ...]:
    import inspect

    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return code.co_varnames[:count]


def _batch_tensor_checker(tensors: list[torch.Tensor]) -> Any:
    """torch's C++ checker of many static tensors at once (type, dispatch keys, dtype,
    device, requires_grad, sizes, strides), or ``None`` where this torch lacks it."""
    try:
        from torch._C._dynamo.guards import TensorGuards

        checker = TensorGuards(
            *tensors,
            dynamic_dims_sizes=[list(t.shape) for t in tensors],  # type: ignore[misc]
            dynamic_dims_strides=[list(t.stride()) for t in tensors],  # type: ignore[misc]
        )
        if checker.check(*tensors) is not True:
            return None
        return checker
    except Exception:  # a torch without it, or with another signature: use Python checks
        return None


def _is_static_spec(spec: Any) -> bool:
    return isinstance(spec, TensorSpec) and spec.static


class Miss:
    """What an entry function returns when guard ``index`` failed (never a user value)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"Miss({self.index})"
