"""The symbolic interpreter: instruction decoding, the opcode registry and its handlers, the
symbolic frame, and the trace session that owns one trace's state."""
