"""The tracer's entry points and what runs around a trace.

* :mod:`.entry` — ``compile``: the wrapper that binds a call's arguments, tries the cache
  entries of the function's code and traces on a miss; ``CompiledModule``; the runtime that
  graph breaks call to go on.
* :mod:`.cache` — cache entries per code object, the recompile limit, ``reset``.
* :mod:`.capture` — one capture: run the interpreter on the call, compile the graph, build
  the cache entry (retracing once to stop at a graph break).
* :mod:`.dynamic` — after a miss, which sizes the next trace makes symbolic.
* :mod:`.distributed` — ``CompiledDDP`` (DDP eager, the wrapped model compiled and cut at its
  gradient buckets) and calling a hooked module (FSDP2) around its compiled forward.
* :mod:`.events` and :mod:`.explain` — the ``SAPWOOD_LOGS`` topics, and ``explain()``.

May import every layer below (graph breaks, the interpreter, the Python and value models,
guards, marks, errors). Nothing inside the tracer imports it.
"""
