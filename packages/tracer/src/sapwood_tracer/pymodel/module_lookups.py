"""``nn.Module.__getattr__`` called by the traced code: ``super().__getattr__(name)`` in a
module class with a ``__getattr__`` of its own (delegating wrappers; see
:meth:`~sapwood_tracer.values.modules.ModuleValue.getattr`).

It answers a parameter, buffer or submodule of that name, or raises the AttributeError
``nn.Module`` raises, with the name's absence from the registries guarded.
"""

from __future__ import annotations

import torch

from ..errors import Unsupported
from ..values.base import Context, Value
from ..values.exceptions import python_error
from ..values.modules import ModuleValue
from .builtins import handles

__all__: list[str] = []


@handles(torch.nn.Module.__getattr__)
def _module_getattr(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if len(args) != 2 or kwargs or not args[1].is_constant():
        raise Unsupported("nn.Module.__getattr__ with these arguments")
    module, name = args[0], args[1].as_constant()
    if not isinstance(module, ModuleValue) or module.source is None or type(name) is not str:
        raise Unsupported(f"nn.Module.__getattr__ of {module.describe()}")
    found = module.registered(tx, name, guard_absence=True)
    if found is not None:
        return found
    cls = type(module.module).__name__
    raise python_error(AttributeError, f"'{cls}' object has no attribute '{name}'")
