"""What a run asks the agent to do: a new user message, or the answers to a parked reply.

The server keeps the conversation, so of a ``RunAgentInput``'s ``messages`` only the last user
message is new input (a client may send the whole history, as AG-UI clients do).  A run with
``resume`` entries answers the calls a parked reply waits for, one entry per AG-UI interrupt:

* a confirmation (reason ``tool_confirmation``): ``status: "resolved"`` with payload
  ``{"approved": true}`` (or no payload) approves the call, ``{"approved": false}`` or
  ``status: "cancelled"`` denies it;
* an external execution (reason ``external_execution``): ``status: "resolved"`` with the
  result as payload (a string, or ``{"output": ..., "error": bool}``); ``"cancelled"`` records
  an interrupted result.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import RunAgentInput

from ..agent import ReplyInputs
from ..event import ConfirmResult, ExternalExecutionResultEvent, UserConfirmResultEvent
from ..exception import TrioagentError
from ..message import ToolCallBlock, ToolCallState, ToolResultBlock, ToolResultState, UserMsg

__all__ = ["InputError", "reply_inputs"]


class InputError(TrioagentError, ValueError):
    """A run the thread cannot take; ``conflict``: it does not fit the thread's state (409)."""

    def __init__(self, message: str, *, conflict: bool = False) -> None:
        super().__init__(message)
        self.conflict = conflict


def reply_inputs(
    run_input: RunAgentInput, waiting_in: list[tuple[str, ToolCallBlock]]
) -> ReplyInputs:
    """The inputs of the thread's agent (or pipeline) for ``run_input``; ``waiting_in``: the
    calls waiting for the client, each with the id of the reply it waits in.  The answers of
    one run go to one reply (a pipeline routes them by its id)."""
    waiting = [call for _, call in waiting_in]
    if run_input.resume:
        if not waiting:
            raise InputError("nothing to resume: no tool call of this thread waits", conflict=True)
        answers = {entry.interrupt_id: entry for entry in run_input.resume}
        unknown = set(answers) - {call.id for call in waiting}
        if unknown:
            raise InputError(f"resume answers unknown interrupts: {sorted(unknown)}", conflict=True)
        replies = {reply_id for reply_id, call in waiting_in if call.id in answers}
        if len(replies) > 1:
            raise InputError(
                "resume answers calls of several participants: answer one at a time",
                conflict=True,
            )
        (reply_id,) = replies
        asking = [c for c in waiting if c.state == ToolCallState.ASKING and c.id in answers]
        if asking:
            return UserConfirmResultEvent(
                reply_id=reply_id,
                confirm_results=[
                    ConfirmResult(confirmed=_approved(answers[c.id]), tool_call=c) for c in asking
                ],
            )
        return ExternalExecutionResultEvent(
            reply_id=reply_id,
            execution_results=[
                _external_result(c, answers[c.id]) for c in waiting if c.id in answers
            ],
        )
    if waiting:
        names = ", ".join(call.name for call in waiting)
        raise InputError(
            f"the thread waits for an answer about {names}: resume it first", conflict=True
        )
    for message in reversed(run_input.messages):
        if message.role == "user":
            return UserMsg("user", _text(message.content))
    raise InputError("the run has no user message and nothing to resume")


def _approved(entry: Any) -> bool:
    if entry.status != "resolved":
        return False
    payload = entry.payload
    if isinstance(payload, dict) and "approved" in payload:
        return payload["approved"] is True
    return payload is None or payload is True


def _external_result(call: ToolCallBlock, entry: Any) -> ToolResultBlock:
    if entry.status != "resolved":
        return ToolResultBlock(
            id=call.id,
            name=call.name,
            output="cancelled by the user",
            state=ToolResultState.INTERRUPTED,
        )
    payload = entry.payload
    failed = False
    if isinstance(payload, dict):
        failed = payload.get("error") is True
        payload = payload.get("output", "")
    output = payload if isinstance(payload, str) else ("" if payload is None else str(payload))
    state = ToolResultState.ERROR if failed else ToolResultState.SUCCESS
    return ToolResultBlock(id=call.id, name=call.name, output=output, state=state)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [getattr(part, "text", None) for part in content]
    text = "\n".join(p for p in parts if isinstance(p, str))
    if not text:
        raise InputError("the user message has no text")
    return text
