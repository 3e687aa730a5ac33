"""Accumulate streamed :class:`ChatResponse` deltas into one complete response.

Semantics follow AgentScope's stream accumulator:

* blocks are keyed by ``block.id`` and kept in first-seen order;
* text, thinking and tool-call input fragments are collected in lists and joined once, in
  :meth:`StreamAccumulator.build` (linear, however many fragments arrive);
* the first delta of an id seeds the block with all its fields; later non-``None`` thinking
  extras overwrite; a tool call keeps the name of its first delta unless that was empty;
* ``audio/*`` base64 data is byte-concatenated (a streaming WAV header gets its sizes
  patched at build); other data is replaced by the latest delta;
* the usage of the last chunk that has one wins, kept exactly as reported (a ``None`` cache
  counter stays ``None``); the response id is the id of the last chunk.
"""

from __future__ import annotations

import base64
import binascii
import logging
import struct

import attrs

from .._core.ids import generate_id
from .._core.json_types import JSONObject
from ..message import (
    Base64Source,
    DataBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    URLSource,
)
from ..types import FinishedReason
from ._response import ChatResponse, ChatUsage, ResponseBlock

__all__ = ["StreamAccumulator", "patch_wav_header", "wav_header"]

logger = logging.getLogger("trioagent.model")

_STREAMING_SIZE = 0xFFFFFFFF


def wav_header(
    data_size: int | None = None,
    *,
    sample_rate: int = 24000,
    channels: int = 1,
    bits_per_sample: int = 16,
) -> bytes:
    """A canonical 44-byte PCM WAV header.

    ``data_size=None`` writes the streaming placeholder ``0xFFFFFFFF`` in both size fields;
    :func:`patch_wav_header` fixes them once the whole payload is known.
    """
    byte_rate = sample_rate * channels * bits_per_sample // 8
    block_align = channels * bits_per_sample // 8
    riff_size = _STREAMING_SIZE if data_size is None else 36 + data_size
    data_len = _STREAMING_SIZE if data_size is None else data_size
    return (
        b"RIFF"
        + struct.pack("<I", riff_size)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, channels, sample_rate, byte_rate, block_align, 16)
        + b"data"
        + struct.pack("<I", data_len)
    )


def patch_wav_header(data: bytes) -> bytes:
    """Write the real RIFF and data sizes into a canonical 44-byte WAV header."""
    if len(data) < 44 or data[:4] != b"RIFF" or data[8:12] != b"WAVE" or data[36:40] != b"data":
        return data
    return (
        data[:4]
        + struct.pack("<I", len(data) - 8)
        + data[8:40]
        + struct.pack("<I", len(data) - 44)
        + data[44:]
    )


def _is_audio(block: DataBlock) -> bool:
    return isinstance(block.source, Base64Source) and block.source.media_type.startswith("audio/")


@attrs.define
class _Slot:
    """One block under construction."""

    template: ResponseBlock
    parts: list[str] = attrs.Factory(list)
    name: str = ""
    extra: JSONObject = attrs.Factory(dict)


class StreamAccumulator:
    """Builds the complete response from the deltas of one streamed model call."""

    def __init__(self) -> None:
        self._slots: dict[str, _Slot] = {}
        self.id: str | None = None
        self.usage: ChatUsage | None = None
        self.metadata: JSONObject = {}
        #: Whether any delta carried content (a retry would replay a visible stream).
        self.has_content = False
        #: Why the call ended, as a delta said (``MAX_TOKENS``); ``COMPLETED`` otherwise.
        self.finished_reason = FinishedReason.COMPLETED

    def add(self, chunk: ChatResponse) -> None:
        """Fold one delta chunk (content, usage, id, metadata) into the accumulator."""
        self.id = chunk.id
        if chunk.finished_reason not in (FinishedReason.COMPLETED, FinishedReason.INTERRUPTED):
            self.finished_reason = chunk.finished_reason
        if chunk.usage:
            self.usage = chunk.usage
        if chunk.metadata:
            self.metadata.update(chunk.metadata)
        for block in chunk.content:
            self._add_block(block)
            self.has_content = True

    def _add_block(self, block: ResponseBlock) -> None:
        slot = self._slots.get(block.id)
        if slot is not None and type(slot.template) is not type(block):
            logger.warning(
                "stream delta for block %r changed type from %s to %s; restarting the block",
                block.id,
                type(slot.template).__name__,
                type(block).__name__,
            )
            slot = None
        if slot is None:
            slot = _Slot(template=block)
            self._slots[block.id] = slot
            if isinstance(block, ThinkingBlock):
                slot.extra = dict(block.extra)
            elif isinstance(block, ToolCallBlock):
                slot.name = block.name
        match block:
            case TextBlock():
                slot.parts.append(block.text)
            case ThinkingBlock():
                slot.parts.append(block.thinking)
                if slot.template is not block:
                    slot.extra.update({k: v for k, v in block.extra.items() if v is not None})
            case ToolCallBlock():
                slot.parts.append(block.input)
                if not slot.name and block.name:
                    slot.name = block.name
            case DataBlock():
                self._add_data(slot, block)

    @staticmethod
    def _add_data(slot: _Slot, block: DataBlock) -> None:
        source = block.source
        audio = source.data if isinstance(source, Base64Source) and _is_audio(block) else None
        template = slot.template
        if template is not block:
            assert isinstance(template, DataBlock)
            name = block.name if block.name is not None else template.name
            if (
                audio is None
                or not _is_audio(template)
                or template.source.media_type != block.source.media_type
            ):
                slot.parts = []  # not the same audio stream: the latest delta replaces
                template = block
            slot.template = attrs.evolve(template, name=name)
        if audio is not None:
            slot.parts.append(audio)

    def _build_block(self, slot: _Slot) -> ResponseBlock:
        template = slot.template
        match template:
            case TextBlock():
                return attrs.evolve(template, text="".join(slot.parts))
            case ThinkingBlock():
                return attrs.evolve(template, thinking="".join(slot.parts), extra=dict(slot.extra))
            case ToolCallBlock():
                return attrs.evolve(
                    template,
                    name=slot.name,
                    input="".join(slot.parts),
                    suggested_rules=list(template.suggested_rules),
                )
            case DataBlock():
                source = template.source
                if _is_audio(template) and slot.parts:
                    data = _join_base64(slot.parts, source.media_type)
                    return attrs.evolve(
                        template, source=Base64Source(data=data, media_type=source.media_type)
                    )
                if isinstance(source, URLSource):
                    source = URLSource(url=source.url, media_type=source.media_type)
                else:
                    source = Base64Source(data=source.data, media_type=source.media_type)
                return attrs.evolve(template, source=source)
        raise TypeError(f"not a response block: {template!r}")  # pragma: no cover

    def build(self, finished_reason: FinishedReason | None = None) -> ChatResponse:
        """The complete ``is_last=True`` response accumulated so far (new block objects);
        ``finished_reason`` defaults to the one a delta gave (:attr:`finished_reason`)."""
        return ChatResponse(
            content=[self._build_block(slot) for slot in self._slots.values()],
            is_last=True,
            id=self.id or generate_id(),
            usage=self.usage,
            finished_reason=finished_reason or self.finished_reason,
            metadata=dict(self.metadata),
        )


def _join_base64(parts: list[str], media_type: str) -> str:
    """Concatenate base64 fragments by bytes; plain string concatenation if one is invalid."""
    try:
        raw = b"".join(base64.b64decode(p, validate=True) for p in parts)
    except (binascii.Error, ValueError):
        logger.warning("invalid base64 in streamed %s data; concatenating the text", media_type)
        return "".join(parts)
    if media_type == "audio/wav":
        raw = patch_wav_header(raw)
    return base64.b64encode(raw).decode("ascii")
