"""Opcode handlers, one module per family. Importing this package registers them all."""

from . import blocks, calls, containers, control_flow, loads_stores, operators, stack

__all__ = ["blocks", "calls", "containers", "control_flow", "loads_stores", "operators", "stack"]
