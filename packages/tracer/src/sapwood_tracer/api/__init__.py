"""The tracer's public entry points and what runs around a trace: ``compile`` and its
per-code cache, capturing one call, the recompile policy for dynamic shapes, events and
logs, and ``explain``."""
