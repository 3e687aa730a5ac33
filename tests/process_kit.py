"""Helpers for tests that start process trees: a command that records the PIDs of a child
shell and its grandchild, and a check that none of them is alive.

Not a test module; the subprocess tests import it as ``process_kit``.
"""

from __future__ import annotations

import os
import pathlib


def tree_command(pid_file: pathlib.Path, seconds: float, stop_after: float | None = None) -> str:
    """``sh`` (the child) writes its PID, starts ``sleep`` (the grandchild) in the background,
    writes that PID too, and waits for it; with ``stop_after``, it kills the grandchild itself
    after that many seconds instead (so a short command has a long-lived grandchild)."""
    start = f"echo $$ > {pid_file}.tmp; sleep {seconds} & echo $! >> {pid_file}.tmp"
    end = "wait" if stop_after is None else f"sleep {stop_after}; kill $!; wait"
    return f"sh -c '{start}; mv {pid_file}.tmp {pid_file}; {end}'"


def recorded_pids(pid_file: pathlib.Path) -> list[int]:
    for candidate in (pid_file, pid_file.with_name(pid_file.name + ".tmp")):
        if candidate.exists():
            return [int(line) for line in candidate.read_text().split()]
    return []


def is_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a foreign parent to reap it counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if is_alive(pid)]
