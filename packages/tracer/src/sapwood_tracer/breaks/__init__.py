"""Graph breaks: the state of a frame where a trace stopped, the resume functions that go on
from there, and the generated code that rebuilds outputs and replays side effects."""
