"""The value model: what the interpreter keeps on its stack and in its locals.

Every value is a :class:`~sapwood_tracer.values.base.Value`; values that came from the
frame's inputs carry the :class:`sapwood_graph.Source` they were read from, and the guards
that make their use sound were recorded when they were wrapped (see
:mod:`sapwood_tracer.interpreter.builder`). Values created during the trace carry no source.

The modules, lowest first (each imports only those before it): :mod:`.base` (the
:class:`~.base.Value` protocol, constants, builtins, list iterators), :mod:`.random_generators`
(the state of ``random``'s generators during a trace), :mod:`.functions`,
:mod:`.attributes` (class attribute lookup), :mod:`.dunders` (containers' special
methods), :mod:`.list_iterators`, :mod:`.sequences`, :mod:`.dicts`, :mod:`.default_dicts`, :mod:`.containers`
(both, for their users), :mod:`.sets`, :mod:`.iterators`,
:mod:`.contexts`, :mod:`.symbolic`, :mod:`.tensors`, :mod:`.identity`,
:mod:`.sequence_iterators`, :mod:`.objects`, :mod:`.runtime_objects`, :mod:`.enums`,
:mod:`.modules`, :mod:`.ordered_dataclasses`, :mod:`.generator_codes` (the registry of
repositionable generator codes), :mod:`.generators`, :mod:`.real_iterators`, :mod:`.numpy_functions` (numpy's scalar
functions folded on constants).

May import: the context protocol (:mod:`sapwood_tracer.context`), guards' sources, errors,
:mod:`sapwood_tracer.foreign`.
A value that needs the trace (a node, a guard, an inlined call, a side effect, a model of a
builtin) asks the context it is handed; it never imports the interpreter or the Python model.
"""
