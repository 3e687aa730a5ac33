"""A thread's conversation as AG-UI messages: what a reloaded page shows.

The server owns the conversation (the agent's context in the session store); a page that loads
asks for it with ``GET <prefix>/agui/threads/<threadId>`` and gets these messages, the tool
calls still waiting for an answer (as AG-UI interrupts), and whether a reply is running.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    Message,
    ReasoningMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from ..agent import AgentState
from ..message import Msg, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ._agui import interrupt_of
from ._marker import FINISHED_REASON

__all__ = ["thread_snapshot"]


def thread_snapshot(state: AgentState, *, running: bool) -> dict[str, Any]:
    """The JSON document of ``GET .../threads/<id>``: ``messages`` (AG-UI messages),
    ``interrupts`` (the calls waiting for an answer) and ``running``."""
    # The agent's messages carry its name: the last answer's is the one a parked reply has.
    name = next((m.name for m in reversed(state.context) if m.role == "assistant"), "")
    waiting = state.get_awaiting_tool_calls(name) if name else []
    messages: list[Message] = []
    for msg in state.context:
        messages.extend(_messages_of(msg))
    interrupts = [interrupt_of(call) for call in waiting]
    return {
        "messages": [m.model_dump(mode="json", by_alias=True) for m in messages],
        "interrupts": [i.model_dump(mode="json", by_alias=True) for i in interrupts],
        "running": running,
    }


def _messages_of(msg: Msg) -> list[Message]:
    text = "".join(b.text for b in msg.content if isinstance(b, TextBlock))
    if msg.role == "user":
        return [UserMessage(id=msg.id, content=text)] if text else []
    if msg.role != "assistant":
        return []
    out: list[Message] = [
        ReasoningMessage(id=b.id, content=b.thinking)
        for b in msg.content
        if isinstance(b, ThinkingBlock)
    ]
    calls = [
        ToolCall(id=b.id, function=FunctionCall(name=b.name, arguments=b.input))
        for b in msg.content
        if isinstance(b, ToolCallBlock)
    ]
    reason = msg.metadata.get(FINISHED_REASON)
    metadata = {"finishedReason": reason} if isinstance(reason, str) else None
    if text or calls:
        out.append(
            AssistantMessage(
                id=msg.id,
                name=msg.name,
                content=text or None,
                tool_calls=calls or None,
                metadata=metadata,
            )
        )
    out.extend(
        ToolMessage(
            id=f"{msg.id}:{b.id}",
            tool_call_id=b.id,
            content=b.output_text() or str(b.state),
            metadata={"state": str(b.state)},
        )
        for b in msg.content
        if isinstance(b, ToolResultBlock)
    )
    return out
