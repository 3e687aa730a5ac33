"""How to reach an MCP server: :class:`StdioMCPConfig` and :class:`HttpMCPConfig`.

Both are frozen attrs classes.  Values that may hold secrets (environment variables, HTTP
headers) never appear in a repr: only their names do.
"""

from __future__ import annotations

import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, TextIO

import attrs

__all__ = ["HttpMCPConfig", "StdioMCPConfig", "redact_url"]


def _names_only(value: Mapping[str, str] | None) -> str:
    if value is None:
        return "None"
    return "{" + ", ".join(f"{key!r}: '***'" for key in value) + "}"


def redact_url(url: str) -> str:
    """``url`` without its userinfo (``https://user:secret@host`` → ``https://***@host``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return f"{scheme}://{authority}{slash}{path}"


def _url_repr(url: str) -> str:
    return repr(redact_url(url))


def _str_dict(value: Mapping[str, str] | None) -> dict[str, str] | None:
    if value is None:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError("expected a mapping of str to str")
    return dict(value)


def _str_list(value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        raise TypeError("args must be a sequence of str")
    return tuple(value)


def _non_empty(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be a non-empty string")


def _positive_or_none(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value is not None and not (isinstance(value, int | float) and value > 0):
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be positive or None")


@attrs.frozen(kw_only=True)
class StdioMCPConfig:
    """A server started as a subprocess, spoken to over its stdin and stdout.

    The process runs in its own process group; leaving ``async with client:`` closes its stdin,
    waits a short grace period, then sends ``SIGTERM`` to whatever is left of the group (and
    ``SIGKILL`` after another).  A stdio client is always stateful: its session lives as long
    as the process (a new process when the client reconnects after the server died).

    Args:
        command: the executable.
        args: its arguments.
        env: extra environment variables, over a minimal safe set (``PATH``, ``HOME``, ...).
        cwd: the working directory of the process.
        encoding_error_handler: how undecodable output is handled (``strict``, ``ignore``,
            ``replace``).
        errlog: where the server's stderr goes (default: ours).
    """

    command: str = attrs.field(validator=_non_empty)
    args: tuple[str, ...] = attrs.field(default=(), converter=_str_list)
    env: dict[str, str] | None = attrs.field(default=None, converter=_str_dict, repr=_names_only)
    cwd: str | Path | None = None
    encoding_error_handler: Literal["strict", "ignore", "replace"] = attrs.field(
        default="strict", validator=attrs.validators.in_(("strict", "ignore", "replace"))
    )
    errlog: TextIO = attrs.field(factory=lambda: sys.stderr, repr=False, eq=False)


@attrs.frozen(kw_only=True)
class HttpMCPConfig:
    """A server reached over HTTP: streamable HTTP, or the older HTTP+SSE transport.

    Args:
        url: the endpoint, e.g. ``http://127.0.0.1:8000/mcp`` (or ``.../sse``).
        headers: extra request headers (such as ``Authorization``; never shown in a repr).
        timeout: seconds for each HTTP operation; ``None`` for no limit.
        transport: ``"streamable_http"``, ``"sse"``, or ``"auto"``: SSE when the URL's path
            ends with ``/sse`` or ``/messages/``, else streamable HTTP.
    """

    url: str = attrs.field(validator=_non_empty, repr=_url_repr)
    headers: dict[str, str] | None = attrs.field(
        default=None, converter=_str_dict, repr=_names_only
    )
    timeout: float | None = attrs.field(
        default=30.0, validator=_positive_or_none, converter=attrs.converters.optional(float)
    )
    transport: Literal["auto", "streamable_http", "sse"] = attrs.field(
        default="auto", validator=attrs.validators.in_(("auto", "streamable_http", "sse"))
    )

    def __attrs_post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError("HttpMCPConfig.url must start with http:// or https://")

    @property
    def uses_sse(self) -> bool:
        """Whether the server is spoken to over HTTP+SSE (see ``transport``)."""
        if self.transport != "auto":
            return self.transport == "sse"
        path = urllib.parse.urlsplit(self.url).path
        return path.endswith(("/sse", "/messages/"))
