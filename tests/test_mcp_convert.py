"""MCP content → our blocks (``trioagent/mcp/_convert.py``), on the SDK's own wire types.

A real server's mixed content is checked end to end in ``test_mcp_tool.py``; here each rule
is pinned on its own, including the cases a server rarely sends (blobs, bad URIs, structured
content with and without text), and how a listing becomes the tools the model is offered
(names, annotations, task-only tools).
"""

from __future__ import annotations

import json
import logging
import re

import mcp_types as types
import pytest

from trioagent.mcp._client import MAX_SERVER_NAME
from trioagent.mcp._convert import convert_content, convert_result, offered_tools, tool_spec
from trioagent.message import Base64Source, DataBlock, TextBlock
from trioagent.tool import mcp_tool_name

PROVIDER_SAFE = re.compile(r"[a-zA-Z0-9_-]{1,64}")


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


def test_an_embedded_text_resource_becomes_its_wire_json() -> None:
    resource = types.TextResourceContents(uri="file:///a.txt", text="note", mime_type="text/plain")
    (block,) = convert_content([types.EmbeddedResource(resource=resource)])
    assert isinstance(block, TextBlock)
    # The protocol's field names, absent fields left out: no mime_type, no "meta": null.
    assert json.loads(block.text) == {
        "uri": "file:///a.txt",
        "mimeType": "text/plain",
        "text": "note",
    }


def test_an_embedded_blob_becomes_a_data_block() -> None:
    typed = types.BlobResourceContents(uri="file:///a.png", blob="aGk=", mime_type="image/png")
    untyped = types.BlobResourceContents(uri="file:///a.bin", blob="AAAA")
    first, second = convert_content(
        [types.EmbeddedResource(resource=typed), types.EmbeddedResource(resource=untyped)]
    )
    assert isinstance(first, DataBlock)
    assert isinstance(first.source, Base64Source)
    assert (first.source.data, first.source.media_type) == ("aGk=", "image/png")
    assert first.name == "file:///a.png"
    assert isinstance(second, DataBlock)
    assert second.source.media_type == "application/octet-stream"


def test_resource_links_keep_their_name_and_description() -> None:
    link = types.ResourceLink(
        uri="demo://resource/1",
        name="doc-1",
        description="The first document",
        mime_type="text/plain",
    )
    (block,) = convert_content([link], read_tool="mcp__srv__read_resource")
    assert isinstance(block, TextBlock)
    head, how = block.text.rsplit("\n", 1)
    assert json.loads(head) == {
        "type": "resource_link",
        "uri": "demo://resource/1",
        "name": "doc-1",
        "description": "The first document",
        "mimeType": "text/plain",
    }
    assert how == "Read it with the tool mcp__srv__read_resource."
    (bare,) = convert_content([link])
    assert json.loads(bare.text)["name"] == "doc-1"  # type: ignore[union-attr]


def test_structured_content_is_added_only_without_text() -> None:
    only_structured = types.CallToolResult(content=[], structured_content={"n": 1, "é": "ü"})
    result = convert_result(only_structured)
    assert [b.text for b in result.content] == ['{"n": 1, "é": "ü"}']  # type: ignore[union-attr]
    both = types.CallToolResult(content=[types.TextContent(text="1")], structured_content={"n": 1})
    assert [b.text for b in convert_result(both).content] == ["1"]  # type: ignore[union-attr]
    error = types.CallToolResult(content=[types.TextContent(text="bad")], is_error=True)
    assert convert_result(error).is_error


def test_tool_spec_reads_every_annotation() -> None:
    hinted = types.Tool(
        name="t",
        description="d",
        input_schema={"type": "object", "properties": {}},
        output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        annotations=types.ToolAnnotations(
            title="Annotated", read_only_hint=True, destructive_hint=False, open_world_hint=True
        ),
    )
    plain = types.Tool(name="u", input_schema={"type": "object"})
    spec = tool_spec(hinted)
    assert spec.read_only
    assert spec.description == "d"
    assert (spec.title, spec.destructive, spec.open_world) == ("Annotated", False, True)
    assert spec.output_schema == {"type": "object", "properties": {"n": {"type": "integer"}}}
    bare = tool_spec(plain)
    assert not bare.read_only
    assert (bare.title, bare.destructive, bare.open_world, bare.output_schema) == (None,) * 4
    assert bare.input_schema == {"type": "object"}
    titled = types.Tool(name="v", title="Top", input_schema={"type": "object"})
    assert tool_spec(titled).title == "Top"  # the tool's own title wins over the annotation


# -- names -------------------------------------------------------------------------------------


def test_valid_names_are_kept_and_others_mapped_stably_within_64_characters() -> None:
    assert mcp_tool_name("srv", "echo") == "mcp__srv__echo"
    long_server = "s" * MAX_SERVER_NAME
    for tool in ["files.read:v2", "x" * 200, "ünïcode tool", "a" * 60]:
        name = mcp_tool_name(long_server, tool)
        assert PROVIDER_SAFE.fullmatch(name), name
        assert name == mcp_tool_name(long_server, tool)  # stable
    # Names that clean or shorten to the same text still differ.
    assert mcp_tool_name("srv", "a.b") != mcp_tool_name("srv", "a:b")
    assert mcp_tool_name("srv", "y" * 100) != mcp_tool_name("srv", "y" * 101)


def _tool(name: str, **extra: object) -> types.Tool:
    return types.Tool(name=name, input_schema={"type": "object"}, **extra)  # type: ignore[arg-type]


def test_offered_tools_never_share_a_name() -> None:
    hashed = mcp_tool_name("srv", "a.b")
    listing = [_tool("a.b"), _tool(hashed.removeprefix("mcp__srv__")), _tool("read_resource")]
    offered = offered_tools("srv", listing, reserved=["mcp__srv__read_resource"])
    names = [name for name, _ in offered]
    assert len(set(names)) == len(names) == 3
    assert names[0] == hashed
    # The later tool whose plain name was taken takes the suffixed form; so does the one
    # named like the reserved resource reader.
    assert names[1] == mcp_tool_name("srv", hashed.removeprefix("mcp__srv__"), hashed=True)
    assert names[2] == mcp_tool_name("srv", "read_resource", hashed=True)
    assert [spec.name for _, spec in offered] == [
        "a.b",
        hashed.removeprefix("mcp__srv__"),
        "read_resource",
    ]


def test_task_only_tools_are_offered_only_with_task_calls(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "trioagent.mcp")
    listing = [
        _tool("research", execution=types.ToolExecution(task_support="required")),
        _tool("either", execution=types.ToolExecution(task_support="optional")),
        _tool("plain"),
    ]
    assert [spec.name for _, spec in offered_tools("srv", listing)] == ["either", "plain"]
    assert "'research'" in caplog.text
    assert "task-augmented" in caplog.text
    # A connection that takes task-augmented calls offers it (the client calls it as a task).
    offered = offered_tools("srv", listing, task_calls=True)
    assert [spec.name for _, spec in offered] == ["research", "either", "plain"]


async def test_structured_content_that_breaks_the_output_schema_is_an_error() -> None:
    """A real (in-process) server whose tool declares an ``outputSchema`` and answers with
    structured content that breaks it: the call is an error the model reads; good content
    passes and is kept."""
    from mcp.server.lowlevel import Server
    from mcp_kit import InProcessClient

    from trioagent.tool import MCPCallError

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    tool = types.Tool(name="count", input_schema={"type": "object"}, output_schema=schema)

    async def list_tools(ctx: object, params: object) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
        value = (params.arguments or {}).get("value")
        return types.CallToolResult(content=[], structured_content={"n": value})

    server = Server("typed", on_list_tools=list_tools, on_call_tool=call_tool)
    async with InProcessClient("typed", server) as client:
        (listed,) = client.listed_tools()
        assert listed.spec.output_schema == schema  # type: ignore[attr-defined]
        good = await client.call_tool("count", {"value": 3})
        assert [b.text for b in good.content] == ['{"n": 3}']  # type: ignore[union-attr]
        with pytest.raises(MCPCallError, match="Invalid structured content"):
            await client.call_tool("count", {"value": "three"})
