"""Writing tool results to the context, and the events that announce them.

Shared by acting (results of executed calls), resuming (external results, denials) and the
reply's cleanup (an interrupted result for every call still without one).
"""

from __future__ import annotations

import logging

from .._core.emit import Emit
from .._core.ids import generate_timestamp
from ..event import (
    AgentEvent,
    CustomEvent,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
)
from ..message import (
    Base64Source,
    DataBlock,
    TextBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
)
from ..tool import ToolChunk
from ._background import INTERRUPTED_TEXT
from ._state import AgentState

__all__ = ["ABORTED_TEXT", "INTERRUPTED_TEXT", "ResultWriter", "chunk_events", "output_events"]

logger = logging.getLogger("trioagent.agent")

ABORTED_TEXT = (
    "<system-reminder>The tool call was not executed because the reply ended with an error."
    "</system-reminder>"
)


class ResultWriter:
    """Writes tool results to the reply's message: at once, or held and written in call order
    (``order``, for a concurrent batch) when :meth:`flush` is called."""

    def __init__(self, state: AgentState, name: str, order: list[str] | None = None) -> None:
        self._state = state
        self._name = name
        self._order = order
        self._held: dict[str, ToolResultBlock] = {}

    def write(self, call: ToolCallBlock, result: ToolResultBlock) -> None:
        """Store ``result`` (the call is finished)."""
        call.state = ToolCallState.FINISHED
        if self._order is None:
            self._state.append_context(self._name, [result])
        else:
            self._held[call.id] = result

    def flush(self) -> None:
        """Append the held results in call order (a concurrent batch is over)."""
        if self._order is None:
            return
        blocks = [self._held.pop(i) for i in self._order if i in self._held]
        if blocks:
            self._state.append_context(self._name, blocks)

    def record(self, call: ToolCallBlock, result: ToolResultBlock) -> ToolResultEndEvent:
        """Store a result (finishing the call); returns the end event that announces it."""
        if result.finished_at is None:
            result.finished_at = generate_timestamp()
        self.write(call, result)
        return ToolResultEndEvent(
            reply_id=self._state.reply_id,
            tool_call_id=call.id,
            state=result.state,
            metadata=dict(result.metadata),
        )

    async def finish(
        self, call: ToolCallBlock, emit: Emit[AgentEvent], result: ToolResultBlock
    ) -> None:
        """Store a result (finishing the call) and emit its end event."""
        await emit(self.record(call, result))

    async def quick(
        self, call: ToolCallBlock, emit: Emit[AgentEvent], text: str, state: ToolResultState
    ) -> None:
        """A result decided without running the tool: START, one text delta, END."""
        reply_id = self._state.reply_id
        await emit(
            ToolResultStartEvent(reply_id=reply_id, tool_call_id=call.id, tool_call_name=call.name)
        )
        await emit(ToolResultTextDeltaEvent(reply_id=reply_id, tool_call_id=call.id, delta=text))
        result = ToolResultBlock(id=call.id, name=call.name, output=text, state=state)
        await self.finish(call, emit, result)

    def close_unfinished(self, error: BaseException | None) -> list[AgentEvent]:
        """Give every call of the reply message without a result an interrupted one (written
        at once); returns the events announcing them, for the caller to emit."""
        last = self._state.reply_message(self._name)
        if last is None:
            return []
        answered = {b.id for b in last.content if isinstance(b, ToolResultBlock)}
        reply_id = self._state.reply_id
        text = ABORTED_TEXT if error is not None else INTERRUPTED_TEXT
        unanswered = [
            b for b in last.content if isinstance(b, ToolCallBlock) and b.id not in answered
        ]
        events: list[AgentEvent] = []
        for call in unanswered:
            if call.state not in (ToolCallState.ALLOWED, ToolCallState.SUBMITTED):
                events.append(
                    ToolResultStartEvent(
                        reply_id=reply_id, tool_call_id=call.id, tool_call_name=call.name
                    )
                )
            events.append(
                ToolResultTextDeltaEvent(reply_id=reply_id, tool_call_id=call.id, delta=text)
            )
            result = ToolResultBlock(
                id=call.id, name=call.name, output=text, state=ToolResultState.INTERRUPTED
            )
            events.append(self.record(call, result))
        return events

    def close_left_by_a_snapshot(self) -> None:
        """Answer calls that a state saved mid-reply (a per-event checkpoint) left without one.

        Their reply never ended in this state, so no interrupted result was written: a new reply
        on the restored state writes one for each (silently -- that reply has no consumer any
        more), so no request carries a call without its result.
        """
        calls = self._state.get_unfinished_tool_calls(self._name)
        if not calls:
            return
        logger.warning(
            "closing %d tool call(s) of reply %s that never ended (a state saved mid-reply)",
            len(calls),
            self._state.reply_id,
        )
        for call in calls:
            result = ToolResultBlock(
                id=call.id,
                name=call.name,
                output=INTERRUPTED_TEXT,
                state=ToolResultState.INTERRUPTED,
                finished_at=generate_timestamp(),
            )
            self.write(call, result)


def chunk_events(reply_id: str, call: ToolCallBlock, chunk: ToolChunk) -> list[AgentEvent]:
    """The delta events of one streamed tool chunk (plus ``mcp_progress`` as a custom event)."""
    events: list[AgentEvent] = []
    progress = chunk.metadata.get("mcp_progress")
    if progress is not None:
        # An MCP tool's progress is a dict (progress, total, message): its keys join the value.
        fields = progress if isinstance(progress, dict) else {"progress": progress}
        value = {**fields, "reply_id": reply_id, "tool_call_id": call.id}
        events.append(CustomEvent(reply_id=reply_id, name="mcp_progress", value=value))
    events.extend(output_events(reply_id, call.id, chunk.content))
    return events


def output_events(
    reply_id: str, call_id: str, output: str | list[TextBlock | DataBlock]
) -> list[AgentEvent]:
    """The delta events announcing a result's output."""
    if isinstance(output, str):
        return [ToolResultTextDeltaEvent(reply_id=reply_id, tool_call_id=call_id, delta=output)]
    events: list[AgentEvent] = []
    for block in output:
        if isinstance(block, TextBlock):
            events.append(
                ToolResultTextDeltaEvent(reply_id=reply_id, tool_call_id=call_id, delta=block.text)
            )
            continue
        source = block.source
        data, url = (source.data, None) if isinstance(source, Base64Source) else (None, source.url)
        events.append(
            ToolResultDataDeltaEvent(
                reply_id=reply_id,
                tool_call_id=call_id,
                block_id=block.id,
                media_type=source.media_type,
                data=data,
                url=url,
            )
        )
    return events
