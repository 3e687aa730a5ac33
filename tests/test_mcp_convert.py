"""MCP content → our blocks (``trioagent/mcp/_convert.py``), on the SDK's own wire types.

A real server's mixed content is checked end to end in ``test_mcp_tool.py``; here each rule
is pinned on its own, including the cases a server rarely sends (blobs, bad URIs, structured
content with and without text).
"""

from __future__ import annotations

import json
import logging

import mcp_types as types
import pytest

from trioagent.mcp._convert import convert_content, convert_result, tool_spec
from trioagent.message import Base64Source, DataBlock, TextBlock, URLSource


def test_text_image_and_audio() -> None:
    blocks = convert_content(
        [
            types.TextContent(text="hello"),
            types.ImageContent(data="aGk=", mime_type="image/png"),
            types.AudioContent(data="AAAA", mime_type="audio/wav"),
        ]
    )
    assert isinstance(blocks[0], TextBlock)
    assert blocks[0].text == "hello"
    for block, media in zip(blocks[1:], ["image/png", "audio/wav"], strict=True):
        assert isinstance(block, DataBlock)
        assert isinstance(block.source, Base64Source)
        assert block.source.media_type == media
    assert blocks[1].source.data == "aGk="  # type: ignore[union-attr]


def test_an_embedded_text_resource_becomes_its_json() -> None:
    resource = types.TextResourceContents(uri="file:///a.txt", text="note", mime_type="text/plain")
    (block,) = convert_content([types.EmbeddedResource(resource=resource)])
    assert isinstance(block, TextBlock)
    assert json.loads(block.text)["text"] == "note"
    assert block.text == resource.model_dump_json(indent=2)


def test_an_embedded_blob_is_dropped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    blob = types.BlobResourceContents(uri="file:///a.bin", blob="AAAA")
    assert convert_content([types.EmbeddedResource(resource=blob)]) == []
    assert "BlobResourceContents" in caplog.text


def test_resource_links_become_url_blocks_or_a_note() -> None:
    link = types.ResourceLink(uri="https://example.com/r.pdf", name="r")
    typed = types.ResourceLink(uri="https://example.com/i.png", name="i", mime_type="image/png")
    bad = types.ResourceLink(uri="not a url", name="bad")
    first, second, third = convert_content([link, typed, bad])
    assert isinstance(first, DataBlock)
    assert isinstance(first.source, URLSource)
    assert first.source.url == "https://example.com/r.pdf"
    assert first.source.media_type == "application/octet-stream"
    assert second.source.media_type == "image/png"  # type: ignore[union-attr]
    assert isinstance(third, TextBlock)
    assert third.text == "<unconvertible MCP resource URI: not a url>"


def test_structured_content_is_added_only_without_text() -> None:
    only_structured = types.CallToolResult(content=[], structured_content={"n": 1, "é": "ü"})
    result = convert_result(only_structured)
    assert [b.text for b in result.content] == ['{"n": 1, "é": "ü"}']  # type: ignore[union-attr]
    both = types.CallToolResult(content=[types.TextContent(text="1")], structured_content={"n": 1})
    assert [b.text for b in convert_result(both).content] == ["1"]  # type: ignore[union-attr]
    error = types.CallToolResult(content=[types.TextContent(text="bad")], is_error=True)
    assert convert_result(error).is_error


def test_tool_spec_reads_the_read_only_hint() -> None:
    hinted = types.Tool(
        name="t",
        description="d",
        input_schema={"type": "object", "properties": {}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    )
    plain = types.Tool(name="u", input_schema={"type": "object"})
    assert tool_spec(hinted).read_only
    assert tool_spec(hinted).description == "d"
    assert not tool_spec(plain).read_only
    assert tool_spec(plain).input_schema == {"type": "object"}
