"""Turning model response chunks into agent events.

A sans-IO state machine: :meth:`ChunkConverter.convert` takes one non-last ``ChatResponse``
delta and returns the events it causes; :meth:`ChunkConverter.finish` closes what is still
open.  Event block ids are generated per stream (they differ from the stored block ids).
"""

from __future__ import annotations

from ..event import (
    AgentEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ..message import Base64Source, DataBlock, TextBlock, ThinkingBlock, ToolCallBlock
from ..model import ChatResponse
from ..types import generate_id

__all__ = ["ChunkConverter"]


class ChunkConverter:
    """Per-model-call conversion state: the open text, thinking, tool-call and data blocks."""

    __slots__ = ("_data_ids", "_reply_id", "_text_id", "_thinking_id", "_tool_ids")

    def __init__(self, reply_id: str) -> None:
        self._reply_id = reply_id
        self._text_id: str | None = None
        self._thinking_id: str | None = None
        self._tool_ids: dict[str, None] = {}  # insertion-ordered set of open call ids
        self._data_ids: dict[str, None] = {}

    def convert(self, chunk: ChatResponse) -> list[AgentEvent]:
        """Events for one delta chunk, in the order thinking, text, tool calls, data."""
        reply_id = self._reply_id
        content = chunk.content
        if (
            len(content) == 1
            and type(content[0]) is TextBlock
            and self._text_id is not None
            and self._thinking_id is None
            and not self._tool_ids
            and not self._data_ids
        ):
            # The common case, once per streamed token: one more delta of the open text block.
            return [
                TextBlockDeltaEvent(
                    reply_id=reply_id, block_id=self._text_id, delta=content[0].text
                )
            ]
        events: list[AgentEvent] = []
        thinking: list[str] = []
        texts: list[str] = []
        calls: list[ToolCallBlock] = []
        data: list[DataBlock] = []
        for block in content:  # one pass
            if isinstance(block, TextBlock):
                texts.append(block.text)
            elif isinstance(block, ThinkingBlock):
                thinking.append(block.thinking)
            elif isinstance(block, ToolCallBlock):
                calls.append(block)
            elif isinstance(block, DataBlock):
                data.append(block)

        if thinking:
            if self._thinking_id is None:
                self._thinking_id = generate_id()
                events.append(
                    ThinkingBlockStartEvent(reply_id=reply_id, block_id=self._thinking_id)
                )
            events.append(
                ThinkingBlockDeltaEvent(
                    reply_id=reply_id, block_id=self._thinking_id, delta="".join(thinking)
                )
            )
        elif self._thinking_id is not None and not data:
            events.append(ThinkingBlockEndEvent(reply_id=reply_id, block_id=self._thinking_id))
            self._thinking_id = None

        if texts:
            if self._text_id is None:
                self._text_id = generate_id()
                events.append(TextBlockStartEvent(reply_id=reply_id, block_id=self._text_id))
            events.append(
                TextBlockDeltaEvent(reply_id=reply_id, block_id=self._text_id, delta="".join(texts))
            )
        elif self._text_id is not None and not data:
            events.append(TextBlockEndEvent(reply_id=reply_id, block_id=self._text_id))
            self._text_id = None

        if not calls and not self._tool_ids and not data:
            return events
        present: set[str] = set()
        for call in calls:
            present.add(call.id)
            if call.id not in self._tool_ids:
                self._tool_ids[call.id] = None
                events.append(
                    ToolCallStartEvent(
                        reply_id=reply_id, tool_call_id=call.id, tool_call_name=call.name
                    )
                )
            if call.input:
                events.append(
                    ToolCallDeltaEvent(reply_id=reply_id, tool_call_id=call.id, delta=call.input)
                )
        for call_id in [i for i in self._tool_ids if i not in present]:
            del self._tool_ids[call_id]
            events.append(ToolCallEndEvent(reply_id=reply_id, tool_call_id=call_id))

        for block in data:
            if not isinstance(block.source, Base64Source):
                continue
            if block.id not in self._data_ids:
                self._data_ids[block.id] = None
                events.append(
                    DataBlockStartEvent(
                        reply_id=reply_id,
                        block_id=block.id,
                        media_type=block.source.media_type,
                        name=block.name,
                    )
                )
            events.append(
                DataBlockDeltaEvent(
                    reply_id=reply_id,
                    block_id=block.id,
                    media_type=block.source.media_type,
                    data=block.source.data,
                )
            )
        return events

    def finish(self) -> list[AgentEvent]:
        """Close every open block: text, thinking, tool calls (in open order), data."""
        reply_id = self._reply_id
        events: list[AgentEvent] = []
        if self._text_id is not None:
            events.append(TextBlockEndEvent(reply_id=reply_id, block_id=self._text_id))
            self._text_id = None
        if self._thinking_id is not None:
            events.append(ThinkingBlockEndEvent(reply_id=reply_id, block_id=self._thinking_id))
            self._thinking_id = None
        events.extend(ToolCallEndEvent(reply_id=reply_id, tool_call_id=i) for i in self._tool_ids)
        self._tool_ids.clear()
        events.extend(DataBlockEndEvent(reply_id=reply_id, block_id=i) for i in self._data_ids)
        self._data_ids.clear()
        return events
