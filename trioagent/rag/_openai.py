"""OpenAI embeddings over httpx2: ``POST {base_url}/embeddings``.

The body is ``{"model", "input": [texts], "encoding_format": "float"[, "dimensions"]}`` plus
the model's ``parameters``; the answer's ``data[i].embedding`` (a list of floats, or base64
little-endian float32 when a server ignores ``encoding_format``) is placed by ``data[i].index``
and ``usage.total_tokens`` is reported.  Any OpenAI-compatible server works
(``OpenAICredential(base_url=...)``).
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Mapping
from typing import ClassVar

import httpx2
import trio

from .._core.ids import generate_id
from .._core.json_types import JSONObject, JSONValue
from .._http import HTTPClientOwner, bearer_headers, send_request
from ..credential import OpenAICredential
from ..exception import ModelUpstreamError
from ._embedding import (
    BatchItem,
    EmbeddingCacheBase,
    EmbeddingModelBase,
    EmbeddingResponse,
    EmbeddingUsage,
)

__all__ = ["OpenAIEmbeddingModel"]


class OpenAIEmbeddingModel(HTTPClientOwner, EmbeddingModelBase):
    """OpenAI text embeddings (``text-embedding-3-small`` / ``-large``, or any compatible
    server).

    Args:
        model: the model name.
        dimensions: the vector length (sent as ``dimensions`` unless ``pass_dimensions`` is
            off, for servers with a fixed native size that reject the key).
        credential: key and base URL (default ``OpenAICredential()``, which reads
            ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``).
        pass_dimensions: send ``dimensions`` in the request.
        parameters: extra request keys.
        http_client: an ``httpx2.AsyncClient`` (never closed by the model); without one the
            model creates its own, closed by :meth:`aclose` / ``async with``.
        read_timeout / connect_timeout: httpx2 timeouts of a client the model creates.
        Other keyword arguments: see :class:`~trioagent.rag.EmbeddingModelBase`.

    Retried (``max_retries``, default 3): HTTP 408/409/429/5xx, connection errors and read
    timeouts — the model layer's retryable :class:`~trioagent.exception.ModelError` types.
    """

    type: ClassVar[str] = "openai_embedding"
    credential: OpenAICredential

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        dimensions: int | None = None,
        credential: OpenAICredential | None = None,
        pass_dimensions: bool = True,
        parameters: Mapping[str, JSONValue] | None = None,
        context_size: int = 8191,
        batch_size: int = 2048,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        max_retry_delay: float = 30.0,
        max_concurrency: int = 8,
        cache: EmbeddingCacheBase | None = None,
        timeout: float | None = None,
        http_client: httpx2.AsyncClient | None = None,
        read_timeout: float | None = 60.0,
        connect_timeout: float | None = 10.0,
    ) -> None:
        EmbeddingModelBase.__init__(
            self,
            model,
            dimensions=dimensions,
            credential=credential or OpenAICredential(),
            parameters=parameters,
            context_size=context_size,
            batch_size=batch_size,
            max_retries=max_retries,
            retry_delay=retry_delay,
            max_retry_delay=max_retry_delay,
            max_concurrency=max_concurrency,
            cache=cache,
            timeout=timeout,
        )
        self.pass_dimensions = pass_dimensions
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self._set_http_client(http_client)

    def build_body(self, batch: list[str], **kwargs: JSONValue) -> JSONObject:
        """The request body for one batch (public for inspection)."""
        body: JSONObject = {
            "model": self.model,
            "input": batch,
            "encoding_format": "float",
        }
        if self.pass_dimensions:
            body["dimensions"] = self.dimensions
        body.update(self.parameters)
        body.update(kwargs)
        return body

    async def _call_api(self, batch: list[BatchItem], **kwargs: JSONValue) -> EmbeddingResponse:
        texts = [item for item in batch if isinstance(item, str)]
        if len(texts) != len(batch):  # pragma: no cover - the base rejects DataBlocks
            raise ValueError("OpenAIEmbeddingModel embeds text only")
        headers = bearer_headers(
            self.credential.get_api_key(), organization=self.credential.get_organization()
        )
        url = f"{self.credential.get_base_url()}/embeddings"
        request = self.http_client.build_request(
            "POST", url, json=self.build_body(texts, **kwargs), headers=headers
        )
        start = trio.current_time()
        response = await send_request(self.http_client, request, stream=False, redact=self._redact)
        elapsed = trio.current_time() - start
        try:
            payload = response.json()
        except ValueError as exc:
            raise ModelUpstreamError(
                self._redact(f"the embedding response is not JSON: {response.text[:200]!r}"),
                status_code=response.status_code,
                retryable=False,
            ) from exc
        return parse_embeddings(payload, len(texts), model=self.model, elapsed=elapsed)


def parse_embeddings(
    payload: JSONValue, count: int, *, model: str, elapsed: float
) -> EmbeddingResponse:
    """Turn an OpenAI embeddings answer into an :class:`EmbeddingResponse` of ``count``
    vectors.

    Raises:
        ModelUpstreamError: the answer is not an embeddings object, or lacks a vector.
    """
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise ModelUpstreamError(
            f"the embedding response has no 'data' list: {payload!r:.200}", retryable=False
        )
    vectors: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            continue
        index = item.get("index", position)
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
            continue  # a stray item never replaces a placed vector; a missing one is reported
        vectors[index] = _vector(item.get("embedding"))
    missing = [i for i, v in enumerate(vectors) if v is None]
    if missing:
        raise ModelUpstreamError(
            f"embedding model {model!r} returned no vector for input(s) {missing}",
            retryable=False,
        )
    usage = payload.get("usage") if isinstance(payload, dict) else None
    tokens = (
        usage.get("total_tokens", usage.get("prompt_tokens")) if isinstance(usage, dict) else None
    )
    return EmbeddingResponse(
        embeddings=[v for v in vectors if v is not None],
        id=str(payload.get("id") or "") or generate_id(),
        usage=EmbeddingUsage(tokens=tokens if isinstance(tokens, int) else None, time=elapsed),
    )


def _vector(value: JSONValue) -> list[float] | None:
    if isinstance(value, list) and all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in value
    ):
        return [float(x) for x in value]
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return None
        if len(raw) % 4:
            return None
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return None
