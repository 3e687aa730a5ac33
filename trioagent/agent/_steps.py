"""What the reply loop does next: reason, act, or exit — decided from the state alone.

After every reasoning or acting step the loop asks :func:`next_step`: calls still without a
result run first; a reply waiting for the user parks; a structured reply keeps reminding the
model of its tool until the output is valid (with a few grace iterations); otherwise a final
text ends the reply, and the iteration limit forces a last, tool-free answer.
"""

from __future__ import annotations

import copy

import attrs

from .._core.ids import generate_timestamp
from ..event import AgentEvent, ExceedMaxItersEvent, ReplyEndEvent
from ..message import AssistantMsg, HintBlock, Msg, TextBlock, ToolCallBlock, ToolResultBlock
from ..types import ReplyFinishedReason, ToolChoice
from ._protocol import AgentLike
from ._reasoning import reply_usage
from ._structured import STRUCTURED_OUTPUT_TOOL_NAME

__all__ = ["Act", "Exit", "Reason", "final_msg", "next_step", "reply_end"]

PARKED_TEXT = "I'm waiting for your permission or the external execution to finish."
STRUCTURED_DONE_TEXT = "The required structured output is generated."
EXCEEDED_TEXT = "The maximum reasoning-acting iterations are exceeded."
STRUCTURED_HINT_SOURCE = '{"label": "System", "sublabel": "Structured Output Requirement"}'
MAX_ITERS_HINT_SOURCE = '{"label": "System", "sublabel": "Max Iterations Reached"}'


@attrs.frozen
class Exit:
    """End the reply with ``events`` (``None``: park it) and then ``msg``."""

    events: list[AgentEvent] | None
    msg: Msg


@attrs.frozen
class Reason:
    """Run a reasoning step, after appending ``hint``, with ``tool_choice``."""

    hint: HintBlock | None = None
    tool_choice: ToolChoice | None = None


@attrs.frozen
class Act:
    """Run these calls."""

    calls: list[ToolCallBlock]


def reply_end(agent: AgentLike, reason: ReplyFinishedReason) -> ReplyEndEvent:
    """The end event of the current reply."""
    state = agent.state
    return ReplyEndEvent(
        session_id=state.session_id, reply_id=state.reply_id, finished_reason=reason
    )


def final_msg(
    agent: AgentLike,
    text: str,
    reason: ReplyFinishedReason,
    structured_output: dict[str, object] | None = None,
) -> Msg:
    """The final Msg of the current reply."""
    return AssistantMsg(
        agent.name,
        text,
        id=agent.state.reply_id,
        finished_reason=reason,
        finished_at=generate_timestamp(),
        structured_output=structured_output,
        usage=reply_usage(agent),
    )


def _exceeded(agent: AgentLike) -> Exit:
    events: list[AgentEvent] = [
        ExceedMaxItersEvent(reply_id=agent.state.reply_id, name=agent.name),
        reply_end(agent, ReplyFinishedReason.EXCEED_MAX_ITERS),
    ]
    return Exit(events, final_msg(agent, EXCEEDED_TEXT, ReplyFinishedReason.EXCEED_MAX_ITERS))


def _structured_step(agent: AgentLike) -> Exit | Reason:
    state, cfg = agent.state, agent.react_config
    output = state.reply_context.structured_output
    if output is not None:
        done = final_msg(
            agent,
            STRUCTURED_DONE_TEXT,
            ReplyFinishedReason.COMPLETED,
            structured_output=copy.deepcopy(output),
        )
        return Exit([reply_end(agent, ReplyFinishedReason.COMPLETED)], done)
    if state.cur_iter >= cfg.max_iters + cfg.structured_output_grace_iters:
        return _exceeded(agent)
    forced = state.cur_iter >= cfg.max_iters
    suffix = (
        "You have reached the maximum reasoning-acting iterations, so call this tool at "
        "once to generate the final structured output."
        if forced
        else "Call it when you are ready to generate the final structured output."
    )
    hint = HintBlock(
        hint=[
            TextBlock(
                text="<system-reminder>You're required to generate structured output by "
                f"calling the '{STRUCTURED_OUTPUT_TOOL_NAME}' tool. {suffix}</system-reminder>"
            )
        ],
        source=STRUCTURED_HINT_SOURCE,
    )
    return Reason(hint, ToolChoice(mode=STRUCTURED_OUTPUT_TOOL_NAME) if forced else None)


def next_step(agent: AgentLike, candidate: Msg | None) -> Exit | Reason | Act:
    """Decide the next step; reads the state and changes nothing but ``candidate``'s reason.

    ``candidate`` is the final Msg the last reasoning step proposed, if any.
    """
    state, cfg = agent.state, agent.react_config
    awaiting = state.get_awaiting_tool_calls(agent.name)
    last = state.reply_message(agent.name)
    if last is not None:
        answered = {b.id for b in last.content if isinstance(b, ToolResultBlock)}
        executable = [
            b
            for b in last.content
            if isinstance(b, ToolCallBlock)
            and b.id not in answered
            and (b.state == "allowed" or (b.state == "pending" and not awaiting))
        ]
        if executable:
            return Act(executable)
    if awaiting:
        return Exit(None, AssistantMsg(agent.name, PARKED_TEXT, id=state.reply_id))
    if state.reply_context.structured_schema is not None:
        return _structured_step(agent)
    if candidate is not None:
        exceeded = state.cur_iter > cfg.max_iters
        reason = ReplyFinishedReason.EXCEED_MAX_ITERS if exceeded else ReplyFinishedReason.COMPLETED
        events: list[AgentEvent] = []
        if exceeded:
            events.append(ExceedMaxItersEvent(reply_id=state.reply_id, name=agent.name))
        events.append(reply_end(agent, reason))
        candidate.finished_reason = reason
        return Exit(events, candidate)
    if state.cur_iter == cfg.max_iters:
        return Reason(
            HintBlock(
                hint=f"<system-reminder>You have reached the maximum of {cfg.max_iters} "
                "reasoning-acting iterations. Summarize the work and findings so far and "
                "return the final answer as text. Do not call any tools.</system-reminder>",
                source=MAX_ITERS_HINT_SOURCE,
            ),
            ToolChoice(mode="none"),
        )
    if state.cur_iter > cfg.max_iters:
        return _exceeded(agent)
    return Reason()
