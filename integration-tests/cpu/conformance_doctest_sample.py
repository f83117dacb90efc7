"""Doctests for the conformance harness's own tests (``test_conformance_harness.py``): a
module whose ``load_tests`` adds them with ``DocTestSuite``, as CPython's test files do."""

import doctest

examples = """
>>> values = [1, 2, 3]
>>> total = sum(v * v for v in values)
>>> total
14
>>> def double(x):
...     return 2 * x
>>> double  # doctest: +ELLIPSIS
<function double at ...>
>>> next(iter([]))
Traceback (most recent call last):
  ...
StopIteration
"""

with_class = """
>>> class Point:
...     x = 3
>>> Point.x + 1
4
"""

__test__ = {"examples": examples, "with_class": with_class}


def load_tests(loader, tests, pattern):
    tests.addTest(doctest.DocTestSuite())
    return tests
