"""The opcode registry: one handler per opcode, registered with the Python versions it serves.

Handler modules (:mod:`sapwood_tracer.interpreter.handlers`) register with :func:`opcode`; the interpreter
asks :func:`dispatch_table` for the table of the running Python once. Version differences
live here, as version bounds, not as ``sys.version_info`` tests inside handlers: when an
opcode changed meaning between versions, each meaning is a separate handler with its own
bounds. Two handlers for one opcode may not serve the same version (checked at registration).
"""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .instructions import Instruction

__all__ = [
    "SUPPORTED_PYTHONS",
    "Handler",
    "dispatch_table",
    "opcode",
    "registered",
    "running_version",
    "unsupported_python",
]

#: ``handler(frame, instruction)``: the frame is a :class:`~.frame.SymbolicFrame` (which
#: imports this registry, so it is not named here).
Handler = Callable[[Any, Instruction], Any]
Version = tuple[int, int]


@dataclass(frozen=True, slots=True)
class _Registration:
    opname: str
    since: Version
    until: Version | None  # exclusive
    handler: Handler

    def serves(self, version: Version) -> bool:
        return self.since <= version and (self.until is None or version < self.until)


#: The Python versions whose bytecode the handlers model (each is tested in CI or on the GPU
#: machine; see docs/installation.md). Another version runs compiled functions eagerly.
SUPPORTED_PYTHONS: tuple[Version, ...] = ((3, 11), (3, 12), (3, 13))


def running_version() -> Version:
    """The running Python's ``(major, minor)``."""
    return (sys.version_info.major, sys.version_info.minor)


def unsupported_python() -> str | None:
    """Why the running Python cannot be traced, or None when it can."""
    version = running_version()
    if version in SUPPORTED_PYTHONS:
        if sysconfig.get_config_var("Py_GIL_DISABLED"):
            # the tracer's caches assume the GIL; no free-threaded suite proves otherwise
            return (
                f"the free-threaded build of Python {version[0]}.{version[1]} is not "
                "supported by sapwood-tracer: compiled functions run eagerly, unchanged"
            )
        return None
    known = ", ".join(f"{major}.{minor}" for major, minor in SUPPORTED_PYTHONS)
    return (
        f"Python {version[0]}.{version[1]} is not supported by sapwood-tracer (it knows the "
        f"bytecode of {known}): compiled functions run eagerly, unchanged"
    )


_registrations: dict[str, list[_Registration]] = {}
_tables: dict[Version, dict[str, Handler]] = {}


def opcode(
    *opnames: str, since: Version = (3, 11), until: Version | None = None
) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ``opnames`` for ``since <= v < until``."""

    def register(handler: Handler) -> Handler:
        for name in opnames:
            new = _Registration(name, since, until, handler)
            for old in _registrations.get(name, []):
                for probe in _overlap_probes(old, new):
                    if old.serves(probe) and new.serves(probe):
                        raise RuntimeError(f"two handlers for {name} on Python {probe}")
            _registrations.setdefault(name, []).append(new)
        _tables.clear()
        return handler

    return register


def _overlap_probes(a: _Registration, b: _Registration) -> list[Version]:
    return [a.since, b.since]


def dispatch_table(version: Version | None = None) -> dict[str, Handler]:
    """Handlers serving ``version`` (default: the running Python), keyed by opname."""
    if version is None:
        version = running_version()
    table = _tables.get(version)
    if table is None:
        table = {
            name: reg.handler
            for name, regs in _registrations.items()
            for reg in regs
            if reg.serves(version)
        }
        _tables[version] = table
    return table


def registered(opname: str) -> list[tuple[Version, Version | None]]:
    """The version ranges ``opname`` has handlers for (for tests and docs)."""
    return [(r.since, r.until) for r in _registrations.get(opname, [])]
