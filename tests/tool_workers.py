"""Top-level functions for the worker-process tool tests (a worker process imports them)."""

from __future__ import annotations

import os
import pathlib
import time


def write_pid_and_sleep(path: str, seconds: float) -> str:
    """Record this process's id, then sleep.

    Args:
        path: where to write the process id.
        seconds: how long to sleep.
    """
    pathlib.Path(path).write_text(str(os.getpid()))
    time.sleep(seconds)
    return "woke up"


def power(base: int, exponent: int) -> dict[str, object]:
    """Raise a number to a power, in another process.

    Args:
        base: the base.
        exponent: the exponent.
    """
    print("noise on stdout does not corrupt the answer")
    return {"value": base**exponent, "pid": os.getpid()}


def refuse(reason: str) -> str:
    """Always fails.

    Args:
        reason: the error message.
    """
    raise ValueError(reason)


def die() -> str:
    """Ends its process without an answer."""
    os._exit(3)
