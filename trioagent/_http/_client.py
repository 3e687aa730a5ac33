"""Who owns the ``httpx2.AsyncClient``, and the request headers the HTTP callers share."""

from __future__ import annotations

from types import TracebackType
from typing import Self

import httpx2

__all__ = ["HTTPClientOwner", "bearer_headers"]


class HTTPClientOwner:
    """One ``httpx2.AsyncClient`` per object: injectable, else created on first use.

    The object never closes a client it was given; :meth:`aclose` (or ``async with obj:``)
    closes one it created.  Subclasses set ``read_timeout`` and ``connect_timeout`` and call
    :meth:`_set_http_client` from their constructor.
    """

    read_timeout: float | None
    connect_timeout: float | None
    _http_client: httpx2.AsyncClient | None
    _owns_client: bool

    def _set_http_client(self, http_client: httpx2.AsyncClient | None) -> None:
        self._http_client = http_client
        self._owns_client = http_client is None

    @property
    def http_client(self) -> httpx2.AsyncClient:
        """The ``httpx2.AsyncClient`` (created on first use when none was injected)."""
        if self._http_client is None:
            self._http_client = httpx2.AsyncClient(
                timeout=httpx2.Timeout(
                    connect=self.connect_timeout,
                    read=self.read_timeout,
                    write=self.read_timeout,
                    pool=self.connect_timeout,
                ),
                limits=httpx2.Limits(max_connections=64, max_keepalive_connections=16),
            )
        return self._http_client

    @property
    def existing_http_client(self) -> httpx2.AsyncClient | None:
        """The client if one was injected or created already; never creates one."""
        return self._http_client

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it (an injected one is left open)."""
        if self._http_client is not None and self._owns_client:
            client, self._http_client = self._http_client, None
            await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def bearer_headers(
    api_key: str | None, *, stream: bool = False, organization: str | None = None
) -> dict[str, str]:
    """``Authorization: Bearer <key>`` (and ``OpenAI-Organization`` when given), and
    ``Accept``: ``text/event-stream`` for a streaming request, else ``application/json``."""
    headers = {"Authorization": f"Bearer {api_key}"}
    if organization:
        headers["OpenAI-Organization"] = organization
    headers["Accept"] = "text/event-stream" if stream else "application/json"
    return headers
