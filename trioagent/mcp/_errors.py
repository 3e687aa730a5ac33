"""The MCP client's error, and how a failure is told (without secrets)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx2
import mcp_types
import trio
from mcp.shared.exceptions import MCPError

from ..exception import TrioagentError
from ..tool import MCPCallError

__all__ = ["MCPClientError", "call_errors", "connection_lost", "describe"]


class MCPClientError(TrioagentError):
    """The client cannot do what was asked: not connected, the server unreachable or gone."""


def describe(exc: BaseException) -> str:
    """A short, secret-free account of a failure (no URLs, no headers)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(sub) for sub in exc.exceptions)
    if isinstance(exc, MCPError):
        return exc.message
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, httpx2.HTTPError | OSError | trio.BrokenResourceError):
        return f"{type(exc).__name__}: the connection to the server failed"
    if isinstance(exc, trio.TooSlowError):
        return "timed out"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def connection_lost(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(connection_lost(sub) for sub in exc.exceptions)
    if isinstance(exc, MCPError):
        return exc.code == mcp_types.CONNECTION_CLOSED
    return isinstance(exc, trio.BrokenResourceError | trio.ClosedResourceError | OSError)


@contextlib.contextmanager
def call_errors() -> Iterator[None]:
    """Every failure of a tool call as an :class:`MCPCallError` (what the model reads)."""
    try:
        yield
    except MCPClientError as exc:
        raise MCPCallError(str(exc)) from None
    except Exception as exc:
        raise MCPCallError(describe(exc)) from None
