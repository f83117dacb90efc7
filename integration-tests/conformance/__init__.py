"""Conformance of the compilers with CPython's own regression tests.

Each test method of a CPython test file (``test.test_dict``, ...) runs twice in a fresh
``TestCase``: once eagerly, as the reference, and once with its body compiled by an
*engine* (sapwood, TorchDynamo, or the eager engine that checks the harness itself). The
two outcomes and what the engine reported (graph breaks, frames left to run eagerly) give
each test a category (:mod:`conformance.classify`). Each doctest a file's ``load_tests``
adds is one test too: its examples, made functions, run eagerly and compiled
(:mod:`conformance.doctests`).

Layout, imports going one way (top imports bottom):

- ``runner``: the command line, one worker process per (file, engine), totals, JSON.
- ``report``: the side-by-side counts and the generated ``docs/conformance.md``.
- ``worker``: runs one file's tests for one engine, in its own process.
- ``doctests``: runs one doctest's examples both ways and gives its category.
- ``wrapping``: a doctest example as a function an engine can compile.
- ``classify``: runs one test both ways and gives its category; no process handling.
- ``assertions``: unittest's assertion methods kept out of the compiled region.
- ``engines``: the three engines behind one interface; the only module that knows a
  compiler's API.
"""

from .classify import CATEGORIES

__all__ = ["CATEGORIES"]
