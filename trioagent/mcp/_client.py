"""The MCP client: one server, its tools as :class:`~trioagent.tool.MCPTool` objects.

A **stateful** client holds one session open for as long as ``async with client:`` lasts; a
stdio server process (with every process it started: its process group) lives exactly that
long.  The session is owned by a task of the client's own nursery, so a crash of the
connection is recorded and logged instead of cancelling the code inside the ``async with``
block; while the server is down its tools stay listed, each call is an error naming the
server, and the client connects again with backoff (``reconnect_delay``).  A **stateless**
client (HTTP only) opens a fresh session for every operation and holds nothing open.

The toolkit reads the tools as last listed (:meth:`MCPClient.listed_tools`, no I/O): they are
listed when the client is entered, again by ``await client.list_tools()``, and, on a stateful
client, whenever the server says its tools changed: a ``tools`` change event on a
``subscriptions/listen`` stream (protocol 2026-07-28), or ``notifications/tools/list_changed``
(earlier versions).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Literal, TypeVar, cast

import mcp_types
import trio
from mcp import Client
from mcp.client import Transport
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.dispatcher import ProgressFnT

from .._core.concurrency import reraise_unwrapped
from .._core.json_types import JSONObject
from ..tool import (
    MAX_TOOL_NAME,
    MCPCallError,
    MCPCallResult,
    MCPTool,
    MCPToolSpec,
    ProgressCallback,
    ToolBase,
)
from ._capabilities import ElicitationCallback, MCPSampling, ServerAnswers
from ._config import HttpMCPConfig, StdioMCPConfig
from ._convert import convert_result, offered_tools, requires_task
from ._errors import MCPClientError, connection_lost, describe
from ._http import HttpTransport
from ._resources import MCPResourceReader, ResourcesAndPrompts
from ._stdio import StdioTransport
from ._tasks import call_as_task, supports_task_calls

__all__ = ["MCPClient", "MCPClientError"]

logger = logging.getLogger("trioagent.mcp")

_NAME = re.compile(r"[a-zA-Z0-9_-]+")
#: The longest server name: ``mcp__{server}__`` leaves room for 16 characters of tool name.
MAX_SERVER_NAME = MAX_TOOL_NAME - len("mcp____") - 16
#: Seconds connecting waits for the server to acknowledge the tool-change subscription.
_LISTEN_ACK_TIMEOUT = 5.0
#: The longest wait between two attempts to reconnect (the wait doubles from reconnect_delay).
_RECONNECT_MAX_DELAY = 30.0
_T = TypeVar("_T")


def _check_names(label: str, names: Sequence[str] | None) -> list[str] | None:
    if names is None:
        return None
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{label} should be a list of strings, but got {names!r}.")
    return list(names)


class MCPClient(ResourcesAndPrompts, ServerAnswers):
    """A connection to one MCP server, and its tools.

    Args:
        name: the server's name in tool names (``mcp__{name}__{tool}``); only
            ``[a-zA-Z0-9_-]``.
        config: :class:`StdioMCPConfig` or :class:`HttpMCPConfig`.
        is_stateful: hold one session open inside ``async with client:`` (stdio: always).
        enable_tools: list only these tools (by the server's names); ``None``: all.
        disable_tools: never list these.
        execution_timeout: seconds a tool call may take before it is cancelled.
        stream_progress: pass the server's progress notifications on as progress chunks
            (``CustomEvent("mcp_progress")`` in a reply).
        connect_timeout: seconds for connecting and the first listing (and each reconnection).
        reconnect_delay: a stateful client whose session ends on its own (the server died,
            the connection broke) connects again after this many seconds, the wait doubling
            after each failed attempt up to 30 s; ``None``: it stays down.
        sampling: answers the server's sampling requests (declares ``sampling``).
        elicitation: answers the server's questions (declares ``elicitation``).
        roots: the directories the server may work in (declares ``roots``); ``"agent"``: the
            working directories of the agent whose toolkit holds the client.
        log_level: the lowest server log level asked for on a 2026-07-28 connection (earlier
            protocols send what the server decides); server log messages go to the
            ``trioagent.mcp`` logger either way.
        resource_tool: offer the model the tool ``mcp__{name}__read_resource``
            (:class:`MCPResourceReader`) when the server has resources, so that it can read
            what tool results link to.

    Raises:
        ValueError: a bad name, a stateless stdio client, overlapping or malformed filters,
            a non-positive timeout.
    """

    def __init__(
        self,
        name: str,
        config: StdioMCPConfig | HttpMCPConfig,
        *,
        is_stateful: bool = True,
        enable_tools: Sequence[str] | None = None,
        disable_tools: Sequence[str] | None = None,
        execution_timeout: float | None = None,
        stream_progress: bool = False,
        connect_timeout: float | None = 30.0,
        reconnect_delay: float | None = 0.5,
        sampling: MCPSampling | None = None,
        elicitation: ElicitationCallback | None = None,
        roots: Sequence[str | os.PathLike[str]] | Literal["agent"] | None = None,
        log_level: mcp_types.LoggingLevel | None = "info",
        resource_tool: bool = True,
    ) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(
                f"MCPClient name {name!r} contains characters that model providers reject in "
                "tool names (only [a-zA-Z0-9_-] are allowed)."
            )
        if len(name) > MAX_SERVER_NAME:
            raise ValueError(
                f"MCPClient name {name!r} is longer than {MAX_SERVER_NAME} characters: tool "
                "names built from it would pass the 64 characters model providers allow."
            )
        if not isinstance(config, StdioMCPConfig | HttpMCPConfig):
            raise TypeError(
                f"expected StdioMCPConfig or HttpMCPConfig, got {type(config).__name__}"
            )
        if isinstance(config, StdioMCPConfig) and not is_stateful:
            raise ValueError("A stdio MCP client must be stateful (is_stateful=True).")
        enabled = _check_names("enable_tools", enable_tools)
        disabled = _check_names("disable_tools", disable_tools)
        overlap = set(enabled or ()) & set(disabled or ())
        if overlap:
            raise ValueError(
                f"enable_tools and disable_tools must not overlap, but both name {sorted(overlap)}."
            )
        for label, value in (
            ("execution_timeout", execution_timeout),
            ("connect_timeout", connect_timeout),
            ("reconnect_delay", reconnect_delay),
        ):
            if value is not None and not value > 0:
                raise ValueError(f"{label} must be a positive number of seconds or None")
        self._name = name
        self.config = config
        self._is_stateful = is_stateful
        self.enable_tools = enabled
        self.disable_tools = disabled
        self.execution_timeout = execution_timeout
        self.stream_progress = stream_progress
        self.connect_timeout = connect_timeout
        self.reconnect_delay = reconnect_delay
        self.sampling = sampling
        self.elicitation = elicitation
        if isinstance(roots, str) and roots != "agent":
            raise ValueError(f'roots must be a list of directories or "agent", not {roots!r}')
        self.roots = roots if roots is None or roots == "agent" else list(roots)
        self.log_level = log_level
        self.resource_tool = resource_tool
        self._entered = False
        #: Between a successful ``__aenter__`` and ``__aexit__``.
        self._open = False
        self._session: Client | None = None
        self._nursery_manager: contextlib.AbstractAsyncContextManager[trio.Nursery] | None = None
        self._closing = trio.Event()
        #: Set when the current session is to end (the server died, or the client is left).
        self._ended = trio.Event()
        self._reconnecting = trio.CancelScope()
        self._retry_note: str | None = None
        #: Holds one item while a refresh of the listed tools is due (changes coalesce).
        self._changes_in, self._changes_out = trio.open_memory_channel[None](1)
        self._tools: list[MCPTool] | None = None
        self._listing_error: str | None = None
        #: Why the server is down (``None`` while a session is up).
        self._lost: str | None = None
        self._has_resources = False
        #: The tools the server runs only as tasks (called the task-augmented way).
        self._task_tools: set[str] = set()
        self._reader: MCPResourceReader | None = None

    def __repr__(self) -> str:
        return (
            f"MCPClient(name={self._name!r}, config={self.config!r}, "
            f"is_stateful={self._is_stateful!r})"
        )

    # -- the MCPToolSource / MCPConnection protocols ---------------------------------------------

    @property
    def name(self) -> str:
        """The server's name."""
        return self._name

    @property
    def is_stateful(self) -> bool:
        """Whether one session is held open inside ``async with client:``."""
        return self._is_stateful

    @property
    def is_connected(self) -> bool:
        """A stateful client: inside ``async with`` with a live session; stateless: ``True``."""
        if not self._is_stateful:
            return True
        return self._session is not None and self._lost is None

    def listed_tools(self) -> list[ToolBase]:
        """The tools as last listed, filters applied (no I/O).  While the server is down they
        stay listed: a call then gets an error result saying so.

        Raises:
            MCPClientError: a stateful client outside ``async with``, or the tools were never
                listed successfully.
        """
        if self._is_stateful and not self._open:
            raise MCPClientError(f"MCP server {self._name!r} is not connected")
        if self._tools is None:
            reason = self._listing_error or "enter `async with client:` or await list_tools()"
            raise MCPClientError(
                f"the tools of MCP server {self._name!r} are not listed ({reason})"
            )
        reader = [self._reader] if self._reader is not None else []
        return [*self._tools, *reader]

    async def call_tool(
        self, tool: str, arguments: JSONObject, on_progress: ProgressCallback | None = None
    ) -> MCPCallResult:
        """Call ``tool`` (the server's name for it) and convert the result.

        Cancelling the caller cancels the request (the server receives
        ``notifications/cancelled``); the session stays usable.

        Raises:
            MCPCallError: a protocol error, or the server could not be reached.
        """
        progress = cast(ProgressFnT | None, on_progress)

        async def call(session: Client) -> mcp_types.CallToolResult:
            if tool in self._task_tools:
                return await call_as_task(session.session, tool, arguments, progress)
            return await session.call_tool(tool, arguments, progress_callback=progress)

        try:
            result = await self._with_session(call)
        except MCPClientError as exc:
            raise MCPCallError(str(exc)) from None
        except Exception as exc:
            raise MCPCallError(describe(exc)) from None
        return convert_result(result, read_tool=self._reader_name)

    # -- listing -------------------------------------------------------------------------------

    async def list_tools(self) -> list[MCPTool]:
        """List the tools from the server now (filters applied) and remember them.

        Raises:
            MCPClientError: not connected, or the server failed to answer.
        """
        try:
            tools = await self._with_session(self._fetch)
        except MCPClientError:
            raise
        except Exception as exc:
            self._listing_error = describe(exc)
            raise MCPClientError(
                f"listing the tools of MCP server {self._name!r} failed: {self._listing_error}"
            ) from None
        return tools

    async def _fetch(self, session: Client) -> list[MCPTool]:
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            page = await session.list_tools(cursor=cursor, cache_mode="refresh")
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        capabilities = session.server_capabilities
        self._has_resources = capabilities is not None and capabilities.resources is not None
        if self._reader_name is not None and self._reader is None:
            self._reader = MCPResourceReader(self._name, self.read_resource)
        reserved = [self._reader_name] if self._reader_name else []
        wanted = [tool for tool in listed if self._wanted(tool.name)]
        task_calls = supports_task_calls(session.session)
        self._task_tools = {t.name for t in wanted if task_calls and requires_task(t)}
        wrapped = [
            self._wrap(name, spec)
            for name, spec in offered_tools(
                self._name, wanted, reserved=reserved, task_calls=task_calls
            )
        ]
        self._tools = [tool for tool in wrapped if tool is not None]
        self._listing_error = None
        return list(self._tools)

    def _wanted(self, tool: str) -> bool:
        if self.enable_tools is not None and tool not in self.enable_tools:
            return False
        return self.disable_tools is None or tool not in self.disable_tools

    def _wrap(self, name: str, spec: MCPToolSpec) -> MCPTool | None:
        wrapped = MCPTool(
            self,
            spec,
            execution_timeout=self.execution_timeout,
            stream_progress=self.stream_progress,
            name=name,
        )
        try:
            wrapped.validate_schema()
        except ValueError as exc:
            logger.warning("Skipping tool %r of MCP server %r: %s", spec.name, self._name, exc)
            return None
        return wrapped

    # -- sessions ------------------------------------------------------------------------------

    def _new_session(self, on_end: Callable[[str], None]) -> Client:
        """A session over a new connection; ``on_end(reason)`` hears of a stdio server's end."""
        config = self.config
        if isinstance(config, StdioMCPConfig) and sys.platform != "win32":
            return Client(
                StdioTransport(config, on_end),
                message_handler=self._on_message,
                **self._session_callbacks(),
            )
        if isinstance(config, StdioMCPConfig):  # pragma: no cover - no process groups there
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=config.env,
                cwd=config.cwd,
                encoding_error_handler=config.encoding_error_handler,
            )
            return Client(
                stdio_client(params, errlog=config.errlog),
                message_handler=self._on_message,
                **self._session_callbacks(),
            )
        if config.uses_sse:
            transport: object = sse_client(
                config.url,
                headers=config.headers,
                timeout=_or_inf(config.timeout),
                # The event stream of an idle session may be silent for long: its liveness
                # shows on use (a call's execution_timeout), not as a read timeout.
                sse_read_timeout=math.inf,
            )
        else:
            transport = HttpTransport(config)
        return Client(
            cast(Transport, transport),
            message_handler=self._on_message,
            **self._session_callbacks(),
        )

    # -- tool changes --------------------------------------------------------------------------

    async def _on_message(self, message: object) -> None:
        """The session's handler of server notifications: ``notifications/tools/list_changed``
        (how protocols before 2026-07-28 announce a change) asks for a refresh."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._tools_changed()
        await trio.lowlevel.checkpoint()

    def _tools_changed(self) -> None:
        # A refresh already due lists the tools as they are by then.
        with contextlib.suppress(trio.WouldBlock):
            self._changes_in.send_nowait(None)

    async def _refresh_on_change(self) -> None:
        """List the tools again after each change the server announced; a failure is logged
        and the tools listed before are kept."""
        async for _ in self._changes_out:
            try:
                await self.list_tools()
            except MCPClientError as exc:
                logger.warning("Refreshing the tools of MCP server %r failed: %s", self._name, exc)

    async def _listen_for_changes(
        self, session: Client, *, task_status: trio.TaskStatus[None]
    ) -> None:
        """Follow the server's ``tools`` change events (protocol 2026-07-28); with an earlier
        protocol the notifications reach :meth:`_on_message` instead.  Started once the
        server acknowledged the subscription (events are not replayed: one published before
        would be lost), or once it is clear there is none."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                with trio.move_on_after(_LISTEN_ACK_TIMEOUT) as waiting:
                    subscription = await stack.enter_async_context(
                        session.listen(tools_list_changed=True)
                    )
                if waiting.cancelled_caught:
                    logger.info(
                        "Not following tool changes of MCP server %r: no acknowledgment",
                        self._name,
                    )
                    task_status.started()
                    return
                task_status.started()
                async for _ in subscription:
                    self._tools_changed()
        except ListenNotSupportedError:
            task_status.started()
        except Exception as exc:
            logger.info(
                "Not following tool changes of MCP server %r: %s", self._name, describe(exc)
            )
            task_status.started()

    async def _with_session(self, operation: Callable[[Client], Awaitable[_T]]) -> _T:
        """Run ``operation`` on the open session (stateful) or a fresh one (stateless).

        Raises:
            MCPClientError: a stateful client outside ``async with``, or the server is down
                (also when the connection is lost during ``operation``).
        """
        if not self._is_stateful:
            try:
                async with self._new_session(lambda reason: None) as fresh:
                    return await operation(fresh)
            except BaseExceptionGroup as group:
                reraise_unwrapped(group)  # the SDK's task groups: the one error, or Cancelled
        session = self._session
        if session is None or self._lost is not None:
            if not self._open:
                raise MCPClientError(f"MCP server {self._name!r} is not connected")
            raise MCPClientError(self._down_message())
        try:
            return await operation(session)
        except Exception as exc:
            if not connection_lost(exc):
                raise
            if session is self._session:
                self._end_session(self._ended, describe(exc))
            raise MCPClientError(self._down_message()) from None

    def _end_session(self, ended: trio.Event, reason: str) -> None:
        """The session that ``ended`` belongs to is over, for ``reason``: end it (its task
        then reconnects)."""
        if not ended.is_set():
            self._lost = self._lost or reason
            ended.set()

    def _down_message(self) -> str:
        text = f"MCP server {self._name!r} is down ({self._lost or 'its session ended'})"
        if self.reconnect_delay is None or self._closing.is_set():
            return f"{text}; not reconnecting"
        if self._retry_note is not None:
            return f"{text}; reconnecting ({self._retry_note})"
        return f"{text}; reconnecting"

    # -- lifetime ------------------------------------------------------------------------------

    async def __aenter__(self) -> MCPClient:
        """Connect (stateful) and list the tools.

        A stateless client that cannot list its tools is logged and entered anyway (its tools
        are skipped until a later :meth:`list_tools` succeeds).

        Raises:
            RuntimeError: the client was entered before.
            MCPClientError: a stateful client could not connect or list its tools in time.
        """
        if self._entered:
            raise RuntimeError(f"MCPClient {self._name!r} can be entered only once")
        self._entered = True
        if not self._is_stateful:
            with trio.move_on_after(_or_inf(self.connect_timeout)) as scope:
                try:
                    await self.list_tools()
                except MCPClientError as exc:
                    logger.warning("%s", exc)
            if scope.cancelled_caught:
                self._listing_error = "timed out"
                logger.warning("Listing the tools of MCP server %r timed out", self._name)
            return self
        nursery_manager = trio.open_nursery()
        nursery = await nursery_manager.__aenter__()
        finished = trio.Event()
        try:
            with trio.fail_after(_or_inf(self.connect_timeout)):
                await nursery.start(self._hold_session, finished)
        except BaseException as exc:
            # The session task ended before it started: the nursery has no child left.
            self._closing.set()
            await nursery_manager.__aexit__(None, None, None)
            if isinstance(exc, Exception):
                raise MCPClientError(
                    f"connecting to MCP server {self._name!r} failed: {describe(exc)}"
                ) from None
            raise
        self._nursery_manager = nursery_manager
        self._open = True
        nursery.start_soon(self._keep_connected, nursery, finished)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Close the session; a stdio server process is terminated (its whole group)."""
        manager = self._nursery_manager
        if manager is None:
            return None
        self._open = False
        self._closing.set()
        self._ended.set()
        self._reconnecting.cancel()
        try:
            return await manager.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)  # an outer cancellation leaves as one Cancelled
        finally:
            self._nursery_manager = None

    async def _hold_session(
        self, finished: trio.Event, *, task_status: trio.TaskStatus[None]
    ) -> None:
        """Hold one session until it ends: the client is left, or the server died or the
        connection broke (recorded, not raised, once started).  ``finished`` is set then."""
        ended = self._ended = trio.Event()
        started = False
        try:
            async with self._new_session(functools.partial(self._end_session, ended)) as session:
                await self._fetch(session)
                async with trio.open_nursery() as followers:
                    await followers.start(self._listen_for_changes, session)
                    followers.start_soon(self._refresh_on_change)
                    self._session, self._lost, self._retry_note = session, None, None
                    started = True
                    task_status.started()
                    await ended.wait()
                    followers.cancel_scope.cancel()
        except Exception as exc:
            if not started:
                raise
            self._lost = self._lost or describe(exc)
        finally:
            self._session = None
            finished.set()

    async def _keep_connected(self, nursery: trio.Nursery, finished: trio.Event) -> None:
        """Each time the session ends on its own, say so and connect again: first after
        ``reconnect_delay``, the wait doubling after each failure, until the client is left."""
        with self._reconnecting:
            while True:
                await finished.wait()
                if self._closing.is_set():
                    return
                logger.warning("%s", self._down_message())
                if self.reconnect_delay is None:
                    return
                delay, failures = self.reconnect_delay, 0
                while True:
                    await trio.sleep(delay)
                    finished = trio.Event()
                    try:
                        with trio.fail_after(_or_inf(self.connect_timeout)):
                            await nursery.start(self._hold_session, finished)
                    except Exception as exc:
                        failures += 1
                        self._retry_note = f"failed {failures} time(s) so far: {describe(exc)}"
                        logger.info(
                            "Reconnecting to MCP server %r %s", self._name, self._retry_note
                        )
                        delay = min(delay * 2, _RECONNECT_MAX_DELAY)
                        continue
                    logger.warning("Reconnected to MCP server %r; its tools are back", self._name)
                    break


def _or_inf(timeout: float | None) -> float:
    return math.inf if timeout is None else timeout
