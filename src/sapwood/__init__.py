"""sapwood: one import for the whole stack.

The public surface grows as the packages land; see the documentation's overview.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
