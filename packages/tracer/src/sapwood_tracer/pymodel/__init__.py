"""How Python behaves on symbolic values: builtins, operators, the standard library, torch
functions and class construction.

Each module models one family of callables or operations over values
(:mod:`sapwood_tracer.values`); the values reach these models through the trace
(:mod:`sapwood_tracer.context`), never by importing them. Importing the package registers
every model: :mod:`.builtins` holds the registry, :mod:`.iteration` adds the builtins over
iterators, :mod:`.settings` adds interpreter settings and immutable constructors,
:mod:`.hashing` adds ``hash()`` through a class's own ``__hash__``, :mod:`.numeric`
``int()``, ``float()``, ``oct()``, ``hex()``, ``bin()`` and ``divmod()`` of user objects, :mod:`.stdlib` adds ``functools``, ``itertools`` and ``operator``, :mod:`.itertools_lazy` the lazy ``itertools``
types that filter, repeat or group another iterator, :mod:`.dict_subclasses` ``Counter``'s
counting loop; :mod:`.text` gives the text of values the folding on constants does not cover
(enum members whose class has special methods of the user's, exceptions of the trace,
``str.join`` of an iterator).

May import: the value model, the context protocol, guards' sources, marks, errors.
"""

from . import (
    builtins,
    dict_subclasses,
    hashing,
    iteration,
    itertools_lazy,
    numeric,
    settings,
    stdlib,
)

__all__ = [
    "builtins",
    "dict_subclasses",
    "hashing",
    "iteration",
    "itertools_lazy",
    "numeric",
    "settings",
    "stdlib",
]
