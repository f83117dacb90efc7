"""sapwood's differential fuzzer: generated programs, run eagerly and compiled, compared.

* :mod:`fuzz.generator` writes a readable random program for a seed (with
  :mod:`fuzz.statements` and :mod:`fuzz.expressions`), and the calls to make of it.
* :mod:`fuzz.oracle` runs it eagerly and through ``sapwood.compile(..., backend="eager")``
  and classifies the outcome (match, mismatch, crash, both-raise).
* :mod:`fuzz.runner` (``python -m fuzz``) runs many programs on worker processes, prints
  the counts and writes each failing program with a reproducer.
* :mod:`fuzz.shrink` (``python -m fuzz.shrink``) cuts a failing program down.

``FINDINGS.md`` lists the root causes found so far, with minimal reproducers.
"""
