"""``Mem0PlatformClient``: a minimal async client of the hosted Mem0 REST API, over httpx2.

Only the two calls :class:`~trioagent.memory.Mem0Memory` makes are implemented, with
the wire shape of Mem0's platform API (as documented at docs.mem0.ai/api-reference and sent by
mem0's own ``AsyncMemoryClient``):

* ``search`` → ``POST {host}/v2/memories/search/`` with ``{"query", "filters", "top_k"}``
  (plus ``"threshold"`` when given);
* ``add`` → ``POST {host}/v1/memories/`` with ``{"messages", "user_id", "agent_id", "infer",
  "version": "v2", "output_format": "v1.1"}`` (``agent_id`` / ``infer`` only when given);

both authenticated with ``Authorization: Token <api key>``, and ``org_id`` / ``project_id``
added to the body when configured.  The JSON answer is returned as is (the middleware
flattens it).  Not implemented: the SDK's key validation on construction (``/v1/ping/``),
telemetry, and every other endpoint.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import httpx2

from .._core.json_types import JSONValue
from .._http import HTTPClientOwner, send_request
from ..exception import ModelError, TrioagentError

__all__ = ["API_KEY_ENV", "DEFAULT_HOST", "Mem0APIError", "Mem0PlatformClient"]

API_KEY_ENV = "MEM0_API_KEY"
DEFAULT_HOST = "https://api.mem0.ai"


class Mem0APIError(TrioagentError):
    """A Mem0 platform request failed (``status_code`` is set when the server answered)."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code

    def __str__(self) -> str:
        if self.status_code is None:
            return self.message
        return f"HTTP {self.status_code} {self.message}"


class Mem0PlatformClient(HTTPClientOwner):
    """The hosted Mem0 platform as an async mem0 client.

    Args:
        api_key: the Mem0 API key (default: the ``MEM0_API_KEY`` environment variable).
        host: the API root (default ``https://api.mem0.ai``).
        org_id, project_id: added to every request body when given.
        http_client: an ``httpx2.AsyncClient`` to use (never closed here); otherwise one is
            created on first use and closed by :meth:`aclose` / ``async with``.
        timeout: httpx2's per-read timeout, in seconds, of a client created here.
        connect_timeout: its connect timeout.

    Raises:
        ValueError: no API key.

    The key never appears in ``repr`` or in error messages.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        host: str = DEFAULT_HOST,
        org_id: str | None = None,
        project_id: str | None = None,
        http_client: httpx2.AsyncClient | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 10.0,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        if not key:
            raise ValueError(f"Mem0 API key not provided: pass api_key= or set {API_KEY_ENV}")
        self._api_key = key
        self.host = host.rstrip("/")
        self.org_id = org_id
        self.project_id = project_id
        self.read_timeout = timeout
        self.connect_timeout = connect_timeout
        self._set_http_client(http_client)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(host={self.host!r})"

    async def search(
        self,
        query: str,
        *,
        filters: Mapping[str, object] | None = None,
        top_k: int | None = None,
        threshold: float | None = None,
        **extra: object,
    ) -> JSONValue:
        """Semantic search (``POST /v2/memories/search/``); returns the parsed JSON."""
        body: dict[str, object] = {"query": query, "filters": filters or {}}
        if top_k is not None:
            body["top_k"] = top_k
        if threshold is not None:
            body["threshold"] = threshold
        return await self._post("/v2/memories/search/", {**body, **extra})

    async def add(
        self,
        messages: Sequence[Mapping[str, object]] | str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        infer: bool | None = None,
        **extra: object,
    ) -> JSONValue:
        """Add memories (``POST /v1/memories/``); returns the parsed JSON."""
        body: dict[str, object] = {
            "messages": messages,
            "version": "v2",
            "output_format": "v1.1",
        }
        if user_id is not None:
            body["user_id"] = user_id
        if agent_id is not None:
            body["agent_id"] = agent_id
        if infer is not None:
            body["infer"] = infer
        return await self._post("/v1/memories/", {**body, **extra})

    async def _post(self, path: str, body: dict[str, object]) -> JSONValue:
        if self.org_id is not None:
            body.setdefault("org_id", self.org_id)
        if self.project_id is not None:
            body.setdefault("project_id", self.project_id)
        client = self.http_client
        request = client.build_request(
            "POST",
            f"{self.host}{path}",
            json=body,
            headers={"Authorization": f"Token {self._api_key}", "Accept": "application/json"},
        )
        try:
            response = await send_request(client, request, stream=False, redact=self._redact)
        except ModelError as exc:
            raise Mem0APIError(exc.message, status_code=exc.status_code) from exc
        try:
            return response.json()
        except ValueError as exc:
            raise Mem0APIError(
                f"invalid JSON from {path}: {exc}", status_code=response.status_code
            ) from None

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***")
