"""OpenAI speech synthesis over httpx2: ``POST {base_url}/audio/speech``.

The body is ``{"model", "input", "voice", "response_format"[, "speed"][, "instructions"]}``
and the answer is the audio itself.  With ``stream=True`` the body is read chunk by chunk as
it arrives (each chunk is emitted at once); otherwise it is read whole and emitted once.  A
cancelled synthesis closes its connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

import httpx2
import trio

from .._core.json_types import JSONObject, JSONValue
from .._http import (
    HTTPClientOwner,
    aclose_response,
    error_from_transport,
    read_bytes,
    send_request,
)
from ..credential import OpenAICredential
from ..exception import ModelTimeoutError
from ._base import TTSEmit, TTSModelBase, TTSResponse

__all__ = ["OpenAITTSModel"]

ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]

#: The media type of each ``response_format`` (``pcm`` is raw 16-bit mono at 24 kHz).
MEDIA_TYPES: dict[str, str] = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm;rate=24000",
}


class OpenAITTSModel(HTTPClientOwner, TTSModelBase):
    """OpenAI text to speech (and OpenAI-compatible servers), standard mode.

    Args:
        model: ``"gpt-4o-mini-tts"``, ``"tts-1"``, ``"tts-1-hd"``, ...
        credential: key and base URL (default ``OpenAICredential()``, which reads
            ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``).
        voice: the voice (``"alloy"``, ``"coral"``, ...).
        response_format: the audio format; ``"wav"`` by default (playable as it streams,
            like the local :class:`~trioagent.tts.EspeakTTSModel`).
        speed: 0.25 to 4.0 (``None``: the provider's default).
        instructions: how to speak (``gpt-4o-mini-tts`` only).
        extra_body: extra request keys.
        stream: emit the body chunk by chunk as it arrives.
        http_client: an ``httpx2.AsyncClient`` (never closed by the model); without one the
            model creates its own, closed by :meth:`aclose` / ``async with``.
        timeout: total deadline of one synthesis in seconds (``None``: none); httpx2's
            ``read_timeout`` applies per read.
    """

    type: ClassVar[str] = "openai_tts"

    def __init__(
        self,
        model: str = "gpt-4o-mini-tts",
        *,
        credential: OpenAICredential | None = None,
        voice: str = "alloy",
        response_format: ResponseFormat = "wav",
        speed: float | None = None,
        instructions: str | None = None,
        extra_body: Mapping[str, JSONValue] | None = None,
        stream: bool = True,
        http_client: httpx2.AsyncClient | None = None,
        timeout: float | None = None,
        read_timeout: float | None = 60.0,
        connect_timeout: float | None = 10.0,
    ) -> None:
        super().__init__(model, stream=stream)
        if response_format not in MEDIA_TYPES:
            raise ValueError(
                f"response_format must be one of {sorted(MEDIA_TYPES)}, got {response_format!r}"
            )
        if speed is not None and not 0.25 <= speed <= 4.0:
            raise ValueError(f"speed must be in [0.25, 4.0], got {speed}")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be > 0 or None")
        self.credential = credential or OpenAICredential()
        self.voice = voice
        self.response_format: ResponseFormat = response_format
        self.speed = speed
        self.instructions = instructions
        self.extra_body = dict(extra_body or {})
        self.timeout = timeout
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self._set_http_client(http_client)

    @property
    def media_type(self) -> str:
        """The media type of the audio this model produces."""
        return MEDIA_TYPES[self.response_format]

    def build_body(self, text: str) -> JSONObject:
        """The request body for ``text``."""
        body: JSONObject = {
            "model": self.model,
            "input": text,
            "voice": self.voice,
            "response_format": self.response_format,
        }
        if self.speed is not None:
            body["speed"] = self.speed
        if self.instructions:
            body["instructions"] = self.instructions
        body.update(self.extra_body)
        return body

    async def _synthesize(self, text: str, emit: TTSEmit) -> None:
        deadline = self.timeout if self.timeout is not None else float("inf")
        with trio.move_on_after(deadline) as scope:
            await self._request(text, emit)
        if scope.cancelled_caught:
            raise ModelTimeoutError(
                f"the speech synthesis of {self.model!r} passed its {self.timeout}s deadline"
            )

    async def _request(self, text: str, emit: TTSEmit) -> None:
        request = self.http_client.build_request(
            "POST",
            f"{self.credential.get_base_url()}/audio/speech",
            json=self.build_body(text),
            headers={"Authorization": f"Bearer {self.credential.get_api_key()}"},
        )
        redact = self.credential.redact
        response = await send_request(self.http_client, request, stream=True, redact=redact)
        media_type = self.media_type

        async def handle(piece: bytes) -> None:
            if piece:
                await emit(TTSResponse.from_audio(piece, media_type))

        try:
            if self.stream:
                await read_bytes(response, handle)
            else:
                try:
                    body = await response.aread()
                except httpx2.TransportError as exc:
                    raise error_from_transport(exc, phase="body") from exc
                await handle(body)
        finally:
            await aclose_response(response)
