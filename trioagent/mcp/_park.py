"""Tool calls whose server questions park the reply (``MCPClient(elicitation="park")``).

On a protocol 2026-07-28 connection a server that needs the user's input ends the call with an
input-required result: its questions and an opaque ``requestState``; the client asks, then
sends the call again with the answers and that state.  Nothing stays open on the server in
between, so the question can wait as long as the user takes, outside any reply: the call
returns an :class:`~trioagent.tool.MCPQuestion` and the agent parks the reply on it like an
external tool's call.  The questions of one round are asked one at a time; the call is sent
again once all are answered.

Only elicitations park; a round that also asks for sampling or roots gives an error result
(such servers need the callback form).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types
from mcp import Client
from mcp.shared.dispatcher import ProgressFnT

from .._core.json_types import JSONObject
from ..message import TextBlock
from ..tool import MCPCallResult, MCPQuestion
from ._errors import call_errors

__all__ = ["parked_call", "sender"]

#: Sends the call (again): ``(answers, request_state)`` → the server's result.
Send = Callable[
    [mcp_types.InputResponses | None, str | None],
    Awaitable[mcp_types.CallToolResult | mcp_types.InputRequiredResult],
]
#: The server's final result as ours.
Convert = Callable[[mcp_types.CallToolResult], MCPCallResult]


def sender(
    with_session: Callable[[Callable[[Client], Awaitable[Any]]], Awaitable[Any]],
    tool: str,
    arguments: JSONObject,
    progress: ProgressFnT | None,
) -> Send:
    """Sends the call ``tool(arguments)`` on the client's session (``with_session``), taking
    input-required results; a failure is an ``MCPCallError``."""

    async def send(
        answers: mcp_types.InputResponses | None, state: str | None
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        async def once(session: Client) -> Any:
            return await session.session.call_tool(
                tool,
                arguments,
                progress_callback=progress,
                input_responses=answers,
                request_state=state,
                allow_input_required=True,
            )

        with call_errors():
            result: mcp_types.CallToolResult | mcp_types.InputRequiredResult
            result = await with_session(once)
        return result

    return send


async def parked_call(server: str, send: Send, convert: Convert) -> MCPCallResult:
    """Send the call; its result, or its first question to park on."""
    return _outcome(server, send, convert, await send(None, None))


def _outcome(
    server: str,
    send: Send,
    convert: Convert,
    result: mcp_types.CallToolResult | mcp_types.InputRequiredResult,
) -> MCPCallResult:
    if isinstance(result, mcp_types.CallToolResult):
        return convert(result)
    requests = dict(result.input_requests or {})
    others = sorted(k for k, r in requests.items() if not isinstance(r, mcp_types.ElicitRequest))
    if others or not requests:
        what = f"asked for {', '.join(others)}" if others else "asked for input without a question"
        return _error(
            f'The MCP server {server!r} {what}; an MCP client with elicitation="park" answers '
            "only its questions (elicitations)."
        )
    return _ask(server, send, convert, requests, result.request_state, {})


def _ask(
    server: str,
    send: Send,
    convert: Convert,
    pending: dict[str, mcp_types.InputRequest],
    state: str | None,
    answers: mcp_types.InputResponses,
) -> MCPCallResult:
    """Park on the first pending question; its answer asks the next or sends the call."""
    key, request = next(iter(pending.items()))
    assert isinstance(request, mcp_types.ElicitRequest)
    rest = {k: v for k, v in pending.items() if k != key}
    params = request.params
    question: JSONObject = {"server": server, "message": params.message}
    if isinstance(params, mcp_types.ElicitRequestURLParams):
        question["url"] = params.url
    else:
        question["requestedSchema"] = dict(params.requested_schema)

    async def answer(reply: JSONObject) -> MCPCallResult:
        action = reply["action"]
        content = reply.get("content")
        form = "url" not in question  # a URL-mode answer carries no content
        response = mcp_types.ElicitResult(
            action=action,
            content=content if action == "accept" and form else None,
        )
        answered: mcp_types.InputResponses = {**answers, key: response}
        if rest:
            return _ask(server, send, convert, rest, state, answered)
        return _outcome(server, send, convert, await send(answered, state))

    text = f"The MCP server {server!r} asks the user: {params.message}"
    return MCPCallResult(
        content=[TextBlock(text=text)], asks=MCPQuestion(question=question, answer=answer)
    )


def _error(text: str) -> MCPCallResult:
    return MCPCallResult(content=[TextBlock(text=text)], is_error=True)
