"""Resuming a parked reply: user confirmations, external results and user interrupts.

A reply parks when a call asks for confirmation (``RequireUserConfirmEvent``) or is executed by
the caller (``RequireExternalExecutionEvent``); the caller resumes it with the matching result
event, or aborts it with a ``UserInterruptEvent``.
"""

from __future__ import annotations

import copy
from typing import cast

from .._core.emit import Emit
from ..event import (
    AgentEvent,
    ExternalExecutionResultEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from ..message import ToolCallBlock, ToolCallState, ToolResultBlock, ToolResultState
from ._as_tool import PARKED_KEY, AgentTool, nested_waiting
from ._protocol import AgentLike
from ._reply import ReplyTools
from ._results import ResultWriter, output_events

__all__ = ["ResumeEvent", "Resumer", "parked_summary"]

DENIED_BY_USER = (
    '<system-reminder>The execution of tool "{name}" is denied by user!</system-reminder>'
)

ResumeEvent = UserConfirmResultEvent | ExternalExecutionResultEvent | UserInterruptEvent


def parked_summary(awaiting: list[ToolCallBlock]) -> str:
    """What a parked reply waits for and how to go on: the text of the WARNING logged when a
    reply parks and of the error raised by a new message sent to a parked agent."""
    asking = [c.name for c in awaiting if c.state == ToolCallState.ASKING]
    external = [c.name for c in awaiting if c.state != ToolCallState.ASKING]
    waits = []
    if asking:
        waits.append(f"{', '.join(asking)} (asking for the user's confirmation)")
    if external:
        waits.append(f"{', '.join(external)} (executed externally, awaiting its result)")
    how = []
    if asking:
        how.append("UserConfirmResultEvent (allow or deny each call)")
    if external:
        how.append("ExternalExecutionResultEvent")
    text = (
        f"The reply is parked, waiting for {len(awaiting)} tool call(s): {'; '.join(waits)}. "
        f"Resume it with agent.reply({' or '.join(how)}), or abort it with "
        "agent.reply(UserInterruptEvent())."
    )
    if asking:
        text += (
            " A function tool asks before it runs unless it is allowed: register it with "
            "permission=PermissionDecision('allow', ...) or build the toolkit with "
            "Toolkit(default_permission=...)."
        )
    return text


class Resumer:
    """Checks resume events against the parked calls and applies them."""

    def __init__(self, agent: AgentLike) -> None:
        self._agent = agent

    async def check(self, event: ResumeEvent | None, tools: ReplyTools) -> bool:
        """Check a resume event against the parked calls; returns whether this is a resume.

        Everything is validated before anything changes, so a bad event leaves the reply
        parked.

        Raises:
            ValueError: an event while nothing is parked, no event while calls are waiting,
                ids that are not waiting, or two external results for one call.
            jsonschema.ValidationError: an external result whose metadata fails the tool's
                ``metadata_schema``.
        """
        nested = self._nested(event, tools)
        if nested is not None and event is not None:
            # An agent called as a tool is parked on it: apply() routes it there, so it is
            # checked by that agent's rules now, before anything changes here.
            target = nested[1].parked_agent(event.reply_id)
            assert target is not None
            await Resumer(cast(AgentLike, target)).check(event, ReplyTools(target.toolkit))
            return True
        awaiting = self._agent.state.get_awaiting_tool_calls(self._agent.name)
        if event is None:
            if awaiting:
                raise ValueError(
                    "A new message cannot start a reply while the previous one is parked. "
                    + parked_summary(awaiting)
                )
            return False
        if isinstance(event, UserConfirmResultEvent):
            asking = {c.id for c in awaiting if c.state == ToolCallState.ASKING}
            if not asking:
                raise ValueError(
                    "Received a UserConfirmResultEvent, but no tool call awaits confirmation."
                )
            results = event.confirm_results
            unknown = [r.tool_call.id for r in results if r.tool_call.id not in asking]
            if unknown:
                raise ValueError(f"Tool call(s) {unknown} are not awaiting confirmation.")
            return True
        if isinstance(event, ExternalExecutionResultEvent):
            submitted = {c.id: c for c in awaiting if c.state == ToolCallState.SUBMITTED}
            if not submitted:
                raise ValueError(
                    "Received an ExternalExecutionResultEvent, but no tool call awaits an "
                    "external result."
                )
            unknown = [r.id for r in event.execution_results if r.id not in submitted]
            if unknown:
                raise ValueError(f"Tool call(s) {unknown} are not awaiting an external result.")
            ids = [r.id for r in event.execution_results]
            repeated = sorted({i for i in ids if ids.count(i) > 1})
            if repeated:
                # Every call gets exactly one result.
                raise ValueError(f"Tool call(s) {repeated} have more than one result in the event.")
            for result in event.execution_results:
                tool = tools.get_tool(submitted[result.id].name)
                if tool is not None:
                    await tool.check_external_result(result)
            return True
        raise TypeError(f"unsupported resume event {type(event).__name__}")

    def _nested(
        self, event: ResumeEvent | None, tools: ReplyTools
    ) -> tuple[ToolCallBlock, AgentTool] | None:
        """The parked call whose agent (called as a tool) waits on the event's reply."""
        agent = self._agent
        if not isinstance(event, UserConfirmResultEvent | ExternalExecutionResultEvent):
            return None
        if not event.reply_id or event.reply_id == agent.state.reply_id:
            return None
        return nested_waiting(agent.state, agent.name, tools, event.reply_id)

    async def abort_nested(self, tools: ReplyTools) -> None:
        """Abort the parked replies of agents this agent called as tools (before a
        ``UserInterruptEvent`` aborts this one)."""
        agent = self._agent
        for call in agent.state.get_awaiting_tool_calls(agent.name):
            tool = tools.get_tool(call.name)
            if isinstance(tool, AgentTool):
                await tool.abort()

    async def apply(
        self,
        event: UserConfirmResultEvent | ExternalExecutionResultEvent,
        emit: Emit[AgentEvent],
        tools: ReplyTools,
    ) -> None:
        """Apply a checked resume event to the parked calls."""
        agent = self._agent
        writer = ResultWriter(agent.state, agent.name)
        nested = self._nested(event, tools)
        if nested is not None:
            call, tool = nested
            response = await tool.resume(event)
            if not response.metadata.get(PARKED_KEY):
                for item in output_events(agent.state.reply_id, call.id, response.content):
                    await emit(item)
                output = list(response.content)
                result = ToolResultBlock(
                    id=call.id, name=call.name, output=output, state=response.state
                )
                await writer.finish(call, emit, result)
            return
        last = agent.state.reply_message(agent.name)
        assert last is not None
        calls = {b.id: b for b in last.content if isinstance(b, ToolCallBlock)}
        if isinstance(event, UserConfirmResultEvent):
            answers = {r.tool_call.id: r for r in event.confirm_results}
            for call_id, call in calls.items():
                answer = answers.get(call_id)
                if answer is None:
                    continue
                if answer.confirmed:
                    call.state = ToolCallState.ALLOWED
                    call.name = answer.tool_call.name
                    call.input = answer.tool_call.input
                    for rule in answer.rules or []:
                        agent.permission_engine.add_rule(rule)
                else:
                    text = DENIED_BY_USER.format(name=call.name)
                    await writer.quick(call, emit, text, ToolResultState.DENIED)
            return
        for result in event.execution_results:
            call = calls[result.id]
            for item in output_events(agent.state.reply_id, call.id, result.output):
                await emit(item)
            await writer.finish(call, emit, copy.deepcopy(result))
