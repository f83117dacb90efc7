"""The value model: what the interpreter keeps on its stack and in its locals.

Every value is a :class:`~sapwood_tracer.values.base.Value`; values that came from the
frame's inputs carry the :class:`sapwood_graph.Source` they were read from, and the guards
that make their use sound were recorded when they were wrapped (see ``_builder``).
Values created during the trace carry no source.
"""
