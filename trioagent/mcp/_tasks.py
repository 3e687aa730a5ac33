"""Task-augmented tool calls (protocol 2025-11-25), for tools a server runs only as tasks.

A tool listed with ``execution.taskSupport: "required"`` must be called with a ``task`` in
the request: the server answers at once with a *task* (``CreateTaskResult``), runs it in the
background, and hands the tool's result out on ``tasks/result``, which waits until the task
ends.  Meanwhile ``tasks/get`` reports the task's status; its status messages become progress
updates.  Cancelling the call sends ``tasks/cancel`` (bounded, shielded) before the
cancellation goes on, so the server stops the task.  Requests the server makes while the task
runs (an elicitation, say) reach the client's usual answers.

The SDK's ``send_request`` validates every ``tools/call`` answer as a ``CallToolResult``, which
a ``CreateTaskResult`` is not, so these requests go through the session's dispatcher with the
session's own request stamp.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import mcp_types
import trio
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import CallOptions, ProgressFnT

from .._core.concurrency import reraise_unwrapped

__all__ = ["TASKS_PROTOCOL", "call_as_task", "supports_task_calls"]

#: The protocol version whose tasks this module speaks.
TASKS_PROTOCOL = "2025-11-25"
#: How long (ms) the server is asked to keep a task and its result.
TASK_TTL_MS = 600_000
#: Seconds ``tasks/cancel`` may take when a call is cancelled.
CANCEL_GRACE = 2.0
#: Seconds between ``tasks/get`` polls when the server suggests none.
DEFAULT_POLL = 1.0
_TERMINAL = {"completed", "failed", "cancelled"}

logger = logging.getLogger("trioagent.mcp")


def supports_task_calls(session: ClientSession) -> bool:
    """Whether the server takes task-augmented ``tools/call`` on this connection."""
    capabilities = session.server_capabilities
    tasks = capabilities.tasks if capabilities is not None else None
    requests = tasks.requests if tasks is not None else None
    tools = requests.tools if requests is not None else None
    return (
        session.protocol_version == TASKS_PROTOCOL and tools is not None and tools.call is not None
    )


async def _request(
    session: ClientSession,
    method: str,
    params: Mapping[str, Any],
    progress: ProgressFnT | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {"method": method, "params": dict(params)}
    opts: CallOptions = {}
    session._stamp(data, opts)
    if progress is not None:
        opts["on_progress"] = progress
    return await session._dispatcher.send_raw_request(method, data["params"], opts)


async def call_as_task(
    session: ClientSession, tool: str, arguments: Mapping[str, Any], progress: ProgressFnT | None
) -> mcp_types.CallToolResult:
    """Call ``tool`` as a task and wait for its result (see the module docstring).

    Raises:
        MCPError: the server refused a request.
        pydantic.ValidationError: an answer of the wrong shape.
    """
    params = {"name": tool, "arguments": dict(arguments), "task": {"ttl": TASK_TTL_MS}}
    raw = await _request(session, "tools/call", params, progress)
    task = mcp_types.CreateTaskResult.model_validate(raw, by_name=False).task
    try:
        raw = await _result(session, task, progress)
    except trio.Cancelled:
        # Bounded and shielded: the server is told to stop the task, then the cancel goes on.
        with trio.move_on_after(CANCEL_GRACE) as scope:
            scope.shield = True
            try:
                await _request(session, "tasks/cancel", {"taskId": task.task_id})
            except Exception as exc:  # the task may have ended already
                logger.debug("tasks/cancel of %s failed: %s", task.task_id, exc)
        raise
    return mcp_types.CallToolResult.model_validate(raw, by_name=False)


async def _result(
    session: ClientSession, task: mcp_types.Task, progress: ProgressFnT | None
) -> dict[str, Any]:
    """``tasks/result`` (it waits for the task's end), following the status meanwhile."""
    try:
        async with trio.open_nursery() as nursery:
            if progress is not None:
                nursery.start_soon(_follow_status, session, task, progress)
            raw = await _request(session, "tasks/result", {"taskId": task.task_id})
            nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        reraise_unwrapped(group)  # the one error, or a bare Cancelled
    return raw


async def _follow_status(
    session: ClientSession, task: mcp_types.Task, progress: ProgressFnT
) -> None:
    """Report each new status message of the task as progress until it ends."""
    step = 0
    last: str | None = None
    current = task
    while current.status not in _TERMINAL:
        if current.status_message and current.status_message != last:
            step += 1
            last = current.status_message
            await progress(step, None, last)
        interval = current.poll_interval / 1000 if current.poll_interval else DEFAULT_POLL
        await trio.sleep(interval if math.isfinite(interval) and interval > 0 else DEFAULT_POLL)
        try:
            raw = await _request(session, "tasks/get", {"taskId": current.task_id})
            current = mcp_types.GetTaskResult.model_validate(raw, by_name=False)
        except Exception as exc:  # the status is a courtesy: the result still comes
            logger.debug("tasks/get of %s failed: %s", current.task_id, exc)
            return
