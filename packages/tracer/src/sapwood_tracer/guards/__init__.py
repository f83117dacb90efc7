"""Guards: from guard records to the generated Python that checks them on every call.

* :mod:`.sources` — the tracer's own sources (lengths, dict keys, ``hasattr``, global torch
  state, ...) beside sapwood_graph's, as frozen records; nothing is evaluated from text.
* :mod:`.emitter` — the code generator: source expressions, constants bound to generated
  names (no user string is ever spliced into code), and building the function.
* :mod:`.checks` — one guard as one exact expression (the specification).
* :mod:`.shapes` — ShapeEnv guards and tensor checks with symbolic dims.
* :mod:`.fast_path` — :func:`~.fast_path.emit_guards`: the per-call check as fast
  straight-line code (implied guards left out, module attributes read through their
  instance dict, likely failures first, a locator for the failing guard).

The lowest layer of the tracer: imports only ``sapwood_graph``, torch, sympy and errors.
"""
