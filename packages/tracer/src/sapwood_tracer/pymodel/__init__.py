"""How Python behaves on symbolic values: builtins, operators, the standard library, torch
functions and class construction.

Each module models one family of callables or operations over values
(:mod:`sapwood_tracer.values`); the values reach these models through the trace
(:mod:`sapwood_tracer.context`), never by importing them. Importing the package registers
every model: :mod:`.builtins` holds the registry, :mod:`.iteration` adds the builtins over
iterators, :mod:`.settings` adds interpreter settings and immutable constructors,
:mod:`.hashing` adds ``hash()`` through a class's own ``__hash__``, :mod:`.numeric`
``int()``, ``float()``, ``oct()``, ``hex()``, ``bin()`` and ``divmod()`` of user objects,
:mod:`.stdlib` adds
``functools``, ``itertools`` and ``operator``, :mod:`.copying` ``object.__reduce_ex__`` of
plain objects (what ``copy.copy``/``copy.deepcopy`` ask), :mod:`.integer_arguments` the
functions that take integers through ``__index__`` (``math.gcd``, ``operator.index``),
:mod:`.itertools_lazy` the lazy ``itertools``
types that filter, repeat or group another iterator, :mod:`.dict_subclasses` ``Counter``'s
counting loop, :mod:`.random_generators` the primitives of ``random``'s generators (draws
computed on a private copy of a generator whose state the trace knows), :mod:`.strict_zip`
``zip(strict=True)``'s iterator and :mod:`.range_iterator_inputs` ``next()`` of a range
iterator from the inputs (both used by :mod:`.iteration`), :mod:`.attribute_deletion`
``delattr()``, :mod:`.generic_lookup` ``object.__getattribute__``, :mod:`.object_comparisons`
``object.__eq__``/``__ne__`` and the orderings called by name, :mod:`.summation`
``sum()`` (compensated on Python 3.12+), :mod:`.higher_order`
``torch.utils.checkpoint.checkpoint`` traced as the body of a higher-order operation; :mod:`.text` gives the text of values the folding
on constants does not cover (enum members whose class has special methods of the user's,
exceptions of the trace, ``str.join`` of an iterator).

May import: the value model, the context protocol, guards' sources, marks, errors.
"""

from . import (
    attribute_deletion,
    builtins,
    copying,
    dict_subclasses,
    generic_lookup,
    hashing,
    higher_order,
    instance_checks,
    integer_arguments,
    iteration,
    itertools_lazy,
    made_classes,
    module_lookups,
    numeric,
    object_comparisons,
    random_generators,
    settings,
    stdlib,
    summation,
)

__all__ = [
    "attribute_deletion",
    "builtins",
    "copying",
    "dict_subclasses",
    "generic_lookup",
    "hashing",
    "higher_order",
    "instance_checks",
    "integer_arguments",
    "iteration",
    "itertools_lazy",
    "made_classes",
    "module_lookups",
    "numeric",
    "object_comparisons",
    "random_generators",
    "settings",
    "stdlib",
    "summation",
]
