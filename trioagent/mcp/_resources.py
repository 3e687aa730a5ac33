"""A server's resources and prompts: what :class:`~trioagent.mcp.MCPClient` lists and reads.

The listings become small attrs records (the server's names kept, wire types left behind);
a read resource becomes blocks (a text resource its text, a binary one a base64
:class:`DataBlock`); a prompt becomes messages ready for an agent.

:class:`MCPResourceReader` is the built-in tool through which the model reads what a server
links to (``resource_link`` content): ``mcp__{server}__read_resource``.  Reading is a
read-only call, so the permission engine allows it unless a deny or ask rule matches; a
rule's content is a URI prefix (``"file:///secrets/"``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
import mcp_types
from mcp import Client

from .._core.json_types import JSONObject, JSONValue
from ..message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
    ToolResultState,
    UserMsg,
)
from ..tool import Emit, ToolBase, ToolChunk, mcp_tool_name
from ._convert import convert_content
from ._errors import MCPClientError, describe

__all__ = [
    "MCPPrompt",
    "MCPPromptArgument",
    "MCPResource",
    "MCPResourceReader",
    "MCPResourceTemplate",
    "ResourcesAndPrompts",
    "prompt_messages",
    "read_blocks",
]

_OCTET_STREAM = "application/octet-stream"


@attrs.frozen(kw_only=True)
class MCPResource:
    """A resource the server can read."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None


@attrs.frozen(kw_only=True)
class MCPResourceTemplate:
    """A family of resources: ``uri_template`` is an RFC 6570 URI template."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


@attrs.frozen(kw_only=True)
class MCPPromptArgument:
    """One argument of a prompt."""

    name: str
    description: str | None = None
    required: bool = False


@attrs.frozen(kw_only=True)
class MCPPrompt:
    """A prompt the server offers."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[MCPPromptArgument] = attrs.field(factory=list)


def resource(item: mcp_types.Resource) -> MCPResource:
    return MCPResource(
        uri=str(item.uri),
        name=item.name,
        title=item.title,
        description=item.description,
        mime_type=item.mime_type,
        size=item.size,
    )


def template(item: mcp_types.ResourceTemplate) -> MCPResourceTemplate:
    return MCPResourceTemplate(
        uri_template=item.uri_template,
        name=item.name,
        title=item.title,
        description=item.description,
        mime_type=item.mime_type,
    )


def prompt(item: mcp_types.Prompt) -> MCPPrompt:
    return MCPPrompt(
        name=item.name,
        title=item.title,
        description=item.description,
        arguments=[
            MCPPromptArgument(name=a.name, description=a.description, required=bool(a.required))
            for a in item.arguments or ()
        ],
    )


def read_blocks(result: mcp_types.ReadResourceResult) -> list[TextBlock | DataBlock]:
    """A read resource's contents: a text part as its text, a binary part as base64 data."""
    blocks: list[TextBlock | DataBlock] = []
    for contents in result.contents:
        if isinstance(contents, mcp_types.TextResourceContents):
            blocks.append(TextBlock(text=contents.text))
        else:
            media_type = contents.mime_type or _OCTET_STREAM
            source = Base64Source(data=contents.blob, media_type=media_type)
            blocks.append(DataBlock(source=source, name=str(contents.uri)))
    return blocks


def prompt_messages(
    result: mcp_types.GetPromptResult, *, read_tool: str | None = None
) -> list[Msg]:
    """A prompt's messages as user and assistant messages (content converted like a tool
    result's); consecutive messages are kept apart, as the server sent them."""
    messages: list[Msg] = []
    for message in result.messages:
        blocks = convert_content([message.content], read_tool=read_tool)
        if message.role == "assistant":
            messages.append(AssistantMsg("assistant", blocks))
        else:
            messages.append(UserMsg("user", blocks))
    return messages


#: ``read(uri)`` → the blocks; raises on failure (the message is what the model reads).
ResourceRead = Callable[[str], Awaitable[list[TextBlock | DataBlock]]]


class MCPResourceReader(ToolBase):
    """``mcp__{server}__read_resource``: the model reads one of the server's resources.

    Args:
        server: the server's name.
        read: reads a URI (:meth:`MCPClient.read_resource`).
        name: the tool's name (default ``mcp__{server}__read_resource``).
    """

    is_read_only = True
    is_concurrency_safe = True
    is_mcp = True
    input_schema: JSONObject = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "uri": {"type": "string", "description": "The URI of the resource to read."}
        },
        "required": ["uri"],
    }

    def __init__(self, server: str, read: ResourceRead, *, name: str | None = None) -> None:
        super().__init__()
        self.mcp_name = server
        self.name = name or mcp_tool_name(server, "read_resource")
        self.description = (
            f"Read a resource of the MCP server {server!r} by its URI (for example one a tool "
            "result linked to)."
        )
        self._read = read

    def __repr__(self) -> str:
        return f"MCPResourceReader({self.name!r})"

    async def match_rule(self, rule_content: str | None, tool_input: JSONObject) -> bool:
        """A rule's content is a URI prefix; no content matches every read."""
        if not rule_content:
            return True
        uri = tool_input.get("uri")
        return isinstance(uri, str) and uri.startswith(rule_content)

    async def call(self, emit: Emit, /, **kwargs: JSONValue) -> ToolChunk:
        """Read the resource; a failure is an error result naming the URI."""
        uri = kwargs.get("uri")
        if not isinstance(uri, str) or not uri:
            return _error("Error: 'uri' must be a non-empty string.")
        try:
            blocks = await self._read(uri)
        except Exception as exc:
            return _error(f"Error reading MCP resource {uri!r}: {exc}")
        return ToolChunk(content=list(blocks))


def _error(text: str) -> ToolChunk:
    return ToolChunk(content=[TextBlock(text=text)], state=ToolResultState.ERROR)


_T = TypeVar("_T")


class ResourcesAndPrompts:
    """``MCPClient``'s resources and prompts API (a base class, to keep the client's module
    about connections): each method runs one request on the client's session."""

    _name: str
    resource_tool: bool
    _has_resources: bool

    async def _with_session(self, operation: Callable[[Client], Awaitable[_T]]) -> _T:
        """Run ``operation`` on the client's session (``MCPClient`` implements it)."""
        raise NotImplementedError

    @property
    def _reader_name(self) -> str | None:
        """The name of the resource-reading tool, when the server has resources."""
        if not (self.resource_tool and self._has_resources):
            return None
        return mcp_tool_name(self._name, "read_resource")

    async def _request(self, what: str, operation: Callable[[Client], Awaitable[_T]]) -> _T:
        """Run ``operation`` on the session; a failure raises :class:`MCPClientError`."""
        try:
            return await self._with_session(operation)
        except MCPClientError:
            raise
        except Exception as exc:
            raise MCPClientError(
                f"{what} of MCP server {self._name!r} failed: {describe(exc)}"
            ) from None

    async def list_resources(self) -> list[MCPResource]:
        """The server's resources (every page).

        Raises:
            MCPClientError: not connected, or the server failed to answer.
        """

        async def fetch(session: Client) -> list[MCPResource]:
            items: list[MCPResource] = []
            cursor: str | None = None
            while True:
                page = await session.list_resources(cursor=cursor)
                items.extend(resource(item) for item in page.resources)
                if (cursor := page.next_cursor) is None:
                    return items

        return await self._request("listing the resources", fetch)

    async def list_resource_templates(self) -> list[MCPResourceTemplate]:
        """The server's resource templates (every page).

        Raises:
            MCPClientError: not connected, or the server failed to answer.
        """

        async def fetch(session: Client) -> list[MCPResourceTemplate]:
            items: list[MCPResourceTemplate] = []
            cursor: str | None = None
            while True:
                page = await session.list_resource_templates(cursor=cursor)
                items.extend(template(item) for item in page.resource_templates)
                if (cursor := page.next_cursor) is None:
                    return items

        return await self._request("listing the resource templates", fetch)

    async def read_resource(self, uri: str) -> list[TextBlock | DataBlock]:
        """Read the resource ``uri``: a text part as its text, a binary part as base64 data.

        Raises:
            MCPClientError: not connected, or the server could not read it.
        """

        async def fetch(session: Client) -> list[TextBlock | DataBlock]:
            return read_blocks(await session.read_resource(uri))

        return await self._request(f"reading {uri!r}", fetch)

    async def list_prompts(self) -> list[MCPPrompt]:
        """The server's prompts (every page).

        Raises:
            MCPClientError: not connected, or the server failed to answer.
        """

        async def fetch(session: Client) -> list[MCPPrompt]:
            items: list[MCPPrompt] = []
            cursor: str | None = None
            while True:
                page = await session.list_prompts(cursor=cursor)
                items.extend(prompt(item) for item in page.prompts)
                if (cursor := page.next_cursor) is None:
                    return items

        return await self._request("listing the prompts", fetch)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> list[Msg]:
        """The prompt ``name`` filled with ``arguments``, as user and assistant messages.

        Raises:
            MCPClientError: not connected, or the server refused (a missing argument, ...).
        """

        async def fetch(session: Client) -> list[Msg]:
            result = await session.get_prompt(name, arguments)
            return prompt_messages(result, read_tool=self._reader_name)

        return await self._request(f"getting the prompt {name!r}", fetch)
