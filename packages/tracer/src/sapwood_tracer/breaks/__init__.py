"""Graph breaks and the generated code of a cache entry.

* :mod:`.exits` — where a trace stopped: the root frame's state at the break (stack, locals,
  cells, open contexts), how the construct runs eagerly, and the tail of the entry function
  that goes on after it.
* :mod:`.resume` — resume functions: the original bytecode with a prologue that rebuilds the
  stack and jumps to the instruction after the break (assembled with ``bytecode``).
* :mod:`.generator_code` — repositionable generator codes: a generator of the trace rebuilt
  as a real one at its yield, which a later trace can advance and put elsewhere;
  :mod:`.generator_rebuild` emits the entry's lines that build or reposition one.
* :mod:`.outputs` — the entry function itself: guards, the compiled graph, rebuilding the
  returned values as real objects, replaying side effects (:mod:`.iterator_rebuild` and
  :mod:`.function_rebuild` rebuild iterators, and a nested function's attributes).

May import the interpreter (its frames and recorded effects), the Python and value models,
guards, marks and errors; only the API sits above.
"""
