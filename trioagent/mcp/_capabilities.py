"""What an MCP client answers for its server: sampling, elicitation, roots, and its log.

A client declares a capability only when it was given what answers it:

* **sampling** (``sampling/createMessage``): :class:`MCPSampling` — a model of the user's
  choosing answers the server's messages.  Each request is checked by a
  :class:`~trioagent.permission.PermissionEngine` as a call of the pseudo-tool
  ``mcp__{server}__sampling`` (rules, mode), exactly like a tool call; an ASK goes to the
  ``confirm`` callback, and without one the request is declined;
* **elicitation** (``elicitation/create``): an :data:`ElicitationCallback` returns the user's
  answer, or declines;
* **roots** (``roots/list``): the given directories, as ``file://`` URIs; with
  ``roots="agent"`` the working directories of the agent using the client (the process's
  cwd and its permission context's additional working directories), read at each request.

Server log messages (``notifications/message``) go to the ``trioagent.mcp`` logger at the
mapped level (``debug`` → DEBUG … ``emergency`` → CRITICAL), with the server's name.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Literal, TypedDict

import attrs
import mcp_types
import trio
from mcp.client.session import (
    ClientRequestContext,
    ElicitationFnT,
    ListRootsFnT,
    LoggingFnT,
    SamplingFnT,
)

from .._core.json_types import JSONObject
from ..message import AssistantMsg, Base64Source, DataBlock, Msg, SystemMsg, TextBlock, UserMsg
from ..model import ChatModelBase
from ..permission import (
    PermissionBehavior,
    PermissionContext,
    PermissionDecision,
    PermissionEngine,
    PermissionRule,
)
from ..tool import mcp_tool_name

__all__ = [
    "ElicitationCallback",
    "ElicitationContent",
    "MCPElicitation",
    "MCPSampling",
    "SamplingRequest",
    "ServerAnswers",
    "SessionCallbacks",
    "log_message",
    "roots_result",
    "session_callbacks",
]

logger = logging.getLogger("trioagent.mcp")

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


@attrs.frozen
class SamplingRequest:
    """A server's ``sampling/createMessage``, as the ``confirm`` callback sees it."""

    server: str
    messages: list[Msg]
    max_tokens: int


@attrs.frozen
class MCPElicitation:
    """A server's question (``elicitation/create``).

    ``schema`` is the form's JSON schema (form mode); ``url`` the page to open (URL mode).
    """

    server: str
    message: str
    schema: JSONObject | None = None
    url: str | None = None


#: The values of an accepted form (what the requested schema allows).
ElicitationContent = dict[str, str | int | float | bool | list[str] | None]
#: Answers an :class:`MCPElicitation`: ``("accept", content)``, ``("decline", None)`` or
#: ``("cancel", None)``.
ElicitationCallback = Callable[[MCPElicitation], Awaitable[tuple[str, ElicitationContent | None]]]


class _SamplingSubject:
    """The permission engine's view of one sampling request (rules name it like a tool)."""

    def __init__(self, server: str) -> None:
        self.name = mcp_tool_name(server, "sampling")

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        return PermissionDecision(
            behavior=PermissionBehavior.PASSTHROUGH,
            message="MCP sampling follows the permission rules.",
        )

    async def check_read_only(self, tool_input: JSONObject) -> bool:
        return False

    async def match_rule(self, rule_content: str | None, tool_input: JSONObject) -> bool:
        return rule_content is None

    async def generate_suggestions(self, tool_input: JSONObject) -> list[PermissionRule]:
        rule = PermissionRule(
            tool_name=self.name, behavior=PermissionBehavior.ALLOW, source="suggested"
        )
        return [rule]


@attrs.define
class MCPSampling:
    """Answer a server's sampling requests with ``model``.

    Args:
        model: the model that answers; ``None``: the model of the first agent built with a
            toolkit holding the client (see :meth:`MCPClient.adopt_agent_defaults`).
        permissions: checks each request as the pseudo-tool ``mcp__{server}__sampling``;
            ``None``: that agent's permission engine (its rules and mode), or a fresh engine
            in the default mode (which asks).  An allow rule for that name, or bypass mode,
            lets requests through without asking.
        confirm: asked when the engine says ASK; ``True`` allows.  Without it an ASK declines.
    """

    model: ChatModelBase | None = None
    permissions: PermissionEngine | None = None
    confirm: Callable[[SamplingRequest], Awaitable[bool]] | None = None

    async def answer(
        self, server: str, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        """Check the request, then let the model answer it (text only)."""
        model = self.model
        if model is None:
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message="The client has no model to answer sampling requests.",
            )
        messages = _sampling_messages(params)
        request = SamplingRequest(server=server, messages=messages, max_tokens=params.max_tokens)
        engine = self.permissions if self.permissions is not None else PermissionEngine()
        decision = await engine.check_permission(
            _SamplingSubject(server), {"max_tokens": params.max_tokens}
        )
        allowed = decision.behavior == PermissionBehavior.ALLOW
        if decision.behavior == PermissionBehavior.ASK and self.confirm is not None:
            allowed = await self.confirm(request)
        if not allowed:
            logger.info("Declined a sampling request of MCP server %r", server)
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message=f"The client declined the sampling request ({decision.message}).",
            )
        try:
            response = await model(messages)
        except Exception as exc:
            logger.warning("Sampling for MCP server %r failed: %s", server, type(exc).__name__)
            return mcp_types.ErrorData(
                code=mcp_types.INTERNAL_ERROR, message=f"sampling failed: {type(exc).__name__}"
            )
        text = "".join(b.text for b in response.content if isinstance(b, TextBlock))
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(text=text),
            model=model.model,
            stop_reason="endTurn",
        )


def _sampling_messages(params: mcp_types.CreateMessageRequestParams) -> list[Msg]:
    messages: list[Msg] = []
    if params.system_prompt:
        messages.append(SystemMsg("system", params.system_prompt))
    for message in params.messages:
        blocks: list[TextBlock | DataBlock] = []
        for item in message.content_as_list:
            if isinstance(item, mcp_types.TextContent):
                blocks.append(TextBlock(text=item.text))
            elif isinstance(item, mcp_types.ImageContent | mcp_types.AudioContent):
                blocks.append(
                    DataBlock(source=Base64Source(data=item.data, media_type=item.mime_type))
                )
        if message.role == "assistant":
            messages.append(AssistantMsg("assistant", blocks))
        else:
            messages.append(UserMsg("user", blocks))
    return messages


async def elicit(
    server: str, callback: ElicitationCallback, params: mcp_types.ElicitRequestParams
) -> mcp_types.ElicitResult:
    """Ask ``callback`` the server's question; a malformed answer is a cancel (logged)."""
    if isinstance(params, mcp_types.ElicitRequestURLParams):
        question = MCPElicitation(server=server, message=params.message, url=params.url)
    else:
        schema = params.requested_schema
        question = MCPElicitation(
            server=server,
            message=params.message,
            schema=schema if isinstance(schema, dict) else dict(schema),
        )
    action, content = await callback(question)
    if action not in ("accept", "decline", "cancel"):
        logger.warning("An elicitation callback answered %r; sending cancel", action)
        return mcp_types.ElicitResult(action="cancel")
    form = question.url is None  # a URL-mode answer carries no content
    return mcp_types.ElicitResult(
        action=action,  # type: ignore[arg-type]
        content=content if action == "accept" and form else None,
    )


def roots_result(directories: Sequence[str | os.PathLike[str]]) -> mcp_types.ListRootsResult:
    """The directories as roots (absolute ``file://`` URIs, named by their last part)."""
    roots = []
    for directory in directories:
        path = Path(directory).resolve()
        roots.append(mcp_types.Root(uri=path.as_uri(), name=path.name or str(path)))  # type: ignore[arg-type]
    return mcp_types.ListRootsResult(roots=roots)


def log_message(server: str, params: mcp_types.LoggingMessageNotificationParams) -> None:
    """One server log message into the ``trioagent.mcp`` logger at the mapped level."""
    level = _LEVELS.get(str(params.level), logging.INFO)
    source = f"{server}/{params.logger}" if params.logger else server
    logger.log(level, "MCP server %s: %s", source, params.data)


class SessionCallbacks(TypedDict, total=False):
    """The SDK session's answers to server requests (keyword arguments of ``mcp.Client``)."""

    sampling_callback: SamplingFnT
    elicitation_callback: ElicitationFnT
    list_roots_callback: ListRootsFnT
    logging_callback: LoggingFnT
    log_level: mcp_types.LoggingLevel | None


def session_callbacks(
    server: str,
    *,
    sampling: MCPSampling | None,
    elicitation: ElicitationCallback | None,
    roots: Callable[[], Sequence[str | os.PathLike[str]]] | None,
    log_level: mcp_types.LoggingLevel | None,
) -> SessionCallbacks:
    """A session's answers: a capability is declared only when something answers it."""
    callbacks: SessionCallbacks = {"log_level": log_level}

    async def on_log(params: mcp_types.LoggingMessageNotificationParams) -> None:
        log_message(server, params)
        await trio.lowlevel.checkpoint()

    callbacks["logging_callback"] = on_log
    if sampling is not None:

        async def on_sampling(
            context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
        ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
            return await sampling.answer(server, params)

        callbacks["sampling_callback"] = on_sampling
    if elicitation is not None:

        async def on_elicitation(
            context: ClientRequestContext, params: mcp_types.ElicitRequestParams
        ) -> mcp_types.ElicitResult:
            return await elicit(server, elicitation, params)

        callbacks["elicitation_callback"] = on_elicitation
    if roots is not None:
        directories = roots

        async def on_roots(context: ClientRequestContext) -> mcp_types.ListRootsResult:
            await trio.lowlevel.checkpoint()
            return roots_result(directories())

        callbacks["list_roots_callback"] = on_roots
    return callbacks


class ServerAnswers:
    """``MCPClient``'s side of the capabilities (a base class, to keep the client's module
    about connections): what its sessions answer, and an agent's defaults."""

    _name: str
    sampling: MCPSampling | None
    elicitation: ElicitationCallback | None
    roots: list[str | os.PathLike[str]] | Literal["agent"] | None
    log_level: mcp_types.LoggingLevel | None
    _agent_permissions: PermissionEngine | None = None

    def adopt_agent_defaults(self, model: ChatModelBase, permissions: PermissionEngine) -> None:
        """Called by an agent built with a toolkit holding this client: an
        :class:`MCPSampling` without a model (or permissions) takes the agent's, and
        ``roots="agent"`` lists its working directories.  The first agent wins; later ones
        change nothing."""
        if self._agent_permissions is None:
            self._agent_permissions = permissions
        sampling = self.sampling
        if sampling is not None and sampling.model is None:
            sampling.model = model
        if sampling is not None and sampling.permissions is None:
            sampling.permissions = permissions

    def _session_callbacks(self) -> SessionCallbacks:
        return session_callbacks(
            self._name,
            sampling=self.sampling,
            elicitation=self.elicitation,
            roots=None if self.roots is None else self._root_directories,
            log_level=self.log_level,
        )

    def _root_directories(self) -> list[str | os.PathLike[str]]:
        if self.roots != "agent":
            return list(self.roots or [])
        engine = self._agent_permissions
        extra = list(engine.context.working_directories) if engine is not None else []
        return [os.getcwd(), *extra]
