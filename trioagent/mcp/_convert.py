"""MCP content → our blocks, and an MCP tool listing → :class:`~trioagent.tool.MCPToolSpec`.

* text → :class:`TextBlock`; image and audio → a base64 :class:`DataBlock`;
* an embedded text resource → a :class:`TextBlock` holding the resource as JSON with the
  protocol's field names (``uri``, ``mimeType``, ``text``; absent fields left out);
* an embedded binary resource → a base64 :class:`DataBlock` (media type
  ``application/octet-stream`` when the server gives none) named by its URI;
* a resource link → a :class:`TextBlock` holding the link as JSON with the protocol's field
  names (``uri``, ``name``, ``title``, ``description``, ``mimeType``, ``size``) and a line
  saying how to read it (the server's ``read_resource`` tool);
* ``structuredContent`` is added as JSON text only when no text block came with it.

Field names follow the wire (``mimeType``), never the SDK's Python attributes (``mime_type``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import mcp_types
from pydantic import BaseModel

from .._core.json_types import JSONObject
from ..message import Base64Source, DataBlock, TextBlock
from ..tool import MCPCallResult, MCPToolSpec, mcp_tool_name

__all__ = [
    "convert_content",
    "convert_result",
    "offered_tools",
    "requires_task",
    "resource_contents",
    "tool_spec",
    "wire",
]

logger = logging.getLogger("trioagent.mcp")

_OCTET_STREAM = "application/octet-stream"


def wire(model: BaseModel) -> JSONObject:
    """An SDK model as the JSON the protocol sends (its field names, no absent fields)."""
    dumped: JSONObject = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def _json_text(value: object) -> TextBlock:
    return TextBlock(text=json.dumps(value, ensure_ascii=False, indent=2))


def resource_contents(contents: object) -> TextBlock | DataBlock | None:
    """One resource's contents (embedded, or read with ``resources/read``) as a block."""
    if isinstance(contents, mcp_types.TextResourceContents):
        return _json_text(wire(contents))
    if isinstance(contents, mcp_types.BlobResourceContents):
        media_type = contents.mime_type or _OCTET_STREAM
        return DataBlock(
            source=Base64Source(data=contents.blob, media_type=media_type), name=str(contents.uri)
        )
    logger.warning("Skipping MCP resource contents of type %s", type(contents).__name__)
    return None


def convert_content(
    blocks: Sequence[object], *, read_tool: str | None = None
) -> list[TextBlock | DataBlock]:
    """Convert the content of an MCP tool result (or a prompt's messages).

    ``read_tool``: the name of the tool the model reads resource links with, named in the
    text of each link.
    """
    converted: list[TextBlock | DataBlock] = []
    for content in blocks:
        if isinstance(content, mcp_types.TextContent):
            converted.append(TextBlock(text=content.text))
        elif isinstance(content, mcp_types.ImageContent | mcp_types.AudioContent):
            converted.append(
                DataBlock(source=Base64Source(data=content.data, media_type=content.mime_type))
            )
        elif isinstance(content, mcp_types.EmbeddedResource):
            block = resource_contents(content.resource)
            if block is not None:
                converted.append(block)
        elif isinstance(content, mcp_types.ResourceLink):
            link = wire(content)
            link.pop("_meta", None)
            how = f"Read it with the tool {read_tool}." if read_tool else ""
            text = json.dumps(link, ensure_ascii=False, indent=2)
            converted.append(TextBlock(text=f"{text}\n{how}" if how else text))
        else:
            logger.warning("Skipping MCP content of unsupported type %s", type(content).__name__)
    return converted


def convert_result(
    result: mcp_types.CallToolResult, *, read_tool: str | None = None
) -> MCPCallResult:
    """An MCP tool result as an :class:`MCPCallResult`."""
    content = convert_content(result.content, read_tool=read_tool)
    if result.structured_content is not None and not any(
        isinstance(block, TextBlock) for block in content
    ):
        content.append(TextBlock(text=json.dumps(result.structured_content, ensure_ascii=False)))
    return MCPCallResult(content=content, is_error=bool(result.is_error))


def requires_task(tool: mcp_types.Tool) -> bool:
    """Whether the server accepts calls of ``tool`` only as tasks (``taskSupport: required``)."""
    execution = getattr(tool, "execution", None)
    return getattr(execution, "task_support", None) == "required"


def tool_spec(tool: mcp_types.Tool) -> MCPToolSpec:
    """What the toolkit needs from one listed MCP tool."""
    annotations = tool.annotations
    title = tool.title or (annotations.title if annotations is not None else None)
    return MCPToolSpec(
        name=tool.name,
        description=tool.description,
        input_schema=dict(tool.input_schema) if tool.input_schema else None,
        read_only=bool(annotations is not None and annotations.read_only_hint),
        destructive=annotations.destructive_hint if annotations is not None else None,
        title=title,
        open_world=annotations.open_world_hint if annotations is not None else None,
        output_schema=dict(tool.output_schema) if tool.output_schema else None,
    )


def offered_tools(
    server: str,
    tools: Sequence[mcp_types.Tool],
    *,
    reserved: Sequence[str] = (),
    task_calls: bool = False,
) -> list[tuple[str, MCPToolSpec]]:
    """The tools to offer the model, each with the name it sees.

    A tool the server accepts only as a task (``execution.taskSupport: required``) is
    offered when the connection takes task-augmented calls (``task_calls``), and otherwise
    left out (logged).  Names follow :func:`mcp_tool_name`; a
    name already taken (by ``reserved`` or an earlier tool) takes the suffixed form, and a
    tool whose suffixed form is taken too is left out (logged), so no two tools share a name.
    """
    taken = set(reserved)
    offered: list[tuple[str, MCPToolSpec]] = []
    for tool in tools:
        if requires_task(tool) and not task_calls:
            logger.info(
                "Not offering tool %r of MCP server %r: it accepts only task-augmented calls",
                tool.name,
                server,
            )
            continue
        name = mcp_tool_name(server, tool.name)
        if name in taken:
            name = mcp_tool_name(server, tool.name, hashed=True)
        if name in taken:
            logger.warning(
                "Not offering tool %r of MCP server %r: its name %r is taken",
                tool.name,
                server,
                name,
            )
            continue
        taken.add(name)
        offered.append((name, tool_spec(tool)))
    return offered
