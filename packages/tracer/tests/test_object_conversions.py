"""``hash()``, ``str()``, ``repr()``, ``int()``, ``float()``, ``oct()``/``hex()``/``bin()`` of
user objects whose class writes the special method in Python, compiled whole
(``fullgraph=True``) and compared with eager: the method is inlined and its result checked as
Python checks it; the hash of an ``id()`` is that id."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import torch

import sapwood_tracer
from sapwood_tracer import Unsupported

calls: list[Any] = []


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    calls.clear()
    yield


def _caught(call: Any) -> tuple[str, str]:
    try:
        call()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return "no error", ""


def _same_as_eager(fn: Any, *args: Any) -> Any:
    expected = fn(*args)
    eager_calls = list(calls)
    calls.clear()
    got = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)(*args)
    assert type(got) is type(expected)
    assert got[1:] == expected[1:] and torch.equal(got[0], expected[0])
    assert calls == eager_calls
    return got


class Hashed:
    def __hash__(self):
        calls.append("__hash__")
        return hash(id(self))


class Texts:
    def __repr__(self):
        calls.append("__repr__")
        return "Texts()"


class WithStr(Texts):
    def __str__(self):
        calls.append("__str__")
        return "text"


class BadRepr:
    def __repr__(self):
        return 5


class Plain:
    pass


def test_the_hash_of_an_id_is_that_id():
    def fn(x):
        a, b = Hashed(), Hashed()
        h = hash(a)
        return x + 1, h == id(a), hash(id(b)) == id(b), hash(a) != hash(b), {hash(a): 1}[id(a)]

    _same_as_eager(fn, torch.ones(1))


def test_the_hash_of_an_id_is_still_an_unknown_number():
    def fn(x):
        return x + 1, hash(Hashed()) + 1

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    with pytest.raises(Unsupported):
        compiled(torch.ones(1))


def test_str_and_repr_of_objects_inline_their_methods():
    def fn(x):
        return x + 1, repr(Texts()), str(Texts()), repr(WithStr()), str(WithStr())

    _same_as_eager(fn, torch.ones(1))


def test_str_and_repr_returning_no_string_raise_pythons_type_error():
    def fn(x):
        return x + 1, _caught(lambda: repr(BadRepr())), _caught(lambda: str(BadRepr()))

    _same_as_eager(fn, torch.ones(1))


def test_repr_of_an_object_with_objects_repr_breaks():
    # object.__repr__ shows the address, unknown while tracing
    def fn(x):
        return x + 1, repr(Plain())

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    with pytest.raises(Unsupported):
        compiled(torch.ones(1))


class Numeric:
    def __int__(self):
        calls.append("__int__")
        return 7

    def __float__(self):
        calls.append("__float__")
        return 2.5

    def __index__(self):
        calls.append("__index__")
        return 5


class IndexOnly:
    def __index__(self):
        return 6


class WrongTypes:
    def __int__(self):
        return "x"

    def __float__(self):
        return "y"

    def __index__(self):
        return "z"


class Huge:
    def __index__(self):
        return 2**2000


class IndexGivingBool:
    def __index__(self):
        return True


def test_numbers_of_objects_inline_their_methods():
    def fn(x):
        n, i = Numeric(), IndexOnly()
        return x + 1, int(n), float(n), oct(n), hex(n), bin(n), int(i), float(i), hex(255)

    _same_as_eager(fn, torch.ones(1))


def test_numbers_of_objects_raise_pythons_errors():
    def fn(x):
        bad, plain = WrongTypes(), Plain()
        calls = [lambda: int(bad), lambda: float(bad), lambda: oct(bad), lambda: float(Huge())]
        calls += [lambda: int(plain), lambda: float(plain), lambda: hex(plain)]
        return x + 1, [_caught(call) for call in calls]

    _same_as_eager(fn, torch.ones(1))


def test_a_number_of_a_subclass_of_int_breaks():
    # Python converts it with a DeprecationWarning
    def fn(x):
        return x + 1, int(IndexGivingBool())

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    with pytest.raises(Unsupported):
        compiled(torch.ones(1))


class DivMod:
    def __divmod__(self, other):
        calls.append("__divmod__")
        return ("divmod", other)

    def __rdivmod__(self, other):
        calls.append("__rdivmod__")
        return ("rdivmod", other)


class OnlyReflected:
    def __add__(self, other):
        return NotImplemented

    def __radd__(self, other):
        return "radd"


def test_divmod_of_objects_calls_their_methods():
    def fn(x):
        d = DivMod()
        return x + 1, divmod(d, 1), divmod(1, d), divmod(7, 2)

    _same_as_eager(fn, torch.ones(1))


def test_an_arithmetic_operator_is_not_reflected_between_objects_of_one_class():
    # Python raises TypeError: __radd__ is tried only when the classes differ
    def fn(x):
        return x + 1, OnlyReflected() + OnlyReflected()

    compiled = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)
    with pytest.raises(Unsupported):
        compiled(torch.ones(1))
    assert 1 + OnlyReflected() == "radd"


def _fresh_class() -> type:
    class Point:
        pass

    return Point


def test_an_object_whose_dict_was_read_is_rebuilt_with_its_own_dict():
    # its __dict__ filled in place, not replaced by another dict (3.11: a table of its
    # class's shared keys; 3.13: inline values), as sys.getsizeof of the dict shows (two
    # fresh classes: the shared keys depend on the class's history)
    def fn(x, cls):
        p = cls()
        namespace = p.__dict__
        namespace["e"] = 5
        p.f = 6
        return x + 1, p, namespace

    got = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)(torch.ones(1), _fresh_class())
    want = fn(torch.ones(1), _fresh_class())
    assert got[2] is got[1].__dict__ and vars(got[1]) == vars(want[1])
    assert sys.getsizeof(got[2]) == sys.getsizeof(want[2])


def test_a_dict_assigned_as_an_objects_dict_is_that_dict():
    def fn(x, cls):
        p, q = cls(), cls()
        shared = {"a": 1}
        p.__dict__ = shared
        q.__dict__ = shared
        return x + 1, p, q, shared

    got = sapwood_tracer.compile(fn, backend=_eager, fullgraph=True)(torch.ones(1), _fresh_class())
    assert got[1].__dict__ is got[3] and got[2].__dict__ is got[3] and got[3] == {"a": 1}
