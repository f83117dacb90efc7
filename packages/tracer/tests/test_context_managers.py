"""Context managers and the exceptions they see, as CPython's test_with, test_contextlib and
test_raise use them: ``contextlib.contextmanager`` made and used inside the compiled
function, attributes of functions made in the trace (``functools.wraps``), ``del`` of an
object's attribute, OSError's choice of subclass, the exception the caller is handling, and
the traceback ``__exit__`` receives. Each program is compiled, compared with eager, and
checked to have run without a graph break (or, where the construct is not modelled, to
break rather than answer wrongly)."""

from __future__ import annotations

import contextlib
import errno
import functools
import sys
from typing import Any

import pytest
import torch

import sapwood_tracer
from sapwood_tracer.api import events


def _eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return gm.forward


@sapwood_tracer.disable
def _opaque(value: Any = None) -> Any:
    return value


def _run(fn: Any, *args: Any) -> tuple[Any, list[str]]:
    """``fn(*args)`` compiled, and the reasons of the breaks and eager runs it met."""
    reasons: list[str] = []

    def listen(kind: str, data: dict[str, Any]) -> None:
        if kind == "skip":
            reasons.append(data["reason"])
        elif kind == "capture" and data["entry"].exit is not None:
            reasons.append(data["entry"].exit.reason)

    stop = events.listen(listen)
    try:
        return sapwood_tracer.compile(fn, backend=_eager)(*args), reasons
    finally:
        stop()


def _outcome(call: Any) -> Any:
    try:
        return ("returned", call())
    except Exception as error:
        return ("raised", type(error), error.args)


class _Resource:
    def __init__(self) -> None:
        self.entered = False
        self.closed = False


@contextlib.contextmanager
def _managed():
    resource = _Resource()
    try:
        resource.entered = True
        yield resource
    finally:
        resource.closed = True


# -- contextlib.contextmanager --------------------------------------------------------------


def test_a_contextmanager_defined_outside_runs_without_a_break():
    def fn(x):
        with _managed() as resource:
            y = x + 1
            inside = (resource.entered, resource.closed)
        return y, inside, (resource.entered, resource.closed)

    x = torch.ones(2)
    (out, reasons), expected = _run(fn, x), fn(x)
    assert reasons == []
    assert torch.equal(out[0], expected[0]) and out[1:] == expected[1:] == (
        (True, False),
        (True, True),
    )


def test_a_contextmanager_made_in_the_function_wraps_its_generator_function():
    def fn():
        @contextlib.contextmanager
        def woohoo(value):
            """Doc of woohoo."""
            yield value * 2

        with woohoo(21) as got:
            pass
        return got, woohoo.__name__, woohoo.__doc__, woohoo.__wrapped__.__qualname__

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn() == (42, "woohoo", "Doc of woohoo.", fn.__qualname__ + ".<locals>.woohoo")


def test_a_returned_contextmanager_function_keeps_its_wraps_attributes():
    def fn():
        @contextlib.contextmanager
        def made():
            yield

        made.extra = 5
        return made

    out, reasons = _run(fn)
    expected = fn()
    assert reasons == []
    assert out.__name__ == expected.__name__ == "made"
    assert out.__qualname__ == expected.__qualname__
    assert out.__wrapped__.__name__ == "made" and out.__wrapped__ is not out
    assert out.__dict__.keys() == expected.__dict__.keys() == {"__wrapped__", "extra"}
    assert out.extra == 5
    with out():
        pass


# -- attributes of functions made in the trace ----------------------------------------------


def test_setting_and_reading_attributes_of_a_nested_function():
    def fn():
        def inner():
            return 1

        inner.foo = "bar"
        inner.__doc__ = "set"
        inner.__name__ = "renamed"
        has_missing = hasattr(inner, "missing")
        return inner.foo, inner.__doc__, inner.__name__, has_missing, inner.__module__

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn() == ("bar", "set", "renamed", False, __name__)


def test_functools_wraps_on_a_nested_function_copies_the_wrapped_attributes():
    def fn():
        def wrapped(a):
            """Wrapped doc."""
            return a + 1

        wrapped.marker = 3

        @functools.wraps(wrapped)
        def wrapper(a):
            return wrapped(a) * 2

        return (
            wrapper(1),
            wrapper.__name__,
            wrapper.__doc__,
            wrapper.marker,
            wrapper.__annotations__,
        )

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn() == (4, "wrapped", "Wrapped doc.", 3, {})


def test_the_docstring_of_a_nested_function_and_of_a_lambda_are_pythons():
    def fn():
        def documented():
            """Doc."""

        def plain():
            return "not a docstring"

        return documented.__doc__, plain.__doc__, (lambda: "x").__doc__

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn()


def test_deleting_an_attribute_of_a_nested_function():
    def fn():
        def inner():
            pass

        inner.a = 1
        del inner.a
        try:
            del inner.a
        except AttributeError as error:
            return hasattr(inner, "a"), str(error)

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn()


def test_a_nested_name_must_be_a_string_and_an_unmodelled_field_breaks():
    def fn():
        def inner(a=1):
            return a

        return inner.__defaults__

    out, reasons = _run(fn)
    assert out == fn() == (1,)
    assert any("__defaults__" in reason for reason in reasons)


# -- del of attributes of objects made in the trace -----------------------------------------


class _Plain:
    def __init__(self) -> None:
        self.a = 1
        self.b = 2


def test_del_of_an_attribute_of_a_new_object():
    def fn():
        obj = _Plain()
        del obj.a
        try:
            del obj.a
        except AttributeError as error:
            message = str(error)
        return obj, hasattr(obj, "a"), message

    out, reasons = _run(fn)
    expected = fn()
    assert reasons == []
    assert out[1:] == expected[1:]
    assert vars(out[0]) == vars(expected[0]) == {"b": 2}


class _Deleting:
    def __delattr__(self, name: str) -> None:
        object.__delattr__(self, name)


def test_del_through_a_class_delattr_breaks():
    def fn():
        obj = _Deleting()
        obj.a = 1
        del obj.a
        return hasattr(obj, "a")

    out, reasons = _run(fn)
    assert out == fn() is False
    assert any("del of attribute" in reason for reason in reasons)


class _SelfReferencing:
    def __init__(self) -> None:
        self.me = self


def test_an_object_holding_itself_is_rebuilt_at_a_break():
    def fn():
        obj = _SelfReferencing()
        _opaque()
        return obj, obj.me is obj

    out, _ = _run(fn)
    assert out[1] is True and out[0].me is out[0]


# -- OSError --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [(), ("message",), (errno.ENOENT, "missing"), (errno.EACCES, "denied"), (12345, "other")],
)
def test_os_error_picks_the_subclass_python_picks(args):
    def fn():
        error = OSError(*args)
        return type(error), error.args, error.errno, error.strerror, str(error)

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn()


def test_raising_os_error_sets_its_context():
    def fn():
        try:
            try:
                1 / 0  # noqa: B018
            except ZeroDivisionError:
                raise OSError  # noqa: B904
        except OSError as error:
            return type(error.__context__)

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn() is ZeroDivisionError


def test_os_error_with_a_filename_breaks():
    def fn():
        return OSError(errno.ENOENT, "missing", "file.txt").filename

    out, reasons = _run(fn)
    assert out == fn() == "file.txt"
    assert any("OSError" in reason for reason in reasons)


# -- the exception the caller is handling ---------------------------------------------------


def test_an_exception_escaping_a_break_keeps_the_callers_exception_as_context():
    def fn():
        try:
            raise IndexError("inner")
        except IndexError as error:
            caught = error
        _opaque()
        return caught

    compiled = sapwood_tracer.compile(fn, backend=_eager)

    def caller(call):
        results = [call()]
        try:
            raise KeyError("outer")
        except KeyError:
            results.append(call())
        return [(repr(r), repr(r.__context__)) for r in results]

    assert (
        caller(compiled)
        == caller(fn)
        == [
            ("IndexError('inner')", "None"),
            ("IndexError('inner')", "KeyError('outer')"),
        ]
    )


# -- the traceback given to __exit__ --------------------------------------------------------


class _Recording:
    def __enter__(self) -> _Recording:
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> bool:
        self.traceback_is_none = traceback is None
        self.traceback_is_true = bool(traceback)
        return True


def test_exit_sees_a_traceback_that_is_not_none():
    def fn():
        manager = _Recording()
        with manager:
            raise ValueError("x")
        return manager.traceback_is_none, manager.traceback_is_true

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn() == (False, True)


class _Keeping:
    def __enter__(self) -> _Keeping:
        return self

    def __exit__(self, *exc_info: Any) -> bool:
        self.exc_info = exc_info
        return True


def test_a_traceback_kept_past_the_function_is_not_rebuilt_as_none():
    def fn():
        manager = _Keeping()
        with manager:
            raise ValueError("x")
        return manager

    out, reasons = _run(fn)
    assert out.exc_info[2] is not None
    assert fn().exc_info[2] is not None
    assert reasons  # the traceback cannot be rebuilt: the call ran eagerly


def test_nothing_is_left_in_exc_info_by_the_rebuild():
    def fn():
        _opaque()
        return sys.exc_info()

    assert _outcome(lambda: _run(fn)[0]) == _outcome(fn)


# -- implicit chaining (__context__) --------------------------------------------------------


def _in_and_out_of_a_handler(call: Any) -> list[str]:
    """``call()`` as it ends while nothing is handled, and while the caller handles one."""
    results = [repr(call())]
    try:
        raise AttributeError("outer")
    except AttributeError:
        results.append(repr(call()))
    return results


def test_re_raising_a_caught_exception_replaces_its_context_and_cuts_the_cycle():
    def fn():
        try:
            try:
                raise NameError("a")
            except NameError as a:
                try:
                    1 / 0  # noqa: B018
                except ZeroDivisionError:
                    raise a  # noqa: B904
        except NameError as error:
            return error.__context__.__context__, type(error.__context__)

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    assert _in_and_out_of_a_handler(compiled) == _in_and_out_of_a_handler(fn)
    assert fn() == (None, ZeroDivisionError)


def test_raising_an_old_exception_in_a_new_handler_chains_it_to_the_new_one():
    def fn():
        try:
            raise KeyError
        except KeyError:
            try:
                raise ValueError("A")
            except ValueError as caught:
                kept = caught
        try:
            raise TypeError
        except TypeError:
            try:
                raise kept
            except ValueError as error:
                return type(error.__context__), type(error.__context__.__context__)

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    assert _in_and_out_of_a_handler(compiled) == _in_and_out_of_a_handler(fn)


def test_raising_an_old_exception_outside_handlers_depends_on_the_caller():
    def fn():
        try:
            raise KeyError
        except KeyError:
            try:
                raise ValueError("A")
            except ValueError as caught:
                kept = caught
        try:
            raise kept
        except ValueError as error:
            _opaque()
            return error.__context__

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    assert _in_and_out_of_a_handler(compiled) == _in_and_out_of_a_handler(fn)
    assert _in_and_out_of_a_handler(fn) == ["KeyError()", "AttributeError('outer')"]


def test_a_bare_raise_keeps_the_context():
    def fn():
        try:
            try:
                raise IndexError("i")
            except IndexError as error:
                first = error
                raise
        except IndexError as again:
            _opaque()
            return first is again, again.__context__

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    assert _in_and_out_of_a_handler(compiled) == _in_and_out_of_a_handler(fn)


# -- builtin operations on constants raise as in Python -------------------------------------


def test_len_and_indexing_of_constants_raise_the_builtin_errors():
    def fn():
        caught = []
        with contextlib.suppress(TypeError):
            len(5)
            caught.append("not reached")
        try:
            "Hello"[50]
        except IndexError as error:
            caught.append(str(error))
        try:
            len(None)
        except TypeError as error:
            caught.append(error.args)
        return caught

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn()


def _from_three_places(call: Any) -> list[str]:
    """``call()`` (or what it raised) outside any handler, inside one, and outside again."""

    def attempt() -> str:
        try:
            return repr(call())
        except Exception as error:
            return repr(error)

    results = [attempt()]
    try:
        raise KeyError("outer")
    except KeyError:
        results.append(attempt())
    results.append(attempt())
    return results


def test_a_bare_raise_with_nothing_handled_is_a_runtime_error():
    def fn():
        try:
            raise
        except RuntimeError as error:
            return str(error)

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    assert _from_three_places(compiled) == _from_three_places(fn)
    assert _from_three_places(fn)[1] == "KeyError('outer')"


def test_a_trace_made_outside_handlers_is_not_reused_inside_one():
    def fn():
        error = ValueError("v")
        try:
            raise error
        except ValueError:
            pass
        _opaque()
        return error.__context__

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    assert (
        _from_three_places(compiled)
        == _from_three_places(fn)
        == [
            "None",
            "KeyError('outer')",
            "None",
        ]
    )


# -- keyword arguments of builtin exceptions ------------------------------------------------


def test_attribute_and_import_errors_take_their_keyword_fields():
    def fn():
        sentinel = _Plain()
        error = AttributeError("Ouch", name="carry", obj=sentinel)
        imported = ImportError("x", name="n", path="p")
        missing = ModuleNotFoundError(name="m")
        return (
            (error.name, error.obj is sentinel, error.args),
            (imported.name, imported.path, imported.msg, str(imported)),
            (missing.name, missing.msg, NameError("q", name="w").name),
            imported,
        )

    out, reasons = _run(fn)
    expected = fn()
    assert reasons == []
    assert out[:3] == expected[:3]
    assert (out[3].name, out[3].path, out[3].msg) == ("n", "p", "x")


def test_an_unknown_keyword_of_a_builtin_exception_breaks_and_raises_as_python():
    def fn():
        return AttributeError("x", bad=1)

    assert _outcome(lambda: _run(fn)[0]) == _outcome(fn)


# -- sys.exc_info() and the caller's exception ----------------------------------------------


def test_sys_exc_info_inside_and_after_handlers():
    def fn():
        def gen():
            yield

        try:
            raise RuntimeError("r")
        except RuntimeError:
            it = gen()
            next(it)
            inside = sys.exc_info()[:2], sys.exception()
        for _ in it:
            pass
        return sys.exc_info(), sys.exception(), inside

    out, reasons = _run(fn)
    assert reasons == []
    assert repr(out) == repr(fn())


def test_sys_exc_info_where_the_caller_handles_one_breaks_and_is_pythons():
    def fn():
        return sys.exc_info()

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    try:
        raise KeyError("outer")
    except KeyError as error:
        got = compiled()
        assert got[1] is error and got[2] is error.__traceback__ is not None


def test_a_break_leaves_the_tracebacks_of_the_callers_exception_alone():
    def fn():
        _opaque()
        return sys.exc_info()[2]

    compiled = sapwood_tracer.compile(fn, backend=_eager)
    try:
        raise KeyError("outer")
    except KeyError as error:
        before = error.__traceback__
        compiled()
        assert error.__traceback__ is before is not None


def test_assigning_a_traceback_that_is_not_one_raises_type_error():
    def fn():
        try:
            Exception().__traceback__ = 5
        except TypeError as error:
            return str(error)

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn() == "__traceback__ must be a traceback or None"


# -- the chaining fields of exceptions ------------------------------------------------------


def test_setting_the_chaining_fields_of_an_exception_from_before_a_break():
    def fn():
        try:
            raise Exception("e")
        except Exception as caught:
            error = caught
        _opaque()
        seen = [error.__context__, error.__cause__, error.__suppress_context__]
        error.__context__ = NameError("n")
        error.__cause__ = None
        seen += [type(error.__context__), error.__cause__, error.__suppress_context__]
        error.__suppress_context__ = False
        seen.append(error.__suppress_context__)
        for field, bad in (("__cause__", 5), ("__suppress_context__", 1)):
            try:
                setattr(error, field, bad)
            except TypeError as type_error:
                seen.append(str(type_error))
        return seen, error

    (seen, error), reasons = _run(fn)
    expected, original = fn()
    assert seen == expected
    assert reasons == ["a call to _opaque, which sapwood must not trace"]
    fields = ("__cause__", "__suppress_context__")
    assert [getattr(error, f) for f in fields] == [getattr(original, f) for f in fields]
    assert repr(error.__context__) == repr(original.__context__) == "NameError('n')"


def test_setting_the_cause_of_a_new_exception_suppresses_its_context():
    def fn():
        error = ValueError()
        error.__cause__ = None
        suppressed = error.__suppress_context__
        try:
            error.__context__ = "x"
        except TypeError as type_error:
            return suppressed, str(type_error), error

    out, reasons = _run(fn)
    expected = fn()
    assert reasons == []
    assert (
        out[:2]
        == expected[:2]
        == (True, "exception context must be None or derive from BaseException")
    )
    assert out[2].__suppress_context__ is True and out[2].__cause__ is None


# -- a bare object() ------------------------------------------------------------------------

_SENTINEL = object()


def test_a_bare_object_passes_a_break_and_keeps_its_identity():
    def fn(default=_SENTINEL):
        sentinel = object()
        error = AttributeError("a", name="n", obj=sentinel)
        _opaque()
        try:
            sentinel.attribute = 1
        except AttributeError as attribute_error:
            message = str(attribute_error)
        return error.obj is sentinel, default is _SENTINEL, message, hasattr(sentinel, "attribute")

    out, _ = _run(fn)
    assert out == fn()
    # (3.13 adds "and no __dict__ for setting new attributes")
    assert out[2].startswith("'object' object has no attribute 'attribute'")
    assert out[:2] == (True, True) and out[3] is False


# -- generators: an exception that leaves one -----------------------------------------------


def test_stop_iteration_raised_in_a_generator_becomes_runtime_error():
    def fn():
        def gen():
            yield 1
            next(iter([]))
            yield 2

        out = []
        try:
            for item in gen():
                out.append(item)
        except RuntimeError as error:
            cause = error.__cause__
            out.append((str(error), type(cause), error.__context__ is cause))
        return out

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn() == [1, ("generator raised StopIteration", StopIteration, True)]


def test_a_generator_an_exception_left_is_finished():
    def fn():
        def gen():
            yield 1
            raise KeyError("k")

        it = gen()
        seen = [next(it)]
        try:
            next(it)
        except KeyError as error:
            seen.append(repr(error))
        seen.append(next(it, "finished"))
        return seen

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn() == [1, "KeyError('k')", "finished"]


def test_a_generator_suspended_in_an_except_block_keeps_its_exception_to_itself():
    def fn():
        def gen():
            try:
                raise KeyError("k")
            except KeyError:
                yield 1
                yield sys.exc_info()[0]

        it = gen()
        first = next(it)
        outside = sys.exc_info()[0]
        try:
            raise ValueError("v")
        except ValueError as error:
            context = error.__context__
        return first, outside, context, next(it)

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn() == (1, None, None, KeyError)


def test_a_generator_sees_the_exception_its_caller_handles():
    def fn():
        def gen():
            yield sys.exc_info()[0]

        it = gen()
        try:
            raise KeyError
        except KeyError:
            return next(it)

    out, reasons = _run(fn)
    assert reasons == []
    assert out == fn() is KeyError


def test_code_reading_reference_counts_runs_eagerly_as_a_whole():
    def fn():
        def inner():
            pass

        kept = inner.attribute = object()
        before = sys.getrefcount(kept)
        for _ in range(3):
            _opaque(inner)
        return before == sys.getrefcount(kept)

    out, reasons = _run(fn)
    assert out is fn() is True
    assert any("reference counts" in reason for reason in reasons)


class _ReprWrapper:
    def __repr__(self) -> str:
        return repr(self.value)


@pytest.mark.parametrize("kind", [set, frozenset, list])
def test_a_container_that_contains_itself_through_an_object_is_one_container(kind):
    def fn():
        wrapper = _ReprWrapper()
        container = kind([wrapper])
        wrapper.value = container
        return container

    out, _ = _run(fn)
    assert repr(out) == repr(fn())
    assert next(iter(out)).value is out


class _Doubling:
    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value * 2)


def test_assigning_an_attribute_of_a_new_object_runs_its_class_setattr():
    def fn():
        obj = _Doubling()
        obj.x = 1
        return obj.x, obj

    (value, obj), reasons = _run(fn)
    assert reasons == []
    assert value == fn()[0] == 2
    assert vars(obj) == {"x": 2}
