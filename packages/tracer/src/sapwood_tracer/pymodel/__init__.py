"""How Python behaves on symbolic values: builtins, operators, the standard library, torch
functions and class construction.

Each module models one family of callables or operations over values
(:mod:`sapwood_tracer.values`); the values reach these models through the trace
(:mod:`sapwood_tracer.context`), never by importing them. Importing the package registers
every model: :mod:`.builtins` holds the registry, :mod:`.iteration` adds the builtins over
iterators, :mod:`.settings` adds interpreter settings and immutable constructors,
:mod:`.stdlib` adds ``functools``, ``itertools`` and ``operator``, :mod:`.dict_subclasses`
``Counter``'s counting loop.

May import: the value model, the context protocol, guards' sources, marks, errors.
"""

from . import builtins, dict_subclasses, iteration, settings, stdlib

__all__ = ["builtins", "dict_subclasses", "iteration", "settings", "stdlib"]
