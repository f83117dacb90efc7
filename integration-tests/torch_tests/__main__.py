"""``python -m torch_tests``: see :mod:`torch_tests.runner`."""

import sys

from .runner import main

if __name__ == "__main__":
    sys.exit(main())
