"""User objects whose special methods return odd values, for the fuzzer's programs.

A program may define a class ``Odd`` whose special methods (``__len__``, ``__bool__``,
``__index__``, ``__iter__``, ``__hash__``, ``__int__``, ``__float__``, ``__str__``,
``__length_hint__``) each record their call in the global ``G_CALLS`` and return either a
value Python accepts or one it refuses (a negative length, an int from ``__bool__``, a list
from ``__iter__``, an int too large for a machine word, ...), and a global instance
``G_ODD``. Statements use it where Python calls those methods implicitly (``len()``, truth
tests, slicing, ``list()``, ``hash()``, ``in``, f-strings), always inside a ``try`` whose
handler catches the errors CPython raises for refused results, so both sides must agree on
the value, the exception and the calls made (``G_CALLS`` is compared like every global).
"""

from __future__ import annotations

import random

__all__ = ["ODD_ERRORS", "odd_class", "odd_use"]

#: what the ``try`` around a use catches: CPython's errors for refused results
ODD_ERRORS = "(TypeError, ValueError, OverflowError)"

#: what each special method may return: values CPython takes, then values it refuses
_RETURNS = {
    "__len__": ["2", "0", "self.n", "True", "-1", "2**70", "0.5", "None", "[1]"],
    "__bool__": ["True", "False", "self.n > 1", "1", "0", "None", "''"],
    "__index__": ["1", "self.n", "-2", "2**70", "0.5", "'s'", "True"],
    "__iter__": ["iter([1, 2])", "iter(range(self.n))", "[1, 2]", "5", "(1,)"],
    "__hash__": ["7", "-1", "2**70", "self.n", "0.5", "None"],
    "__int__": ["3", "self.n", "1.5", "'3'"],
    "__float__": ["1.5", "2.0", "2", "None"],
    "__str__": ["'odd'", "str(self.n)", "5", "None"],
    "__length_hint__": ["3", "NotImplemented", "-1", "0.5"],
}

#: statements using ``G_ODD``, where ``{k}`` is an int variable and ``{t}`` a tensor one
_USES = [
    "{k} = len(G_ODD) % 5",
    "{t} = {t} * (2 if G_ODD else 3)",
    "{k} = int(not G_ODD)",
    "{k} = len([0, 1, 2, 3][G_ODD:])",
    "{k} = [4, 5, 6, 7][G_ODD % 4]",
    "{k} = len(list(G_ODD)) % 5",
    "{k} = sum(1 for _ in G_ODD) % 5",
    "{k} = int(2 in G_ODD)",
    "{k} = len(tuple(G_ODD)) % 5",
    "{k} = hash(G_ODD) % 5",  # (only with a __hash__ of its own: an id differs per side)
    "{k} = len({{G_ODD: 1}})",
    "{k} = int(G_ODD) % 5",
    "{t} = {t} * float(G_ODD)",
    '{k} = len(f"{{G_ODD}}") % 5',
]


def odd_class(rng: random.Random) -> tuple[list[str], list[str]]:
    """The lines of ``class Odd`` (a few of the special methods, each with a drawn result)
    and of the global instance ``G_ODD``, and the special methods it defines."""
    names = sorted(rng.sample(sorted(_RETURNS), rng.randint(2, 5)))
    lines = [
        "G_CALLS = []",
        "",
        "",
        "class Odd:",
        "    def __init__(self, n):",
        "        self.n = n",
    ]
    for name in names:
        returned = rng.choice(_RETURNS[name])
        lines += [
            "",
            f"    def {name}(self):",
            f'        G_CALLS.append("{name}")',
            f"        return {returned}",
        ]
    lines += ["", "", f"G_ODD = Odd({rng.randint(1, 3)})", ""]
    return lines, names


def odd_use(rng: random.Random, defined: list[str], tensor: str, integer: str) -> str:
    """A statement that uses ``G_ODD`` where Python calls its special methods implicitly (a
    method the class lacks is mostly Python's TypeError too, caught like the others)."""
    uses = [u for u in _USES if "hash(" not in u or "__hash__" in defined]
    return rng.choice(uses).format(t=tensor, k=integer)
