"""How Python behaves on symbolic values: builtins, operators, the standard library, torch
functions and class construction."""
