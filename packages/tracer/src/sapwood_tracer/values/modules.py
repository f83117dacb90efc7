"""``torch.nn.Module`` instances.

A module that came from the inputs is guarded by its class, not its identity (one trace serves
every instance with the same structure); its parameters and buffers
become graph inputs (sources ``L['self'].fc.weight``, guarded like any tensor input), its
submodules are module values, and its other attributes (``training``, ``eps``, a config
object, ...) are wrapped through their sources like any attribute.

Calling a module inlines its ``forward`` (``__call__`` machinery is not traced). A module with forward (pre-)hooks gets them inlined in ``_call_impl``'s order; backward hooks and global
module hooks are refused with :class:`~sapwood_tracer.Unsupported`. Which hooks a module has
is guarded, so registering or removing a hook later recompiles. A module sharded by FSDP2
(``fully_shard``) is a graph break: its hooks communicate, so they run eagerly around its
compiled forward (see ``api/distributed.py``). Container protocols (``ModuleList[i]``, iteration,
``len``, ``in``) inline the container's own Python methods.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from sapwood_graph import AttrSource, GuardKind, Source

from ..errors import Unsupported
from ..guards.sources import (
    ContainsSource,
    HasAttrSource,
    HeldObjectSource,
    KeysSource,
    ModuleHooksSource,
)
from .attributes import class_attribute, held, is_data_descriptor, lookup_mro
from .base import ConstantValue, Context, Value, attribute_missing
from .containers import DictValue, ListValue, SliceValue, TupleValue
from .slot_results import checked, inline_special, sized_items

__all__ = ["ModuleValue"]

_MODULE_GETATTR = torch.nn.Module.__getattr__
_MODULE_SETATTR = torch.nn.Module.__setattr__
_MODULE_CALL = torch.nn.Module.__call__


def _global_hook_dicts() -> list[tuple[str, dict[Any, Any]]]:
    mod = torch.nn.modules.module
    names = [
        "_global_forward_hooks",
        "_global_forward_pre_hooks",
        "_global_backward_hooks",
        "_global_backward_pre_hooks",
        "_global_forward_hooks_always_called",
    ]
    return [(n, getattr(mod, n)) for n in names if isinstance(getattr(mod, n, None), dict)]


def _sharded_by_fsdp2(cls: type) -> bool:
    # fully_shard gives a module a class deriving from FSDPModule; where FSDP was never
    # imported, no module can have one
    fsdp = sys.modules.get("torch.distributed.fsdp")
    base = getattr(fsdp, "FSDPModule", None)
    return base is not None and issubclass(cls, base)


_FORWARD_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks")


def _holds_hooks(tx: Context, table: Any) -> bool:
    """Whether the hook dict ``table`` holds hooks as the trace left it (one registered
    earlier in the trace counts)."""
    known = tx.known(table)
    return bool(known.entries) if isinstance(known, DictValue) else bool(table)


class ModuleValue(Value):
    """An ``nn.Module`` that existed before the call (guarded by class and by what is read)."""

    __slots__ = ("module",)

    def __init__(self, module: torch.nn.Module, source: Source) -> None:
        super().__init__(source)
        self.module = module

    def describe(self) -> str:
        return f"module {type(self.module).__qualname__}"

    def python_type(self) -> type:
        return type(self.module)

    def _src(self) -> Source:
        assert self.source is not None
        return self.source

    def getattr(self, tx: Context, name: str) -> Value:
        if name == "__dict__":
            raise Unsupported(f"{self.describe()}.__dict__ (use attribute access instead)")
        pending = tx.side_effects.pending_attr(self.module, name)
        if pending is not None:
            return pending
        module = self.module
        cls = type(module)
        if cls.__getattribute__ is not object.__getattribute__:
            raise Unsupported(f"modules of {cls.__qualname__}, which define __getattribute__")
        klass, raw = lookup_mro(cls, name)
        if klass is not None and is_data_descriptor(raw):
            found = class_attribute(tx, cls, name, self)
            assert found is not None
            return found
        inst = module.__dict__
        if name in inst:
            return tx.wrap(inst[name], AttrSource(self._src(), name))
        if klass is not None:
            # Python's order: a class attribute (a method, a class-level default) comes before
            # Module.__getattr__, so it wins over a parameter, buffer or submodule of that
            # name; an instance attribute of the same name would shadow the class's.
            tx.guard_false(ContainsSource(AttrSource(self._src(), "__dict__"), name))
            found = class_attribute(tx, cls, name, self)
            assert found is not None
            return found
        if cls.__getattr__ is not _MODULE_GETATTR:
            # Python calls the class's own __getattr__ (it reaches the registries only through
            # ``super().__getattr__``, modelled by :meth:`registered`): inlined, with the
            # name's absence from the instance and the classes guarded (never ``hasattr``,
            # which would run the hook in the guard check)
            tx.guard_false(ContainsSource(AttrSource(self._src(), "__dict__"), name))
            for owner in cls.__mro__:
                tx.guard_false(
                    ContainsSource(AttrSource(held(owner, owner.__qualname__), "__dict__"), name)
                )
            hook = class_attribute(tx, cls, "__getattr__", self)
            assert hook is not None
            return tx.call(hook, [ConstantValue(name)], {})
        found = self.registered(tx, name)
        if found is not None:
            return found
        tx.guard_false(HasAttrSource(self._src(), name))
        raise attribute_missing(self.describe(), name)

    def registered(self, tx: Context, name: str, guard_absence: bool = False) -> Value | None:
        """``nn.Module.__getattr__``'s answer: the parameter, buffer or submodule ``name``, or
        None (with ``guard_absence``, its absence from each registry is guarded)."""
        inst = self.module.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            table = inst.get(store)
            if table is not None and name in table:
                source = AttrSource(self._src(), name)
                # Module.__setattr__ keeps these names out of __dict__, so the guard may read
                # the registry dict directly instead of going through Module.__getattr__.
                tx.member_stores[source] = store
                return tx.wrap(table[name], source)
        if guard_absence:
            for store in ("_parameters", "_buffers", "_modules"):
                if store in inst:
                    tx.guard_false(ContainsSource(AttrSource(self._src(), store), name))
        return None

    def setattr(self, tx: Context, name: str, value: Value) -> None:
        if isinstance(self.source, HeldObjectSource):
            raise Unsupported(f"assigning attributes of {self.describe()} built during the trace")
        module = self.module
        if type(module).__setattr__ is not _MODULE_SETATTR:
            raise Unsupported(f"assigning attributes of {self.describe()} (custom __setattr__)")
        for store in ("_parameters", "_modules"):
            if name in module.__dict__.get(store, {}):
                raise Unsupported(f"replacing the {store[1:-1]} {name!r} of {self.describe()}")
        if isinstance(value, ModuleValue):
            raise Unsupported(f"assigning a module to {self.describe()}.{name}")
        klass, raw = lookup_mro(type(module), name)
        if klass is not None and is_data_descriptor(raw):
            raise Unsupported(f"assigning {name!r} through a descriptor of {self.describe()}")
        tx.record_attr_write(self, name, value)

    # -- calling -----------------------------------------------------------------------------
    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        module = self.module
        cls = type(module)
        if getattr(cls, "__sapwood_compiled_module__", False):
            # a compiled module called from traced code: trace the module it wraps
            inner = self.getattr(tx, "_orig_mod")
            return tx.call(inner, args, kwargs)
        if _sharded_by_fsdp2(cls):
            raise Unsupported(
                f"{self.describe()} sharded by FSDP2: its forward hooks all-gather and free "
                "its parameters (they run eagerly; its forward compiles as a graph of its own)",
                hint="Nothing to do: this is how FSDP2 blocks compile inside a compiled model.",
            )
        if cls.__call__ is not _MODULE_CALL:
            call = class_attribute(tx, cls, "__call__", self)
            if call is None:
                raise Unsupported(f"calling {self.describe()}")
            return tx.call(call, args, kwargs)
        self.check_global_hooks(tx)
        d = module.__dict__
        if _holds_hooks(tx, d.get("_backward_hooks")) or _holds_hooks(
            tx, d.get("_backward_pre_hooks")
        ):
            raise Unsupported(
                f"{self.describe()} with backward hooks",
                hint="Remove the hooks while compiling, or call the module outside the compiled function.",
            )
        # (a hook dict the trace already read, maybe changed: a hook registered earlier in
        # the trace runs, as eagerly)
        read = any(tx.known(d.get(attr)) is not None for attr in _FORWARD_HOOK_DICTS)
        if not read and not (d.get("_forward_hooks") or d.get("_forward_pre_hooks")):
            # the common case: one guard that the module still has no hooks at all
            tx.guard_false(ModuleHooksSource(self._src()))
            return tx.call(self.getattr(tx, "forward"), args, kwargs)
        return self.call_with_hooks(tx, args, kwargs)

    def call_with_hooks(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        """``Module._call_impl`` with forward (pre-)hooks, each hook inlined in order.

        The hook dicts are wrapped through their sources, so adding or removing a hook
        recompiles; backward hooks are guarded absent.
        """
        src = self._src()
        for attr in ("_backward_hooks", "_backward_pre_hooks"):
            tx.guard_len(AttrSource(src, attr), 0)

        def hooks(attr: str) -> DictValue:
            value = tx.wrap(self.module.__dict__[attr], AttrSource(src, attr))
            assert isinstance(value, DictValue)
            return value

        pre, pre_kw = hooks("_forward_pre_hooks"), hooks("_forward_pre_hooks_with_kwargs")
        post, post_kw = hooks("_forward_hooks"), hooks("_forward_hooks_with_kwargs")
        args_value: Value = TupleValue(list(args))
        kwargs_value = DictValue.from_pairs(tx, [(ConstantValue(k), v) for k, v in kwargs.items()])
        none = ConstantValue(None)
        for key, (_, hook) in pre.entries.items():
            if key in pre_kw.entries:
                result = tx.call(hook, [self, args_value, kwargs_value], {})
                if not (result.is_constant() and result.as_constant() is None):
                    args_value, kwargs_value = tx.unpack(result)  # type: ignore[assignment]
            else:
                result = tx.call(hook, [self, args_value], {})
                if not (result.is_constant() and result.as_constant() is None):
                    args_value = result if isinstance(result, TupleValue) else TupleValue([result])
        call_kwargs = {k.as_constant(): v for k, v in tx.as_mapping(kwargs_value).entries.values()}
        output = tx.call(self.getattr(tx, "forward"), tx.unpack(args_value), call_kwargs)
        for key, (_, hook) in post.entries.items():
            if key in post_kw.entries:
                result = tx.call(hook, [self, args_value, kwargs_value, output], {})
            else:
                result = tx.call(hook, [self, args_value, output], {})
            if result is not none and not (result.is_constant() and result.as_constant() is None):
                output = result
        return output

    def check_global_hooks(self, tx: Context) -> None:
        for name, table in _global_hook_dicts():
            if _holds_hooks(tx, table):
                raise Unsupported(f"modules while global module hooks ({name}) are registered")
            tx.guard_len(
                AttrSource(held(torch.nn.modules.module, "torch.nn.modules.module"), name), 0
            )

    # -- container protocols (inlined from the module's own class) -------------------------
    def _dunder(self, tx: Context, name: str, args: list[Value]) -> Value:
        method = class_attribute(tx, type(self.module), name, self)
        if method is None:
            raise Unsupported(f"{name} of {self.describe()}")
        return tx.call(method, args, {})

    def iterate(self, tx: Context) -> Value:
        iterator = self._dunder(tx, "__iter__", [])
        if not hasattr(iterator.python_type(), "__next__"):
            checked(tx, "__iter__", iterator, type(self.module))  # (raises: no iterator)
        return tx.iterate(iterator)

    def unpack(self, tx: Context) -> list[Value]:
        return tx.unpack(self.iterate(tx))

    def collect(self, tx: Context) -> list[Value]:
        return sized_items(tx, self)

    def length(self, tx: Context) -> int:
        return checked(tx, "__len__", self._dunder(tx, "__len__", []), type(self.module))  # type: ignore[no-any-return]

    def getitem(self, tx: Context, key: Value) -> Value:
        if isinstance(self.module, torch.nn.ModuleList) and isinstance(key, SliceValue):
            # ModuleList[a:b] builds a new ModuleList of the same children; a list of the
            # children behaves the same for iteration, len and indexing.
            table = self.module._modules
            tx.guard(
                GuardKind.CONSTANT_MATCH,
                KeysSource(AttrSource(self._src(), "_modules")),
                tuple(table),
            )
            children = list(table.items())[key.as_slice()]
            return ListValue([self._child(tx, name, m) for name, m in children])
        return self._dunder(tx, "__getitem__", [key])

    def _child(self, tx: Context, name: str, module: torch.nn.Module) -> Value:
        source = AttrSource(self._src(), name)
        tx.member_stores[source] = "_modules"  # the guard reads the registry dict directly
        return tx.wrap(module, source)

    def contains(self, tx: Context, item: Value) -> bool:
        if lookup_mro(type(self.module), "__contains__")[0] is None:
            return super().contains(tx, item)
        return tx.truth(self._dunder(tx, "__contains__", [item]))

    def truth(self, tx: Context) -> bool:
        cls = type(self.module)
        if lookup_mro(cls, "__bool__")[0] is not None:
            result = inline_special(tx, self, "__bool__")
            return checked(tx, "__bool__", result, cls)  # type: ignore[no-any-return]
        if lookup_mro(cls, "__len__")[0] is not None:
            return self.length(tx) > 0
        return True
