"""Gemini formatters.

The output is AgentScope's: the google-genai SDK's snake_case content dicts
(``{"role": "user" | "model", "parts": [...]}`` with ``text``, ``thought``, ``inline_data``,
``function_call``, ``function_response`` parts, and a ``thought_signature`` as raw ``bytes``).
:class:`~trioagent.model.GeminiChatModel` turns them into the REST JSON (camelCase keys,
bytes as base64), as the SDK does.

:class:`GeminiChatFormatter` maps each ``Msg`` to contents: assistant messages become ``model``
turns, every other role (system included — there is no system instruction) ``user`` turns;
thinking is replayed as ``thought`` parts; every tool result goes into a ``user`` turn of
``function_response`` parts, and media promoted from tool results into a following ``user``
turn.  :class:`GeminiMultiAgentFormatter` collapses runs of plain messages of several speakers
into one ``<history>`` user turn with the media inline, where it appeared.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Sequence
from typing import ClassVar

import httpx2

from .._core.json_types import JSONObject
from .._json_repair import json_loads_with_repair
from ..exception import ToolJSONDecodeError
from ..message import (
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ._base import MultiAgentFormatterBase, PerMessageFormatter

__all__ = ["THOUGHT_SIGNATURE_PREFIX", "GeminiChatFormatter", "GeminiMultiAgentFormatter"]

logger = logging.getLogger("trioagent.formatter")

#: A tool-call id that starts with this carries the call's thought signature (base64) after it.
THOUGHT_SIGNATURE_PREFIX = "gemini_ts:"


def _json_args(block: ToolCallBlock) -> JSONObject:

    try:
        return json_loads_with_repair(block.input or "{}")
    except ToolJSONDecodeError:
        logger.warning(
            "tool call %r of %r has arguments that are not a JSON object; sending {}",
            block.id,
            block.name,
        )
        return {}


def _thought_signature(call_id: str) -> bytes | None:
    if not call_id.startswith(THOUGHT_SIGNATURE_PREFIX):
        return None
    encoded = call_id.removeprefix(THOUGHT_SIGNATURE_PREFIX)
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        try:
            return base64.urlsafe_b64decode(encoded)
        except (binascii.Error, ValueError):
            logger.warning("tool call id %r has an invalid thought signature; dropped", call_id)
            return None


class GeminiChatFormatter(PerMessageFormatter):
    """Formats messages for Gemini ``generateContent`` (as google-genai content dicts).

    Media (images, audio, video, PDF) is sent inline as ``inline_data`` — remote URLs are
    downloaded, ``file://`` URLs read; other media is skipped with a warning.  A tool call
    whose id starts with ``gemini_ts:`` gets its thought signature back (the model stores
    Gemini's signature in the id).  Tool-call arguments that are not valid JSON are repaired
    (``{"city": "Tok`` → ``{"city": "Tok"}``); arguments that cannot be repaired into an
    object are sent as ``{}`` with a warning (AgentScope raises instead).
    """

    default_input_types: ClassVar[tuple[str, ...]] = (
        "text/plain",
        "image/*",
        "audio/*",
        "video/*",
        "application/pdf",
    )

    @staticmethod
    def role_of(msg: Msg) -> str:
        """``"model"`` for assistant messages, ``"user"`` for every other role."""
        return "model" if msg.role == "assistant" else "user"

    async def _format_msg(
        self, msg: Msg, out: list[JSONObject], http_client: httpx2.AsyncClient | None
    ) -> None:
        role = self.role_of(msg)
        parts: list[JSONObject] = []
        tool_result_parts: list[JSONObject] = []
        promoted_parts: list[JSONObject] = []

        def flush_parts() -> None:
            if parts:
                out.append({"role": role, "parts": list(parts)})
                parts.clear()

        def flush_tool_results() -> None:
            if tool_result_parts:
                out.append({"role": "user", "parts": list(tool_result_parts)})
                tool_result_parts.clear()
            if promoted_parts:
                out.append({"role": "user", "parts": list(promoted_parts)})
                promoted_parts.clear()

        for block in msg.content:
            if not isinstance(block, ToolResultBlock):
                flush_tool_results()
            match block:
                case TextBlock():
                    if block.text:
                        parts.append({"text": block.text})
                case ThinkingBlock():
                    if block.thinking:
                        parts.append({"thought": True, "text": block.thinking})
                case DataBlock():
                    if (part := await self.format_data_block(block, http_client)) is not None:
                        parts.append(part)
                case HintBlock():
                    hint = await self._hint_parts(block, http_client)
                    if hint:
                        flush_parts()
                        out.append({"role": "user", "parts": hint})
                case ToolCallBlock():
                    parts.append(self._function_call_part(block))
                case ToolResultBlock():
                    flush_parts()
                    text, promoted = await self.convert_tool_result_to_string(block.output)
                    tool_result_parts.append(
                        {
                            "function_response": {
                                "id": block.id,
                                "name": block.name,
                                "response": {"output": text},
                            }
                        }
                    )
                    promoted_parts.extend(await self.format_parts(promoted, http_client))
        flush_parts()
        flush_tool_results()

    @staticmethod
    def _function_call_part(block: ToolCallBlock) -> JSONObject:
        part: JSONObject = {
            "function_call": {"id": block.id, "name": block.name, "args": _json_args(block)}
        }
        if (signature := _thought_signature(block.id)) is not None:
            part["thought_signature"] = signature
        return part

    async def format_parts(
        self, blocks: Sequence[TextBlock | DataBlock], http_client: httpx2.AsyncClient | None
    ) -> list[JSONObject]:
        """``text`` and ``inline_data`` parts for text and data blocks (unsupported media and
        empty text skipped)."""
        parts: list[JSONObject] = []
        for block in blocks:
            if isinstance(block, TextBlock):
                if block.text:
                    parts.append({"text": block.text})
            elif (part := await self.format_data_block(block, http_client)) is not None:
                parts.append(part)
        return parts

    async def _hint_parts(
        self, block: HintBlock, http_client: httpx2.AsyncClient | None
    ) -> list[JSONObject]:
        if isinstance(block.hint, str):
            return [{"text": block.hint}] if block.hint else []
        return await self.format_parts(block.hint, http_client)

    async def format_data_block(
        self, block: DataBlock, http_client: httpx2.AsyncClient | None = None
    ) -> JSONObject | None:
        """An ``inline_data`` part for a data block, or ``None`` when its media type is not
        supported (URLs are downloaded with ``http_client``, ``file://`` URLs read)."""
        media_type = block.source.media_type
        if not self.is_supported(media_type):
            logger.warning("skipping a %s data block: not in %s", media_type, self.input_types)
            return None
        data = await self.load_base64(block, http_client)
        return {"inline_data": {"data": data, "mime_type": media_type}}


class GeminiMultiAgentFormatter(MultiAgentFormatterBase[GeminiChatFormatter]):
    """Formats a conversation of several named agents for Gemini.

    A leading system message becomes a ``user`` turn with its text; each run of tool messages
    is formatted by :class:`GeminiChatFormatter`; each run of plain messages becomes one
    ``user`` turn: ``name: text`` lines inside ``<history>`` tags (the first such turn is
    preceded by ``conversation_history_prompt``), the text split into a new part before each
    media part so that media stays where it was said.

    Args:
        input_types: accepted media types (as :class:`GeminiChatFormatter`).
        conversation_history_prompt: text put before the first ``<history>`` block.
    """

    default_input_types: ClassVar[tuple[str, ...]] = GeminiChatFormatter.default_input_types

    def _chat_formatter(self) -> GeminiChatFormatter:
        return GeminiChatFormatter(input_types=self.input_types)

    def _system_message(self, msg: Msg) -> JSONObject | None:
        return {"role": "user", "parts": [{"text": msg.get_text_content() or ""}]}

    async def _history_message(
        self,
        chat: GeminiChatFormatter,
        group: list[Msg],
        is_first: bool,
        http_client: httpx2.AsyncClient | None,
    ) -> JSONObject | None:
        parts: list[JSONObject] = []
        lines: list[str] = []

        def flush_lines() -> None:
            if lines:
                parts.append({"text": "\n".join(lines)})
                lines.clear()

        for msg in group:
            for block in msg.content:
                match block:
                    case TextBlock():
                        lines.append(f"{msg.name}: {block.text}")
                    case DataBlock():
                        part = await chat.format_data_block(block, http_client)
                        if part is not None:
                            flush_lines()
                            parts.append(part)
        flush_lines()
        if not parts:
            return None
        opening = (self.conversation_history_prompt if is_first else "") + "<history>"
        if "text" in parts[0]:
            parts[0] = {"text": f"{opening}\n{parts[0]['text']}"}
        else:
            parts.insert(0, {"text": opening})
        if "text" in parts[-1]:
            parts[-1] = {"text": f"{parts[-1]['text']}\n</history>"}
        else:
            parts.append({"text": "</history>"})
        return {"role": "user", "parts": parts}
