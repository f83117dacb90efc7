"""Logging methods of a logger from the inputs (``logger.warning``, ``logger.info_once``,
...): output on every call, so each is a graph break unless it runs once, while tracing."""

from __future__ import annotations

from typing import Any

from ..errors import Unsupported
from .base import ConstantValue, Context, Value

__all__ = ["LOGGER_METHODS", "LoggingCallValue"]

#: the methods of ``logging.Logger`` (and transformers' ``*_once``) modelled as logging calls
LOGGER_METHODS = frozenset(
    [
        "debug",
        "info",
        "warning",
        "warn",
        "error",
        "critical",
        "exception",
        "log",
        "warning_once",
        "info_once",
    ]
)


class LoggingCallValue(Value):
    """A logging method (``logger.warning``, ``logger.warning_once``, ...).

    Logging is output, not data. Where graph breaks are allowed, a logging call breaks the
    graph and runs eagerly on every call, like the rest of the output. The ``*_once``
    methods, and every method under ``fullgraph=True``, run once, while tracing, with their
    constant arguments, and are not repeated by later calls of the compiled code.
    """

    __slots__ = ("method",)

    def __init__(self, method: Any) -> None:
        super().__init__(None)
        self.method = method

    def describe(self) -> str:
        return f"logging method {getattr(self.method, '__name__', '?')}"

    def call(self, tx: Context, args: list[Value], kwargs: dict[str, Value]) -> Value:
        name = getattr(self.method, "__name__", "")
        if tx.breaks_allowed and not name.endswith("_once"):
            # output on every call: a graph break runs it eagerly each time
            raise Unsupported(f"the logging call {name}()")
        if not all(a.is_constant() for a in [*args, *kwargs.values()]):
            raise Unsupported("a logging call with non-constant arguments")
        self.method(
            *(a.as_constant() for a in args), **{k: v.as_constant() for k, v in kwargs.items()}
        )
        return ConstantValue(None)
