"""OpenAI Responses API formatters.

:class:`OpenAIResponseFormatter` turns ``Msg`` lists into Responses API *input items*:

* text and media of a message become one ``{"role", "content": [parts]}`` item (assistant text
  is ``output_text``, any other role's text ``input_text``; images ``input_image``, PDFs an
  inline ``input_file``);
* tool calls become top-level ``function_call`` items, emitted after the message content that
  precedes them, and tool results ``function_call_output`` items — whose ``output`` keeps
  images and PDFs natively (a list of parts) instead of promoting them to a user message;
* hints become separate ``user`` items, and so does the media of an assistant message (an
  assistant item holds only ``output_text``), after that message's items;
* a thinking block that came from a Responses ``reasoning`` item (it carries the
  ``reasoning_item_id`` / ``reasoning_item_raw`` extras the model stores) is replayed as that
  reasoning item — ahead of the function calls it led to, as the API requires; other thinking
  is dropped.

:class:`OpenAIResponseMultiAgentFormatter` collapses runs of plain messages of several
speakers into one ``<history>`` user item, like the OpenAI chat multi-agent formatter.
"""

from __future__ import annotations

import copy
import logging
from typing import ClassVar

import httpx2

from .._core.json_types import JSONObject
from ..message import (
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ._base import MultiAgentFormatterBase, PerMessageFormatter

__all__ = ["OpenAIResponseFormatter", "OpenAIResponseMultiAgentFormatter"]

logger = logging.getLogger("trioagent.formatter")

_PDF = "application/pdf"


class OpenAIResponseFormatter(PerMessageFormatter):
    """Formats messages as OpenAI Responses API input items (``POST /responses``).

    Media: images as ``input_image`` (remote URLs passed through, base64 and ``file://`` as a
    data URI), PDFs as an inline ``input_file`` (remote PDFs downloaded); audio, video and any
    other media are skipped with a warning.  Inside a tool result, supported images and PDFs
    stay in the ``function_call_output`` (its ``output`` becomes a list of parts); other media
    is described in text (its URL, or a temporary file it was saved to).
    """

    default_input_types: ClassVar[tuple[str, ...]] = ("text/plain", "image/*", _PDF)
    text_part_type: ClassVar[str] = "input_text"

    async def _format_msg(
        self, msg: Msg, out: list[JSONObject], http_client: httpx2.AsyncClient | None
    ) -> None:
        content: list[JSONObject] = []
        function_calls: list[JSONObject] = []
        replayed: set[str] = set()
        assistant_media: list[DataBlock] = []  # assistant content is output_text only

        def flush_content() -> None:
            if content:
                out.append({"role": msg.role, "content": list(content)})
                content.clear()

        def flush() -> None:
            flush_content()
            out.extend(function_calls)
            function_calls.clear()

        text_type = "output_text" if msg.role == "assistant" else "input_text"
        for block in msg.content:
            match block:
                case TextBlock():
                    content.append({"type": text_type, "text": block.text})
                case DataBlock() if msg.role == "assistant":
                    assistant_media.append(block)
                case DataBlock():
                    if (part := await self.format_data_block(block, http_client)) is not None:
                        content.append(part)
                case HintBlock():
                    flush()
                    if (hint := await self.hint_message(block, http_client)) is not None:
                        out.append(hint)
                case ToolCallBlock():
                    function_calls.append(
                        {
                            "type": "function_call",
                            "call_id": block.id,
                            "name": block.name,
                            "arguments": block.input,
                        }
                    )
                case ToolResultBlock():
                    flush()
                    out.append(
                        {
                            "type": "function_call_output",
                            "call_id": block.id,
                            "output": await self._tool_output(block.output, http_client),
                        }
                    )
                case ThinkingBlock():
                    item_id = block.extra.get("reasoning_item_id")
                    if not isinstance(item_id, str) or not item_id or item_id in replayed:
                        continue  # plain thinking is not replayed; one item per reasoning id
                    replayed.add(item_id)
                    if block.thinking:
                        # Summary text follows the content before it; an empty block (the
                        # model adds one at the end of a response for a reasoning item
                        # without text) goes out at once, ahead of that response's content.
                        flush_content()
                    out.append(_reasoning_item(block, item_id))
        flush()
        if assistant_media and (
            moved := await self.assistant_media_message(msg, assistant_media, http_client)
        ):
            out.append(moved)

    async def _tool_output(
        self, output: str | list[TextBlock | DataBlock], http_client: httpx2.AsyncClient | None
    ) -> str | list[JSONObject]:
        """A tool result's ``output``: a string, or a list of parts when it holds an image or
        PDF the model accepts."""
        if isinstance(output, str):
            return output
        if not any(isinstance(b, DataBlock) and self._native(b) for b in output):
            text, _ = await self.convert_tool_result_to_string(output)
            return text
        parts: list[JSONObject] = []
        for block in output:
            if isinstance(block, TextBlock):
                parts.append({"type": "input_text", "text": block.text})
            elif self._native(block):
                part = await self.format_data_block(block, http_client)
                if part is not None:
                    parts.append(part)
            else:
                text, _ = await self.convert_tool_result_to_string([block])
                parts.append({"type": "input_text", "text": text})
        return parts

    def _native(self, block: DataBlock) -> bool:
        media_type = block.source.media_type
        return self.is_supported(media_type) and (
            media_type.startswith("image/") or media_type == _PDF
        )

    async def format_data_block(
        self, block: DataBlock, http_client: httpx2.AsyncClient | None = None
    ) -> JSONObject | None:
        """One content part for a data block, or ``None`` when it is skipped."""
        media_type = block.source.media_type
        if not self.is_supported(media_type):
            logger.warning("skipping a %s data block: not in %s", media_type, self.input_types)
            return None
        if media_type.startswith("image/"):
            return {"type": "input_image", "image_url": await self._image_url(block)}
        if media_type == _PDF:
            data = await self.load_base64(block, http_client)
            return {
                "type": "input_file",
                "filename": block.name or "document.pdf",
                "file_data": f"data:{_PDF};base64,{data}",
            }
        logger.warning(
            "skipping a %s data block: not supported by the OpenAI Responses API", media_type
        )
        return None

    async def _image_url(self, block: DataBlock) -> str:
        source = block.source
        if isinstance(source, Base64Source):
            return f"data:{source.media_type};base64,{source.data}"
        if source.url.startswith("file://"):
            data = await self.load_base64(block)
            return f"data:{source.media_type};base64,{data}"
        return source.url


def _reasoning_item(block: ThinkingBlock, item_id: str) -> JSONObject:
    """The reasoning item to replay: the stored raw item, else one rebuilt from the text."""
    raw = block.extra.get("reasoning_item_raw")
    if isinstance(raw, dict) and raw.get("type") == "reasoning" and raw.get("id") == item_id:
        return copy.deepcopy(raw)
    summary = [{"type": "summary_text", "text": block.thinking}] if block.thinking else []
    return {"type": "reasoning", "id": item_id, "summary": summary, "content": []}


class OpenAIResponseMultiAgentFormatter(MultiAgentFormatterBase[OpenAIResponseFormatter]):
    """Formats a conversation of several named agents for the OpenAI Responses API.

    A leading system message becomes ``{"role": "system", "content": str}``; each run of tool
    messages is formatted by :class:`OpenAIResponseFormatter`; each run of plain messages
    becomes one user item: ``name: text`` lines inside ``<history>`` tags as one
    ``input_text`` part (the first such item is preceded by ``conversation_history_prompt``),
    followed by the run's media parts.

    Args:
        input_types: accepted media types (as :class:`OpenAIResponseFormatter`).
        conversation_history_prompt: text put before the first ``<history>`` block.
    """

    default_input_types: ClassVar[tuple[str, ...]] = OpenAIResponseFormatter.default_input_types

    def _chat_formatter(self) -> OpenAIResponseFormatter:
        return OpenAIResponseFormatter(input_types=self.input_types)
