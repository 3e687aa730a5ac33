"""MCP content → our blocks, and an MCP tool listing → :class:`~trioagent.tool.MCPToolSpec`.

* text → :class:`TextBlock`; image and audio → a base64 :class:`DataBlock`;
* an embedded text resource → a :class:`TextBlock` holding the resource as JSON (indent 2);
  an embedded blob is dropped (logged);
* a resource link → a URL :class:`DataBlock` (media type ``application/octet-stream`` when the
  server gives none), or the text ``<unconvertible MCP resource URI: ...>`` when the URI is
  not a URL;
* ``structured_content`` is added as JSON text only when no text block came with it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

import mcp_types

from ..message import Base64Source, DataBlock, TextBlock, URLSource
from ..tool import MCPCallResult, MCPToolSpec

__all__ = ["convert_content", "convert_result", "tool_spec"]

logger = logging.getLogger("trioagent.mcp")


def _is_url(uri: str) -> bool:
    try:
        parts = urlsplit(uri)
    except ValueError:
        return False
    return bool(parts.scheme) and bool(parts.netloc or parts.path) and " " not in uri


def convert_content(blocks: Sequence[object]) -> list[TextBlock | DataBlock]:
    """Convert the content of an MCP tool result."""
    converted: list[TextBlock | DataBlock] = []
    for content in blocks:
        if isinstance(content, mcp_types.TextContent):
            converted.append(TextBlock(text=content.text))
        elif isinstance(content, mcp_types.ImageContent | mcp_types.AudioContent):
            converted.append(
                DataBlock(source=Base64Source(data=content.data, media_type=content.mime_type))
            )
        elif isinstance(content, mcp_types.EmbeddedResource):
            if isinstance(content.resource, mcp_types.TextResourceContents):
                converted.append(TextBlock(text=content.resource.model_dump_json(indent=2)))
            else:
                logger.warning(
                    "Dropping an embedded MCP resource of type %s (only text is supported)",
                    type(content.resource).__name__,
                )
        elif isinstance(content, mcp_types.ResourceLink):
            uri = str(content.uri)
            if not _is_url(uri):
                message = f"<unconvertible MCP resource URI: {uri}>"
                logger.warning("%s", message)
                converted.append(TextBlock(text=message))
                continue
            media_type = content.mime_type or "application/octet-stream"
            converted.append(DataBlock(source=URLSource(url=uri, media_type=media_type)))
        else:
            logger.warning("Skipping MCP content of unsupported type %s", type(content).__name__)
    return converted


def convert_result(result: mcp_types.CallToolResult) -> MCPCallResult:
    """An MCP tool result as an :class:`MCPCallResult`."""
    content = convert_content(result.content)
    if result.structured_content is not None and not any(
        isinstance(block, TextBlock) for block in content
    ):
        content.append(TextBlock(text=json.dumps(result.structured_content, ensure_ascii=False)))
    return MCPCallResult(content=content, is_error=bool(result.is_error))


def tool_spec(tool: mcp_types.Tool) -> MCPToolSpec:
    """What the toolkit needs from one listed MCP tool."""
    annotations = tool.annotations
    return MCPToolSpec(
        name=tool.name,
        description=tool.description,
        input_schema=dict(tool.input_schema) if tool.input_schema else None,
        read_only=bool(annotations is not None and annotations.read_only_hint),
    )
