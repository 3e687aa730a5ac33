"""The ``trioagent`` command line: ``trioagent examples`` and ``trioagent chat``."""

from ._main import main as main

__all__ = ["main"]
