"""``python -m trioagent``: the command line of :mod:`trioagent.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
