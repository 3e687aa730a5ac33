"""Tools served by an MCP server: :class:`MCPTool` and what the toolkit needs from a server.

This module knows nothing of the MCP SDK.  :mod:`trioagent.mcp` (which sits above the tool
layer) talks to servers and hands tools a :class:`MCPConnection` — "something that can call a
tool on that server" — and a :class:`MCPToolSpec` per tool, with the server's content already
converted into our blocks.  The toolkit lists a server's tools through :class:`MCPToolSource`.

What an :class:`MCPTool` does with a call:

* its name is ``mcp__{server}__{tool}`` when that is a valid tool name (``[a-zA-Z0-9_-]``, at
  most 64 characters); otherwise the tool's name is cleaned (each other character becomes
  ``x``), shortened to fit, and suffixed with ``_`` and 8 hex digits of its SHA-256: the same
  server name always maps to the same tool name, and two server names never share one (the
  server still gets the original name);
* its input schema is the server's, with ``type``, ``properties`` and ``required`` defaulted;
* a read-only hint from the server allows the call, anything else asks the user; an
  explicit destructive hint makes that a *safety* ask that allow rules cannot silence;
* the server's ``title`` heads the description;
* progress notifications become chunks with ``metadata["mcp_progress"]`` (the agent turns them
  into ``CustomEvent("mcp_progress")``) when ``stream_progress`` is on;
* an execution timeout cancels the request (the server is told) and gives an error result;
* a server question that parks the call (an :class:`MCPQuestion`, from an ``MCPClient`` with
  ``elicitation="park"``) makes a response with ``metadata[MCP_QUESTION_KEY]``: the agent parks
  the reply on the call like an external tool's, and :meth:`MCPTool.resume` continues the call
  with the user's answer (:meth:`MCPTool.answer` builds it);
* a server-side error result, a protocol error or a lost connection gives an error result the
  model can read.  Cancelling the reply cancels the request and propagates.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import logging
import math
import re
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

import attrs
import trio

from .._core.concurrency import reraise_unwrapped
from .._core.copying import deep_copy
from .._core.json_types import JSONObject, JSONValue
from ..exception import TrioagentError
from ..message import DataBlock, TextBlock, ToolResultBlock, ToolResultState
from ..permission import PermissionBehavior, PermissionContext, PermissionDecision
from ._base import ToolBase, ToolMiddlewareBase
from ._response import MCP_PROGRESS_KEY, Emit, ToolChunk, ToolResponse, error_chunk
from ._worker import CURRENT_CALL_ID

__all__ = [
    "MAX_TOOL_NAME",
    "MCP_QUESTION_KEY",
    "MCPCallError",
    "MCPCallResult",
    "MCPConnection",
    "MCPQuestion",
    "MCPTool",
    "MCPToolSource",
    "MCPToolSpec",
    "ProgressCallback",
    "mcp_tool_name",
]

logger = logging.getLogger("trioagent.tool")

#: How many progress updates wait at most for the tool's task; the oldest are dropped beyond.
PROGRESS_BUFFER = 1024

#: ``async def on_progress(progress, total, message)``, called once per progress notification.
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]

_ILLEGAL_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
#: The longest tool name model providers accept.
MAX_TOOL_NAME = 64
_HASH_DIGITS = 8


class MCPCallError(TrioagentError):
    """A call could not reach a result: a protocol error, a lost or broken connection.

    The text is what the model reads (after ``"Error occurred when calling MCP tool: "``); it
    must carry no secret.
    """


#: Marks the response of an MCP call parked on its server's question; the value is the
#: question (the ``elicitation/create`` parameters as JSON, with the server's name).
MCP_QUESTION_KEY = "trioagent.mcp_question"

#: What the user's answer to an :class:`MCPQuestion` holds (an external result's metadata).
ANSWER_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "action": {"enum": ["accept", "decline", "cancel"]},
        "content": {"anyOf": [{"type": "object"}, {"type": "null"}]},
    },
    "required": ["action"],
}


@attrs.frozen
class MCPCallResult:
    """A server's answer to one tool call, converted into our blocks; ``asks``: the call is
    not over but waits for the user's answer to the server's question."""

    content: list[TextBlock | DataBlock]
    is_error: bool = False
    asks: MCPQuestion | None = None


@attrs.frozen
class MCPQuestion:
    """A server's question that a call waits on (nothing of it is open on the server).

    ``question`` is what to show (``server``, ``message``, and ``requestedSchema`` or
    ``url``); ``answer`` continues the call with the user's answer (:data:`ANSWER_SCHEMA`).
    """

    question: JSONObject
    answer: Callable[[JSONObject], Awaitable[MCPCallResult]]


def _error(text: str) -> MCPCallResult:
    return MCPCallResult(content=[TextBlock(text=text)], is_error=True)


@attrs.frozen
class MCPToolSpec:
    """What a server says about one of its tools."""

    name: str
    description: str | None = None
    input_schema: JSONObject | None = None
    read_only: bool = False
    #: The server's ``destructiveHint``: ``None`` when it gave none.
    destructive: bool | None = None
    #: A human-readable name (``title``, or the annotations' ``title``).
    title: str | None = None
    #: ``openWorldHint``: ``None`` when the server gave none.
    open_world: bool | None = None
    #: The server's ``outputSchema`` (the SDK checks structured content against it).
    output_schema: JSONObject | None = None


@runtime_checkable
class MCPConnection(Protocol):
    """An MCP server connection that can call a tool (implemented by ``trioagent.mcp``)."""

    @property
    def name(self) -> str:
        """The server's name, as used in tool names."""
        ...

    async def call_tool(
        self, tool: str, arguments: JSONObject, on_progress: ProgressCallback | None
    ) -> MCPCallResult:
        """Call ``tool`` with ``arguments``; ``on_progress`` receives progress notifications.

        Cancelling the caller cancels the request on the server.

        Raises:
            MCPCallError: the call could not produce a result.
        """
        ...


@runtime_checkable
class MCPToolSource(Protocol):
    """A set of MCP tools the toolkit can list (``trioagent.mcp.MCPClient`` is one)."""

    @property
    def name(self) -> str:
        """The server's name."""
        ...

    @property
    def is_stateful(self) -> bool:
        """Whether the source holds a session open (and must be connected before use)."""
        ...

    @property
    def is_connected(self) -> bool:
        """Whether a stateful source is connected (always ``True`` for a stateless one)."""
        ...

    def listed_tools(self) -> list[ToolBase]:
        """The tools as last listed, filters applied.

        Raises:
            Exception: the tools are not available (not connected, the server failed); the
                toolkit logs it and skips this source.
        """
        ...


def mcp_tool_name(server: str, tool: str, *, hashed: bool = False) -> str:
    """The name the model sees for the server's tool ``tool`` (see the module docstring).

    ``hashed`` forces the suffixed form (for a name that collides with another).
    """
    prefix = f"mcp__{server}__"
    plain = prefix + tool
    if not hashed and len(plain) <= MAX_TOOL_NAME and not _ILLEGAL_NAME_CHARS.search(tool):
        return plain
    digest = hashlib.sha256(tool.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_DIGITS]
    room = MAX_TOOL_NAME - len(prefix) - 1 - _HASH_DIGITS
    return f"{prefix}{_ILLEGAL_NAME_CHARS.sub('x', tool)[:room]}_{digest}"


def _description(spec: MCPToolSpec) -> str:
    description = spec.description or ""
    if spec.title and spec.title not in description:
        return f"{spec.title}\n\n{description}" if description else spec.title
    return description


def _input_schema(spec: MCPToolSpec) -> JSONObject:
    schema: JSONObject = deep_copy(spec.input_schema) if spec.input_schema else {}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    return schema


class MCPTool(ToolBase):
    """A tool that an MCP server executes.

    Args:
        connection: the server connection that runs the calls.
        spec: the tool as the server listed it.
        execution_timeout: seconds a call may take; then the request is cancelled and the
            result is an error.  ``None``: no limit.
        stream_progress: emit the server's progress notifications as progress chunks.
        middlewares: this tool's middlewares.
        name: the name the model sees; default :func:`mcp_tool_name`.

    Raises:
        ValueError: a non-positive timeout.
    """

    is_mcp = True
    is_state_injected = False  # an MCP server never receives the agent state
    is_concurrency_safe = False
    is_external_tool = False

    def __init__(
        self,
        connection: MCPConnection,
        spec: MCPToolSpec,
        *,
        execution_timeout: float | None = None,
        stream_progress: bool = False,
        middlewares: list[ToolMiddlewareBase] | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(middlewares)
        if execution_timeout is not None and not execution_timeout > 0:
            raise ValueError("execution_timeout must be a positive number of seconds or None")
        self.connection = connection
        self.spec = spec
        self.mcp_name = connection.name
        self.name = name if name is not None else mcp_tool_name(connection.name, spec.name)
        self.description = _description(spec)
        self.input_schema = _input_schema(spec)
        self.is_read_only = spec.read_only
        self.execution_timeout = execution_timeout
        self.stream_progress = stream_progress
        #: The calls parked on their server's question, by call id.
        self._parked: dict[str, MCPQuestion] = {}

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r})"

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        """Allow a tool the server marks read-only; ask for every other (a safety ask for one
        the server marks destructive)."""
        if self.is_read_only:
            return PermissionDecision(
                behavior=PermissionBehavior.ALLOW,
                message="This is a read-only MCP tool. Allowing execution.",
            )
        if self.spec.destructive:
            return PermissionDecision(
                behavior=PermissionBehavior.ASK,
                message="The MCP server marks this tool destructive: confirm each call.",
                bypass_immune=True,
            )
        return PermissionDecision(
            behavior=PermissionBehavior.ASK,
            message="MCP tools must be explicitly allowed by the user.",
        )

    async def call(self, emit: Emit, /, **kwargs: JSONValue) -> ToolChunk:
        """Run the call on the server; progress goes to ``emit``, the result is returned."""

        async def send() -> MCPCallResult:
            if self.stream_progress:
                return await self._call_with_progress(dict(kwargs), emit)
            return await self.connection.call_tool(self.spec.name, dict(kwargs), None)

        return self._park(CURRENT_CALL_ID.get(), await self._timed(send))

    async def _timed(self, send: Callable[[], Awaitable[MCPCallResult]]) -> MCPCallResult:
        """``send``'s result; a protocol error or the timeout as an error result."""
        timeout = math.inf if self.execution_timeout is None else self.execution_timeout
        with trio.move_on_after(timeout) as scope:
            try:
                return await send()
            except MCPCallError as exc:
                return _error(f"Error occurred when calling MCP tool: {exc}")
        assert scope.cancelled_caught
        return _error(
            f"Error occurred when calling MCP tool: the call to {self.spec.name!r} timed "
            f"out after {self.execution_timeout:g} s and was cancelled."
        )

    def _park(self, call_id: str | None, result: MCPCallResult) -> ToolChunk:
        """The result as a chunk; one that asks a question keeps it under ``call_id`` and
        carries it in ``metadata[MCP_QUESTION_KEY]``."""
        state = ToolResultState.ERROR if result.is_error else ToolResultState.RUNNING
        chunk = ToolChunk(content=list(result.content), state=state)
        if result.asks is not None:
            if call_id is None:
                return error_chunk(
                    "Error occurred when calling MCP tool: the server asked a question "
                    "outside a tool call of an agent, where it cannot be parked."
                )
            self._parked[call_id] = result.asks
            chunk.metadata[MCP_QUESTION_KEY] = deep_copy(result.asks.question)
        return chunk

    # -- a call parked on its server's question ----------------------------------------------

    def question(self, call_id: str) -> JSONObject | None:
        """The question the call ``call_id`` waits on (``None``: it waits on none)."""
        asks = self._parked.get(call_id)
        return None if asks is None else deep_copy(asks.question)

    @staticmethod
    def answer(
        tool_call_id: str,
        name: str,
        action: str,
        content: JSONObject | None = None,
    ) -> ToolResultBlock:
        """The result to resume a reply parked on an MCP server's question with
        (``ExternalExecutionResultEvent``): ``action`` is ``"accept"`` (with the form's
        ``content``), ``"decline"`` or ``"cancel"``."""
        metadata: JSONObject = {"action": action, "content": content}
        return ToolResultBlock(
            id=tool_call_id,
            name=name,
            output=f"The user answered the MCP server's question: {action}.",
            state=ToolResultState.SUCCESS,
            metadata=metadata,
        )

    async def check_external_result(self, result: ToolResultBlock) -> None:
        """Accept only an answer (:meth:`answer`) to a call parked on its server's question.

        Raises:
            ValueError: the call waits on no question.
            jsonschema.ValidationError: the answer is malformed.
        """
        if result.id not in self._parked:
            raise ValueError(
                f"Tool call {result.id!r} of MCP tool {self.name!r} waits on no question of "
                "its server."
            )
        import jsonschema  # imported on first use, not with trioagent

        jsonschema.validate(result.metadata, ANSWER_SCHEMA)

    async def resume(self, call_id: str, answer: ToolResultBlock) -> ToolResponse:
        """Continue the call ``call_id`` with the user's answer (checked by
        :meth:`check_external_result`): its response, marked again if the server asks
        another question."""
        asks = self._parked.pop(call_id)
        reply = dict(answer.metadata)
        chunk = self._park(call_id, await self._timed(lambda: asks.answer(reply)))
        state = ToolResultState.SUCCESS if chunk.state == ToolResultState.RUNNING else chunk.state
        return ToolResponse(
            id=call_id, content=list(chunk.content), state=state, metadata=dict(chunk.metadata)
        )

    def forget(self, call_id: str) -> None:
        """Drop the question of a parked call that was aborted."""
        self._parked.pop(call_id, None)

    async def _call_with_progress(self, arguments: JSONObject, emit: Emit) -> MCPCallResult:
        """Call in a child task; forward its progress to ``emit`` from this task.

        Progress arrives in the connection's receiving task, which must never wait for the
        consumer: it lands in a bounded buffer (the oldest dropped when full) that this task
        drains.
        """
        pending: collections.deque[ToolChunk] = collections.deque(maxlen=PROGRESS_BUFFER)
        wake = trio.Event()
        outcome: list[MCPCallResult | MCPCallError] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if outcome:
                return  # the call is over; late progress means nothing now
            value: JSONObject = {"progress": progress, "total": total, "message": message}
            pending.append(ToolChunk(content=[], is_last=False, metadata={MCP_PROGRESS_KEY: value}))
            wake.set()

        async def invoke() -> None:
            try:
                outcome.append(
                    await self.connection.call_tool(self.spec.name, arguments, on_progress)
                )
            except MCPCallError as exc:
                outcome.append(exc)
            finally:
                wake.set()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(invoke)
                while True:
                    await wake.wait()
                    wake = trio.Event()
                    while pending:
                        await emit(pending.popleft())
                    if outcome:
                        break
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)  # a bare Cancelled (or error), as if no task were spawned
        # An exception other than MCPCallError left the nursery above (as a group) instead.
        final = outcome[0]
        if isinstance(final, MCPCallError):
            raise final
        return final


#: Why each source was last skipped: the WARNING is logged when the reason changes, not on
#: every lookup (the toolkit lists tools before each model call).
_skipped: weakref.WeakKeyDictionary[MCPToolSource, str] = weakref.WeakKeyDictionary()


def list_source_tools(sources: Sequence[MCPToolSource], group: str) -> list[ToolBase]:
    """The tools of ``sources`` in order; a source that cannot list them is logged (once per
    reason) and skipped."""
    tools: list[ToolBase] = []
    for source in sources:
        try:
            tools.extend(source.listed_tools())
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            level = logging.DEBUG if _skipped.get(source) == reason else logging.WARNING
            with contextlib.suppress(TypeError):  # a source that cannot be weakly referenced
                _skipped[source] = reason
            logger.log(
                level,
                "Skipping MCP server %r in tool group %r: its tools are unavailable (%s)",
                source.name,
                group,
                reason,
            )
        else:
            with contextlib.suppress(TypeError):
                _skipped.pop(source, None)
    return tools


def check_sources_connected(sources: Sequence[MCPToolSource]) -> None:
    """Raise for a stateful source that is not connected (one that is down but still lists
    its tools, reconnecting, passes).

    Raises:
        ValueError: names the source.
    """
    for source in sources:
        if not isinstance(source, MCPToolSource):
            raise TypeError(f"expected an MCP client, got {type(source).__name__}")
        if source.is_stateful and not source.is_connected and not _lists_tools(source):
            raise ValueError(
                f"The MCP client {source.name!r} is stateful but not connected: enter "
                "`async with client:` before building the toolkit."
            )


def _lists_tools(source: MCPToolSource) -> bool:
    """Whether ``source`` lists tools (a client whose server is down, reconnecting, does)."""
    try:
        source.listed_tools()
    except Exception:
        return False
    return True
