"""Where a sync function tool runs: a worker thread (the default) or a worker process.

A sync function never runs on the event loop.  In a **thread** (``trio.to_thread.run_sync``
with ``abandon_on_cancel=True``) a cancelled call returns at once; Python cannot stop the
thread, so it is *abandoned*: it runs to its end, its result is discarded, its side effects
happen.  It is never silent: a WARNING names the tool and the call, and
:attr:`ThreadRunner.abandoned` counts it until it finishes.  In a **process** (``isolate=
"process"``) the function is pickled to a fresh interpreter, and a cancelled call kills that
process (SIGKILL) before it returns: nothing of the call survives.
"""

from __future__ import annotations

import contextvars
import logging
import os
import pickle
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

import trio

from ..exception import ToolWorkerError

__all__ = ["CURRENT_CALL_ID", "ThreadCall", "ThreadRunner", "check_picklable", "run_in_process"]

logger = logging.getLogger("trioagent.tool")

T = TypeVar("T")

#: The id of the tool call being run (set by the toolkit), for the logs of abandoned threads.
CURRENT_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "trioagent_tool_call_id", default=None
)


class ThreadCall:
    """One call's worker thread (one at a time: a generator's steps share it)."""

    __slots__ = ("abandoned", "counted", "done", "started")

    def __init__(self) -> None:
        self.started = False
        self.done = False
        #: the call gave up on its thread (a cancellation)
        self.abandoned = False
        #: the abandoned thread was running its function, so it is counted until it ends
        self.counted = False


class ThreadRunner:
    """Runs one tool's sync work in worker threads and counts the abandoned ones."""

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name
        self._lock = threading.Lock()
        self._abandoned = 0

    @property
    def abandoned(self) -> int:
        """Threads of cancelled calls still running (each drops to zero when it ends)."""
        return self._abandoned

    async def run(self, fn: Callable[[], T], call: ThreadCall | None = None) -> T | None:
        """``fn()`` in a worker thread; on cancellation the thread is abandoned (logged and
        counted until it ends) and ``trio.Cancelled`` propagates at once.  A thread that
        starts after its call gave up does not run ``fn`` at all."""
        call = call if call is not None else ThreadCall()
        call.started = call.done = False
        call_id = CURRENT_CALL_ID.get()

        def in_thread() -> T | None:
            with self._lock:
                if call.abandoned:
                    return None
                call.started = True
            try:
                return fn()
            finally:
                with self._lock:
                    call.done = True
                    if call.counted:
                        self._abandoned -= 1
                        logger.warning(
                            "the abandoned worker thread of tool %r (call %s) has finished; "
                            "its result was discarded (%d still running)",
                            self.tool_name,
                            call_id,
                            self._abandoned,
                        )

        try:
            return await trio.to_thread.run_sync(in_thread, abandon_on_cancel=True)
        except trio.Cancelled:
            with self._lock:
                call.abandoned = True
                if call.started and not call.done and not call.counted:
                    call.counted = True
                    self._abandoned += 1
                    logger.warning(
                        "tool %r (call %s) was cancelled while its sync function runs in a "
                        "worker thread: the thread is abandoned -- it runs to its end, its "
                        "result is discarded and its side effects still happen (%d abandoned "
                        "thread(s) running)",
                        self.tool_name,
                        call_id,
                        self._abandoned,
                    )
            raise

    def new_call(self) -> ThreadCall:
        """The bookkeeping of one call (shared by the threads that step a generator)."""
        return ThreadCall()


# The worker process: reads the pickled (function, kwargs) from stdin and writes the pickled
# (ok, value) to its original stdout; the function's own prints go to stderr.
_WORKER = """
import os, pickle, sys
out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
sys.stdout = sys.stderr
try:
    func, kwargs = pickle.load(sys.stdin.buffer)
    outcome = (True, func(**kwargs))
except BaseException as exc:
    outcome = (False, exc)
try:
    data = pickle.dumps(outcome)
except Exception as exc:
    what = "result" if outcome[0] else "exception " + repr(outcome[1])
    data = pickle.dumps((False, TypeError(f"the tool's {what} cannot be pickled: {exc}")))
out.write(data)
out.flush()
"""


def check_picklable(func: Callable[..., object], name: str) -> None:
    """Refuse a function a worker process cannot receive.

    Raises:
        TypeError: ``func`` cannot be pickled (a lambda, a closure, a bound method of an
            unpicklable object) or lives in ``__main__``: name it and say what works.
    """
    problem = ""
    if getattr(func, "__module__", None) == "__main__":
        problem = "it is defined in the script being run (__main__), which a worker cannot import"
    else:
        try:
            pickle.dumps(func)
        except Exception as exc:
            problem = str(exc)
    if problem:
        raise TypeError(
            f"{name}: isolate='process' needs a function a worker process can import "
            f"(a top-level function of an importable module, picklable): {problem}"
        )


async def _kill(process: trio.Process) -> None:
    process.kill()


async def run_in_process(func: Callable[..., T], kwargs: dict[str, object], name: str) -> T:
    """``func(**kwargs)`` in a fresh interpreter; a cancellation kills it (SIGKILL).

    Raises:
        ToolWorkerError: the arguments cannot be pickled, or the process died without an
            answer (its exit status and the tail of its stderr are in the message).
        Exception: what the function raised in the process (re-raised here).
    """
    try:
        payload = pickle.dumps((func, kwargs))
    except Exception as exc:
        raise ToolWorkerError(
            f"the arguments of tool {name!r} cannot be sent to its worker process: {exc}"
        ) from None
    path = os.pathsep.join(p for p in sys.path if p)
    env = {**os.environ, "PYTHONPATH": path}
    completed = await trio.run_process(
        [sys.executable, "-c", _WORKER],
        stdin=payload,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=env,
        deliver_cancel=_kill,
    )
    if completed.returncode != 0 or not completed.stdout:
        tail = completed.stderr.decode(errors="replace").strip()[-500:]
        raise ToolWorkerError(
            f"the worker process of tool {name!r} exited with status {completed.returncode} "
            f"without an answer{': ' + tail if tail else ''}"
        )
    ok, value = pickle.loads(completed.stdout)
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]
