"""``hash()`` of objects whose class defines ``__hash__`` in Python: the method is inlined
and its result turned into a hash as ``type.__hash__``'s slot does (an int that does not fit
a machine word is hashed as an int; -1 becomes -2). Constants fold; identity hashes (objects
that keep ``object.__hash__``) are unknown while tracing and stay a graph break. The hash of
an ``id()`` (or a ``__hash__`` returning one) is that id: an address is its own hash on a
64-bit build, so it stays the unknown number ``id()`` stands for, with what it supports."""

from __future__ import annotations

import builtins
import sys
import types

from ..errors import Unsupported
from ..values.attributes import lookup_mro
from ..values.base import ConstantValue, Context, Value
from ..values.exceptions import python_error
from ..values.identity import ObjectIdValue
from ..values.objects import NewObjectValue, ObjectValue
from ..values.slot_results import checked, inline_special
from ..values.symbolic import specialised_int
from .builtins import _fold_call, handles

__all__: list[str] = []

#: ``hash(n)`` is ``n`` for an int ``0 <= n < sys.hash_info.modulus``: on a 64-bit build an
#: id (an address, below 2**57 on any 64-bit platform) is its own hash, unknown as it is
_IDS_ARE_THEIR_HASHES = sys.maxsize == 2**63 - 1 and sys.hash_info.modulus == 2**61 - 1


@handles(builtins.hash)
def _hash(tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if kwargs or len(args) != 1:
        raise Unsupported("hash() with other than one argument (TypeError)")
    value = specialised_int(args[0])
    if isinstance(value, ObjectIdValue) and _IDS_ARE_THEIR_HASHES:
        return value
    if value.is_constant():
        return _fold_call(tx, builtins.hash, [value], {})
    if isinstance(value, (ObjectValue, NewObjectValue)):
        cls = value.python_type()
        _, raw = lookup_mro(cls, "__hash__")
        if raw is None:
            raise python_error(TypeError, f"unhashable type: '{cls.__name__}'")
        if isinstance(raw, types.FunctionType):
            result = inline_special(tx, value, "__hash__")
            if isinstance(result, ObjectIdValue) and _IDS_ARE_THEIR_HASHES:
                return result  # (an id fits a machine word and is never -1)
            return ConstantValue(checked(tx, "__hash__", result, cls))
    raise Unsupported(f"builtins.hash on {value.describe()}")
