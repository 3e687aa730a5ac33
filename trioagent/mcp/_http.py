"""Streamable HTTP for the MCP client, over an ``httpx2`` client of its own."""

from __future__ import annotations

import contextlib
from types import TracebackType

import httpx2
from mcp.client.streamable_http import streamable_http_client

from ._config import HttpMCPConfig

__all__ = ["HttpTransport"]


class HttpTransport:
    """Streamable HTTP over an HTTP client of our own (closed with the transport)."""

    def __init__(self, config: HttpMCPConfig) -> None:
        timeout = httpx2.Timeout(config.timeout)
        self._http = httpx2.AsyncClient(headers=config.headers, timeout=timeout)
        self._url = config.url
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> object:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(self._http)
            streams = await stack.enter_async_context(
                streamable_http_client(self._url, http_client=self._http)
            )
            self._stack = stack.pop_all()
        return streams

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._stack.__aexit__(exc_type, exc, tb)
