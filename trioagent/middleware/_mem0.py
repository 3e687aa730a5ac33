"""``Mem0Middleware``: long-term memory backed by mem0 (see :mod:`trioagent.memory` for the
clients it takes).

Three modes:

* ``static_control`` — every reply searches mem0 with the user's input and puts the memories
  in the context as an ``AssistantMsg(name="memory")`` holding one hint, right after the user
  message; the exchange (user text, final answer) is written back after the reply.
* ``agent_control`` — the model gets ``search_memory`` / ``add_memory`` tools (from
  :meth:`Mem0Middleware.list_tools`; put them in the toolkit yourself) and a system-prompt nudge;
  no automatic search or write.
* ``both`` (default) — both.
"""

from __future__ import annotations

import logging
from typing import Literal

from .._core.chain import Kwargs, NextHandler
from .._core.emit import Emit
from ..agent import AgentLike, ReplyItem
from ..event import ReplyStartEvent
from ..memory import (
    AddMemoryTool,
    Mem0Client,
    Mem0Memory,
    Mem0PlatformClient,
    SearchMemoryTool,
    extract_query_text,
    resolve_mem0_client,
)
from ..message import AssistantMsg, HintBlock, Msg
from ..tool import ToolBase
from ..types import ReplyFinishedReason
from ._base import MiddlewareBase

__all__ = [
    "DEFAULT_MEMORY_SECTION_HEADER",
    "DEFAULT_MEMORY_SECTION_INTRO",
    "DEFAULT_TOOL_INSTRUCTIONS",
    "Mem0Middleware",
]

logger = logging.getLogger("trioagent.middleware")

Mode = Literal["static_control", "agent_control", "both"]
MODES: tuple[str, ...] = ("static_control", "agent_control", "both")

DEFAULT_MEMORY_SECTION_HEADER = "## Relevant memories from past conversations"
DEFAULT_MEMORY_SECTION_INTRO = (
    "The following memories about the user may be relevant. Use them only if they are "
    "pertinent to the current request."
)
DEFAULT_TOOL_INSTRUCTIONS = (
    "## Long-term memory\n\n"
    "You have `search_memory` and `add_memory` tools available. Search when the conversation "
    "depends on something the user may have told you before; add when the user shares a "
    "durable fact or preference worth keeping for future conversations. Each tool's "
    "description gives its exact input."
)


class Mem0Middleware(MiddlewareBase):
    """Long-term memory in mem0 (hooks: ``on_reply``, ``on_system_prompt``; tools via
    :meth:`list_tools`).

    Args:
        user_id: the mem0 ``user_id`` (required, non-blank).
        client: an async mem0-style client (see :mod:`trioagent.memory`).  When given it wins;
            ``chat_model`` / ``embedding_model`` / ``mem0_config`` are then ignored with a
            warning.
        chat_model, embedding_model, mem0_config: what mem0's own OSS ``AsyncMemory`` is built
            from.  That needs the ``mem0`` package, which trioagent does not depend on (no
            vendor SDKs): after validating them, passing them without ``client`` raises
            ``NotImplementedError`` naming what to pass instead.
        mode: ``"static_control"``, ``"agent_control"`` or ``"both"``.
        agent_id: the mem0 ``agent_id`` to tag writes with (and to scope searches by).
        top_k: memories per automatic search (and the search tool's default is its own
            ``limit`` argument).
        threshold: the minimum similarity score passed to ``search`` (``None``: not passed).
        scope_search_by_agent: include ``agent_id`` in search filters (writes are always
            tagged with it).
        await_write: await the write-back (``True``) or run it in the agent's supervision
            nursery (``False``, see below).
        memory_section_header, memory_section_intro: the first lines of the memory hint.
        tool_instructions: appended to the system prompt in ``agent_control`` / ``both``.

    Without ``client`` and without models or config, a :class:`Mem0PlatformClient` is used
    when ``MEM0_API_KEY`` is set; :meth:`aclose` closes the HTTP client of such a client.

    Raises:
        ValueError: blank ``user_id``; unknown ``mode``; no backend at all; only one of
            ``chat_model`` / ``embedding_model`` without ``mem0_config``.
        NotImplementedError: models / config without ``client`` (see above).
        TypeError: the client's ``search`` or ``add`` is not async.

    Behaviour worth knowing:

    * The automatic search runs right after the reply's ``ReplyStartEvent`` was passed on, so
      an interruption during the search ends the started reply with one INTERRUPTED end.  The
      memory message still lands after the user message and before the reply's assistant
      message.
    * Only a reply that finished normally (``finished_reason == COMPLETED``) is written back:
      not the waiting text of a parked reply, nor an interrupted or failed reply.  An
      ``interrupt()`` that lands while the awaited write runs (after the COMPLETED end was
      delivered) cancels the write.
    * ``await_write=False``: trio has no fire-and-forget.  Inside ``async with agent:`` the
      write runs in the agent's supervision nursery (the reply returns without waiting;
      leaving the block cancels a write still running); otherwise it is awaited as with
      ``await_write=True``.  Failures are logged either way.
    * ``search_memory`` passes its ``limit`` per call (the middleware's ``top_k`` is never
      swapped), so concurrent calls cannot see each other's limit.
    """

    def __init__(
        self,
        *,
        user_id: str,
        client: object = None,
        chat_model: object = None,
        embedding_model: object = None,
        mem0_config: object = None,
        mode: Mode = "both",
        agent_id: str | None = None,
        top_k: int = 5,
        threshold: float | None = None,
        scope_search_by_agent: bool = True,
        await_write: bool = True,
        memory_section_header: str = DEFAULT_MEMORY_SECTION_HEADER,
        memory_section_intro: str = DEFAULT_MEMORY_SECTION_INTRO,
        tool_instructions: str = DEFAULT_TOOL_INSTRUCTIONS,
    ) -> None:
        if user_id is None or (isinstance(user_id, str) and not user_id.strip()):
            raise ValueError("Mem0Middleware requires a non-empty `user_id`.")
        if mode not in MODES:
            raise ValueError(
                f"Unknown mode {mode!r}; expected one of 'static_control', 'agent_control', 'both'."
            )
        resolved, self._owns_client = resolve_mem0_client(
            client, chat_model, embedding_model, mem0_config
        )
        self.memory = Mem0Memory(
            resolved,
            user_id=user_id,
            agent_id=agent_id,
            top_k=top_k,
            threshold=threshold,
            scope_search_by_agent=scope_search_by_agent,
        )
        self._mode: Mode = mode
        self._await_write = await_write
        self._memory_section_header = memory_section_header
        self._memory_section_intro = memory_section_intro
        self._tool_instructions = tool_instructions

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(user_id={self.memory.user_id!r}, "
            f"agent_id={self.memory.agent_id!r}, mode={self._mode!r})"
        )

    @property
    def client(self) -> Mem0Client:
        """The mem0 client in use."""
        return self.memory.client

    @property
    def mode(self) -> Mode:
        return self._mode

    async def aclose(self) -> None:
        """Close the HTTP client of a :class:`~trioagent.memory.Mem0PlatformClient` this
        middleware created (a client you passed is yours to close)."""
        client = self.memory.client
        if self._owns_client and isinstance(client, Mem0PlatformClient):
            await client.aclose()

    # -- hooks --------------------------------------------------------------------------------

    async def on_reply(
        self,
        agent: AgentLike,
        input_kwargs: Kwargs,
        next_handler: NextHandler[ReplyItem],
        emit: Emit[ReplyItem],
    ) -> None:
        if self._mode == "agent_control":
            await next_handler()
            return
        query = extract_query_text(input_kwargs.get("inputs"))
        searched = False
        final: Msg | None = None

        async def sink(item: ReplyItem) -> None:
            nonlocal searched, final
            if isinstance(item, Msg) and item.role == "assistant":
                final = item
            await emit(item)
            if isinstance(item, ReplyStartEvent) and query and not searched:
                searched = True
                memories = await self._search_logged(query)
                if memories:
                    agent.state.context.append(self._memory_message(memories))

        await next_handler(sink)
        if (
            query
            and final is not None
            and final.finished_reason == ReplyFinishedReason.COMPLETED
            and (answer := final.get_text_content())
        ):
            await self._dispatch_write(
                agent,
                [
                    {"role": "user", "content": query},
                    {"role": "assistant", "content": answer},
                ],
            )

    async def on_system_prompt(self, agent: AgentLike, current_prompt: str) -> str:
        if self._mode == "static_control":
            return current_prompt
        return f"{current_prompt}\n\n{self._tool_instructions}"

    async def list_tools(self) -> list[ToolBase]:
        """``[search_memory, add_memory]`` (fresh instances), or ``[]`` in
        ``static_control`` mode.  Put them in the agent's toolkit yourself."""
        if self._mode == "static_control":
            return []
        return [SearchMemoryTool(self.memory), AddMemoryTool(self.memory)]

    async def search(
        self, query: str, *, top_k: int | None = None, scoped: bool | None = None
    ) -> list[str]:
        """Search mem0 and return the memory texts (see :meth:`Mem0Memory.search`)."""
        return await self.memory.search(query, top_k=top_k, scoped=scoped)

    async def add(self, messages: list[dict[str, str]], *, infer: bool = True) -> object:
        """Add ``messages`` to mem0; returns mem0's result (see :meth:`Mem0Memory.add`)."""
        return await self.memory.add(messages, infer=infer)

    async def add_with_fallback(self, text: str) -> object:
        """Add ``text``, verbatim when mem0 extracts nothing from it."""
        return await self.memory.add_with_fallback(text)

    async def _search_logged(self, query: str) -> list[str]:
        try:
            return await self.search(query)
        except Exception as exc:  # the reply goes on without memories; Cancelled passes
            logger.warning(
                "Mem0Middleware: mem0 search failed for user_id=%s: %s", self.memory.user_id, exc
            )
            return []

    def _memory_message(self, memories: list[str]) -> Msg:
        bullets = "\n".join(f"- {m}" for m in memories)
        text = f"{self._memory_section_header}\n{self._memory_section_intro}\n{bullets}"
        return AssistantMsg("memory", [HintBlock(hint=text)])

    async def _dispatch_write(self, agent: AgentLike, messages: list[dict[str, str]]) -> None:
        if self._await_write or not agent.start_soon_supervised(self._write_logged, messages):
            await self._write_logged(messages)

    async def _write_logged(self, messages: list[dict[str, str]]) -> None:
        try:
            await self.add(messages)
        except Exception as exc:  # a failed write must not fail the reply; Cancelled passes
            logger.warning(
                "Mem0Middleware: mem0 add failed for user_id=%s: %s", self.memory.user_id, exc
            )
