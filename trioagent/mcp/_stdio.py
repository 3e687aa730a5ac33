"""The stdio transport: an MCP server as a subprocess in a process group of its own, which
ends whole when the transport closes, whatever the server does.

The SDK's own stdio transport signals the server's group only when the server outlives its
closed stdin; a server that exits at once leaves the processes it started running.  This one
closes stdin, gives the server a grace period to exit, then sends ``SIGTERM`` to every process
left in the group, and ``SIGKILL`` after a second grace period.  It also tells its owner when
the server's output ends (the process died or closed it), so a dead server is noticed before
the next call, with its exit code.

POSIX only (process groups); on Windows the client uses the SDK's transport.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable

import anyio
import mcp_types
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from .._core.concurrency import reraise_unwrapped
from ._config import StdioMCPConfig

__all__ = ["StdioTransport"]

#: Seconds the server has to exit by itself once its stdin is closed.
STDIN_GRACE = 2.0
#: Seconds the processes of the group have between ``SIGTERM`` and ``SIGKILL``.
TERM_GRACE = 2.0
#: Seconds to see the server's process reaped after ``SIGKILL``.
_KILL_REAP = 2.0
#: Seconds to learn the exit code once the server's output ended.
_EXIT_CODE_WAIT = 0.5
#: The bound of the whole shutdown (it runs shielded from cancellation).
_SHUTDOWN_BOUND = STDIN_GRACE + TERM_GRACE + _KILL_REAP + 1.0
_POLL = 0.02

Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


class StdioTransport:
    """Run ``config``'s server and exchange newline-delimited JSON-RPC with it.

    Args:
        config: the server's command line, environment and stderr.
        on_end: called once with a reason when the server's output ends before the transport
            is closed (the server exited, or closed its stdout).
    """

    def __init__(self, config: StdioMCPConfig, on_end: Callable[[str], None]) -> None:
        self._config = config
        self._on_end = on_end
        self._closing = False
        self._process: trio.Process | None = None
        self._nursery_manager: contextlib.AbstractAsyncContextManager[trio.Nursery] | None = None
        self._nursery: trio.Nursery | None = None
        self._output_ended = trio.Event()
        self._reported = trio.Event()

    async def __aenter__(self) -> Streams:
        config = self._config
        process = await trio.lowlevel.open_process(
            [config.command, *config.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=config.errlog,
            env=get_default_environment() | (config.env or {}),
            cwd=config.cwd,
            start_new_session=True,  # its own process group, ended whole on close
        )
        self._process = process
        # No checkpoint from here to the started tasks: the process is always owned.
        to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
        self._streams: Streams = (from_server, to_server)
        manager = trio.open_nursery()
        nursery = await manager.__aenter__()
        self._nursery_manager, self._nursery = manager, nursery
        nursery.start_soon(self._read, process, to_session)
        nursery.start_soon(self._write, process, from_session)
        nursery.start_soon(self._watch, process)
        return self._streams

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the pipes and end the server's whole process group."""
        self._closing = True
        process, manager, nursery = self._process, self._nursery_manager, self._nursery
        assert process is not None
        assert manager is not None
        assert nursery is not None
        with trio.CancelScope(shield=True) as scope:
            # Shielded: a cancelled owner must still end the server's processes.  Every wait
            # inside is bounded; this deadline bounds them all.
            scope.deadline = trio.current_time() + _SHUTDOWN_BOUND
            for stream in self._streams:
                await stream.aclose()
            await _close_quietly(process.stdin)
            await end_process_group(process)
            await _close_quietly(process.stdout)
        nursery.cancel_scope.cancel()
        try:
            await manager.__aexit__(None, None, None)
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)

    async def _read(
        self, process: trio.Process, to_session: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        """Pass the server's lines on to the session; at the end of its output, report why
        before the session sees the end (a call it fails then can say why)."""
        assert process.stdout is not None
        decoder = codecs.getincrementaldecoder("utf-8")(self._config.encoding_error_handler)
        buffer = ""
        reason = "the server closed its output"
        async with to_session:
            while True:
                try:
                    data = await process.stdout.receive_some()
                    text = decoder.decode(data, final=not data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data, text = b"", ""
                except UnicodeDecodeError as exc:
                    reason = f"the server wrote undecodable output ({exc.reason})"
                    break
                lines = (buffer + text).split("\n")
                buffer = lines.pop()
                for line in lines:
                    if line.strip():
                        try:
                            await to_session.send(_parse(line))
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return  # the session is closing
                if not data:
                    break
            self._output_ended.set()
            if not self._closing:
                with trio.move_on_after(_EXIT_CODE_WAIT):
                    await self._reported.wait()  # the exit code, if the server exited
                self._report(reason)

    async def _watch(self, process: trio.Process) -> None:
        """Report the server's exit; a process it started that still holds the output pipe
        must not hide it."""
        code = await process.wait()
        if self._closing:
            return
        with trio.move_on_after(_EXIT_CODE_WAIT):
            await self._output_ended.wait()  # the server's last lines first
        self._report(_exit_reason(code))
        await _close_quietly(process.stdout)

    def _report(self, reason: str) -> None:
        if not self._reported.is_set() and not self._closing:
            self._reported.set()
            self._on_end(reason)

    async def _write(
        self, process: trio.Process, from_session: MemoryObjectReceiveStream[SessionMessage]
    ) -> None:
        """Send the session's messages to the server's stdin, one line each."""
        assert process.stdin is not None
        async with from_session:
            async for message in from_session:
                line = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    await process.stdin.send_all(
                        line.encode("utf-8", self._config.encoding_error_handler)
                    )
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return  # the server is gone: its output's end says so


def _exit_reason(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"the server process was killed by signal {signal.Signals(-code).name}"
    return f"the server process exited with code {code}"


def _parse(line: str) -> SessionMessage | Exception:
    """One line from the server: a message, or the parse error for the session to surface."""
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc
    return SessionMessage(message)


async def _close_quietly(stream: trio.abc.AsyncResource | None) -> None:
    if stream is not None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await stream.aclose()


async def end_process_group(process: trio.Process) -> None:
    """Let ``process`` (a group leader whose stdin is closed) exit within ``STDIN_GRACE``,
    then ``SIGTERM`` whatever is left of its group, and ``SIGKILL`` it after ``TERM_GRACE``."""
    group = process.pid
    with trio.move_on_after(STDIN_GRACE):
        await process.wait()
    for sig, grace in ((signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, _KILL_REAP)):
        if not await _group_alive(process, group):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
        with trio.move_on_after(grace):
            while True:  # polled: no event tells when the last process of a group is gone
                await trio.sleep(_POLL)
                if not await _group_alive(process, group):
                    break


async def _group_alive(process: trio.Process, group: int) -> bool:
    """Whether a process of ``group`` still runs (zombies, which an init that does not reap
    may leave around, do not count)."""
    process.poll()  # reap the leader once it has exited
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return await trio.to_thread.run_sync(_live_member, group)


def _live_member(group: int) -> bool:
    """Whether ``/proc`` shows a member of ``group`` that is not a zombie (``True`` when there
    is no ``/proc`` to read)."""
    try:
        entries = os.scandir("/proc")
    except OSError:
        return True
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(os.path.join(entry.path, "stat"), encoding="ascii") as f:
                    stat = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) > 2 and int(fields[2]) == group and fields[0] not in ("Z", "X"):
                return True
    return False
