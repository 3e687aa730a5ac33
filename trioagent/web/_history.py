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


def thread_snapshot(
    state: AgentState, *, running: bool, waiting: list[ToolCallBlock] | None = None
) -> dict[str, Any]:
    """The JSON document of ``GET .../threads/<id>``: ``messages`` (AG-UI messages),
    ``interrupts`` (the calls waiting for an answer: ``waiting``, by default the agent's own)
    and ``running``."""
    if waiting is None:
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
    if msg.role == "user":
        text = "".join(b.text for b in msg.content if isinstance(b, TextBlock))
        return [UserMessage(id=msg.id, content=text)] if text else []
    if msg.role != "assistant":
        return []
    # One answer spans rounds (text, calls, their results, more text): kept in that order,
    # an AG-UI assistant message per round.
    out: list[Message] = []
    texts: list[str] = []
    calls: list[ToolCall] = []
    rounds = 0

    def close_round() -> None:
        nonlocal rounds
        if texts or calls:
            out.append(
                AssistantMessage(
                    id=msg.id if rounds == 0 else f"{msg.id}:{rounds}",
                    name=msg.name,
                    content="".join(texts) or None,
                    tool_calls=list(calls) or None,
                )
            )
            rounds += 1
            texts.clear()
            calls.clear()

    for block in msg.content:
        if isinstance(block, TextBlock):
            if calls:
                close_round()
            texts.append(block.text)
        elif isinstance(block, ThinkingBlock):
            close_round()
            out.append(ReasoningMessage(id=block.id, content=block.thinking))
        elif isinstance(block, ToolCallBlock):
            calls.append(
                ToolCall(id=block.id, function=FunctionCall(name=block.name, arguments=block.input))
            )
        elif isinstance(block, ToolResultBlock):
            close_round()
            out.append(
                ToolMessage(
                    id=f"{msg.id}:{block.id}",
                    tool_call_id=block.id,
                    content=block.output_text() or str(block.state),
                    metadata={"state": str(block.state)},
                )
            )
    close_round()
    reason = msg.metadata.get(FINISHED_REASON)
    last = next((m for m in reversed(out) if isinstance(m, AssistantMessage)), None)
    if last is not None and isinstance(reason, str):
        last.metadata = {"finishedReason": reason}
    return out
