"""PyTorch's own Dynamo tests, with compilation routed to sapwood or to Dynamo.

The corpus is a set of PyTorch's ``test/dynamo/test_*.py`` files, kept unchanged in
``upstream/``. Each test method runs once per engine; the tests check themselves, so what
the harness decides is where the compile entry points go (:mod:`torch_tests.shim`) and what
kind of failure a failing test shows (:mod:`torch_tests.outcome`). CPython's conformance
harness (``integration-tests/conformance``) lends its test collection, exception lines and
engines' error attribution and graph-break watch.

Layout, imports going one way (top imports bottom):

- ``runner``: the command line, one worker process per (file, engine), totals, JSON.
- ``report``: the side-by-side counts, the commonest reasons, ``docs/torch-tests.md``.
- ``worker``: runs one file's tests for one engine, in its own process.
- ``outcome``: runs one test and gives its category; no process handling.
- ``corpus``: the upstream files, and which tests read Dynamo's internals.
- ``shim``: the compile entry points routed to an engine, and what a test compiled.
"""

from .outcome import CATEGORIES

__all__ = ["CATEGORIES"]
