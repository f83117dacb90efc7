"""The symbolic interpreter: instruction decoding, the opcode registry and its handlers, the
symbolic frame, and the trace session that owns one trace's state.

* :mod:`.instructions` decodes code objects (jump targets as indices); :mod:`.registry`
  holds one handler per opcode with the Python versions it serves; :mod:`.handlers` has the
  handlers by family (importing this package registers them all).
* :mod:`.frame` runs one activation of a code object on a value stack;
  :mod:`.session` owns one trace: it implements :mod:`sapwood_tracer.context` for the values
  and the models of Python, inlines calls into child frames, and records guards;
  :mod:`.pure_comprehensions` runs a pure list comprehension (3.11) for real instead.
* :mod:`.builder` turns real objects read through sources into values, with their guards;
  :mod:`.graph_bridge` is the one door into ``sapwood_graph``; :mod:`.shape_plan` says which
  sizes a trace makes symbolic; :mod:`.side_effects` records writes to outside objects.
* :mod:`.real_generators` and :mod:`.real_iterators` read real generators rebuilt by an
  earlier entry (and their range iterators) as values the trace runs.

May import: the Python model, the value model, the context protocol, guards, marks, errors.
Never imports graph breaks or the API (they sit above).
"""

from . import handlers

__all__ = ["handlers"]
