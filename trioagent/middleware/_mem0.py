"""``Mem0Middleware``: long-term memory backed by mem0 (reference/tools_middleware.md §8.7;
the seed's long-term memory section).

The storage is any *async* mem0-style client — an object whose ``search`` and ``add`` are
coroutine functions (or sync wrappers of coroutine functions, as mem0's own hosted client
has) called as::

    await client.search(query, filters={"user_id": ..., "agent_id": ...}, top_k=5,
                        threshold=0.3)                 # threshold only when configured
    await client.add(messages, user_id=..., agent_id=..., infer=False)  # agent_id / infer
                                                                       # only when needed

No vendor SDK is used: :class:`Mem0PlatformClient` (in :mod:`._mem0_client`) speaks the hosted
Mem0 REST API over httpx, and is the default client when ``MEM0_API_KEY`` is set.

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

import inspect
import logging
import os
from typing import Any, Literal

import trio

from .._core.chain import NextHandler
from .._core.concurrency import reraise_unwrapped
from .._core.emit import Emit
from ..event import (
    ExternalExecutionResultEvent,
    ReplyStartEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from ..message import AssistantMsg, HintBlock, Msg, TextBlock, ToolResultState
from ..permission import PermissionBehavior, PermissionContext, PermissionDecision
from ..tool import Emit as ToolEmit, ToolBase, ToolChunk
from ..types import ReplyFinishedReason
from ._base import MiddlewareBase
from ._mem0_client import API_KEY_ENV, Mem0APIError, Mem0PlatformClient

__all__ = [
    "DEFAULT_MEMORY_SECTION_HEADER",
    "DEFAULT_MEMORY_SECTION_INTRO",
    "DEFAULT_TOOL_INSTRUCTIONS",
    "Mem0APIError",
    "Mem0Middleware",
    "Mem0PlatformClient",
    "extract_memory_texts",
    "extract_query_text",
    "mem0_extracted_anything",
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


# -- helpers (pure) -----------------------------------------------------------------------------


def extract_query_text(inputs: Any) -> str | None:
    """The newline-joined texts of the user-role messages in ``inputs``; ``None`` for events,
    ``None`` or inputs without user text."""
    if inputs is None or isinstance(
        inputs, UserConfirmResultEvent | ExternalExecutionResultEvent | UserInterruptEvent
    ):
        return None
    msgs = list(inputs) if isinstance(inputs, list | tuple) else [inputs]
    texts = [
        text
        for m in msgs
        if isinstance(m, Msg) and m.role == "user" and (text := m.get_text_content())
    ]
    return "\n".join(texts) if texts else None


def extract_memory_texts(raw: Any) -> list[str]:
    """Flatten a search result: ``{"results": [...]}`` or a bare list, whose items are strings
    or dicts with ``memory`` (or ``text``); anything else gives ``[]``."""
    if raw is None:
        return []
    results = raw.get("results", raw) if isinstance(raw, dict) else raw
    if not isinstance(results, list):
        return []
    texts: list[str] = []
    for item in results:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, dict):
            text = item.get("memory") or item.get("text")
            if text:
                texts.append(str(text))
    return texts


def mem0_extracted_anything(raw: Any) -> bool:
    """Whether an ``add`` result reports extracted memories (a non-empty ``results`` list)."""
    if not isinstance(raw, dict):
        return False
    results = raw.get("results")
    return isinstance(results, list) and len(results) > 0


def _looks_async(method: Any) -> bool:
    """A coroutine function, possibly behind sync ``functools.wraps`` wrappers."""
    return method is not None and inspect.iscoroutinefunction(inspect.unwrap(method))


def _error_chunk(text: str) -> ToolChunk:
    return ToolChunk(content=[TextBlock(text=text)], state=ToolResultState.ERROR)


# -- the middleware -----------------------------------------------------------------------------


class Mem0Middleware(MiddlewareBase):
    """Long-term memory in mem0 (hooks: ``on_reply``, ``on_system_prompt``; tools via
    :meth:`list_tools`).

    Args:
        user_id: the mem0 ``user_id`` (required, non-blank).
        client: an async mem0-style client (see the module docstring).  When given it wins;
            ``chat_model`` / ``embedding_model`` / ``mem0_config`` are then ignored with a
            warning.
        chat_model, embedding_model, mem0_config: the reference builds mem0's OSS
            ``AsyncMemory`` from these.  That needs the ``mem0`` package, which trioagent does
            not depend on (no vendor SDKs): after the reference's validations, passing them
            without ``client`` raises ``NotImplementedError`` naming what to pass instead.
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

    Differences from the reference, deliberately:

    * The automatic search runs right after the reply's ``ReplyStartEvent`` was passed on
      (the reference searches before the reply starts).  The memory message still lands after
      the user message and before the reply's assistant message, and an interruption during
      the search now ends the started reply with one INTERRUPTED end instead of producing no
      events at all.
    * Only a reply that finished normally (``finished_reason == COMPLETED``) is written back.
      The reference also writes the "I'm waiting for your permission..." text of a parked
      reply (a quirk); an interrupted or failed reply is not written either.  An
      ``interrupt()`` that lands while the awaited write runs (after the COMPLETED end was
      delivered) cancels the write.
    * ``await_write=False``: trio has no fire-and-forget.  Inside ``async with agent:`` the
      write runs in the agent's supervision nursery (the reply returns without waiting;
      leaving the block cancels a write still running); otherwise it is awaited as with
      ``await_write=True``.  Failures are logged either way.
    * ``search_memory`` passes its ``limit`` per call instead of swapping the instance's
      ``top_k`` for the duration of the call, so concurrent calls cannot see each other's
      limit.
    """

    def __init__(
        self,
        *,
        user_id: str,
        client: Any = None,
        chat_model: Any = None,
        embedding_model: Any = None,
        mem0_config: Any = None,
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
        self._owns_client = False
        self._client = self._resolve_client(client, chat_model, embedding_model, mem0_config)
        self._user_id = user_id
        self._agent_id = agent_id
        self._mode: Mode = mode
        self._top_k = top_k
        self._threshold = threshold
        self._scope_search_by_agent = scope_search_by_agent
        self._await_write = await_write
        self._memory_section_header = memory_section_header
        self._memory_section_intro = memory_section_intro
        self._tool_instructions = tool_instructions

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(user_id={self._user_id!r}, agent_id={self._agent_id!r}, "
            f"mode={self._mode!r})"
        )

    @property
    def client(self) -> Any:
        """The mem0 client in use."""
        return self._client

    @property
    def mode(self) -> Mode:
        return self._mode

    def _resolve_client(
        self, client: Any, chat_model: Any, embedding_model: Any, mem0_config: Any
    ) -> Any:
        if client is not None:
            ignored = [
                name
                for name, value in (
                    ("chat_model", chat_model),
                    ("embedding_model", embedding_model),
                    ("mem0_config", mem0_config),
                )
                if value is not None
            ]
            if ignored:
                logger.warning(
                    "Mem0Middleware: `client` was provided, so %s %s ignored. Configure the "
                    "mem0 client itself instead.",
                    ", ".join(ignored),
                    "is" if len(ignored) == 1 else "are",
                )
        else:
            no_models = chat_model is None and embedding_model is None
            if mem0_config is None and no_models:
                if os.environ.get(API_KEY_ENV):
                    client = Mem0PlatformClient()
                    self._owns_client = True
                else:
                    raise ValueError(
                        "Mem0Middleware needs one of: a pre-built `client`, a `mem0_config`, "
                        f"or both `chat_model` and `embedding_model` (or set {API_KEY_ENV} to "
                        "use the hosted Mem0 platform)."
                    )
            elif mem0_config is None and (chat_model is None) != (embedding_model is None):
                raise ValueError(
                    "Mem0Middleware: `chat_model` and `embedding_model` must be passed together "
                    "when `mem0_config` is not given."
                )
            else:
                raise NotImplementedError(
                    "Mem0Middleware cannot build mem0's OSS AsyncMemory from chat_model / "
                    "embedding_model / mem0_config: trioagent does not depend on the mem0 "
                    "package. Pass `client=` instead — a mem0 AsyncMemory you built yourself, "
                    "a Mem0PlatformClient (hosted Mem0), or any object with async "
                    "`search(query, filters=..., top_k=...)` and `add(messages, user_id=...)`."
                )
        if not (
            _looks_async(getattr(client, "search", None))
            and _looks_async(getattr(client, "add", None))
        ):
            raise TypeError(
                "Mem0Middleware requires an async mem0 client (async `search` and `add`, e.g. "
                "mem0.AsyncMemory, mem0.AsyncMemoryClient or Mem0PlatformClient); the "
                "synchronous Memory / MemoryClient are not supported."
            )
        return client

    async def aclose(self) -> None:
        """Close the HTTP client of a :class:`Mem0PlatformClient` this middleware created
        (a client you passed is yours to close)."""
        if self._owns_client:
            await self._client.aclose()

    # -- hooks --------------------------------------------------------------------------------

    async def on_reply(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: NextHandler, emit: Emit
    ) -> None:
        if self._mode == "agent_control":
            await next_handler()
            return
        query = extract_query_text(input_kwargs.get("inputs"))
        searched = False
        final: Msg | None = None

        async def sink(item: Any) -> None:
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

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        if self._mode == "static_control":
            return current_prompt
        return f"{current_prompt}\n\n{self._tool_instructions}"

    async def list_tools(self) -> list[ToolBase]:
        """``[search_memory, add_memory]`` (fresh instances), or ``[]`` in
        ``static_control`` mode.  Put them in the agent's toolkit yourself."""
        if self._mode == "static_control":
            return []
        return [SearchMemoryTool(self), AddMemoryTool(self)]

    # -- mem0 calls -----------------------------------------------------------------------------

    async def search(
        self, query: str, *, top_k: int | None = None, scoped: bool | None = None
    ) -> list[str]:
        """Search mem0 and return the memory texts.

        Filters: ``user_id``, plus ``agent_id`` when set and ``scoped`` (default:
        ``scope_search_by_agent``).  ``top_k`` defaults to the middleware's.
        """
        scoped = self._scope_search_by_agent if scoped is None else scoped
        filters: dict[str, Any] = {"user_id": self._user_id}
        if self._agent_id and scoped:
            filters["agent_id"] = self._agent_id
        kwargs: dict[str, Any] = {
            "filters": filters,
            "top_k": self._top_k if top_k is None else top_k,
        }
        if self._threshold is not None:
            kwargs["threshold"] = self._threshold
        return extract_memory_texts(await self._client.search(query, **kwargs))

    async def add(self, messages: list[dict[str, str]], *, infer: bool = True) -> Any:
        """Add ``messages`` under ``user_id`` (and ``agent_id`` when set); returns mem0's
        result.  ``infer=False`` stores the text as is."""
        kwargs: dict[str, Any] = {"user_id": self._user_id}
        if self._agent_id:
            kwargs["agent_id"] = self._agent_id
        if not infer:
            kwargs["infer"] = False
        return await self._client.add(messages, **kwargs)

    async def add_with_fallback(self, text: str) -> Any:
        """Add ``text`` as a user message; when mem0 extracts nothing, add it again with
        ``infer=False`` so it is kept verbatim."""
        messages = [{"role": "user", "content": text, "name": "user"}]
        result = await self.add(messages)
        if mem0_extracted_anything(result):
            return result
        return await self.add(messages, infer=False)

    async def _search_logged(self, query: str) -> list[str]:
        try:
            return await self.search(query)
        except Exception as exc:  # the reply goes on without memories; Cancelled passes
            logger.warning(
                "Mem0Middleware: mem0 search failed for user_id=%s: %s", self._user_id, exc
            )
            return []

    def _memory_message(self, memories: list[str]) -> Msg:
        bullets = "\n".join(f"- {m}" for m in memories)
        text = f"{self._memory_section_header}\n{self._memory_section_intro}\n{bullets}"
        return AssistantMsg("memory", [HintBlock(hint=text)])

    async def _dispatch_write(self, agent: Any, messages: list[dict[str, str]]) -> None:
        if self._await_write or not agent.start_soon_supervised(self._write_logged, messages):
            await self._write_logged(messages)

    async def _write_logged(self, messages: list[dict[str, str]]) -> None:
        try:
            await self.add(messages)
        except Exception as exc:  # a failed write must not fail the reply; Cancelled passes
            logger.warning("Mem0Middleware: mem0 add failed for user_id=%s: %s", self._user_id, exc)


# -- tools ---------------------------------------------------------------------------------------


class _MemoryTool(ToolBase):
    """A memory tool bound to its middleware; always allowed (no permission prompt)."""

    def __init__(self, middleware: Mem0Middleware) -> None:
        super().__init__()
        self.middleware = middleware

    async def check_permissions(
        self, tool_input: dict[str, Any], context: PermissionContext
    ) -> PermissionDecision:
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message="auto-allowed: mem0 long-term memory tool",
        )


class SearchMemoryTool(_MemoryTool):
    """``search_memory(keywords, limit=5)``: one concurrent search per keyword, merged."""

    name = "search_memory"
    description = (
        "Retrieve memories about the user from long-term memory. Give short, targeted "
        "keywords (a name, a date, a place, a phrase describing what you want to recall); "
        "each keyword is searched on its own and the results are merged without duplicates."
    )
    input_schema = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "keywords": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Short search phrases, each searched independently.",
            },
            "limit": {
                "type": "integer",
                "default": 5,
                "description": "The maximum number of memories to retrieve per keyword.",
            },
        },
        "required": ["keywords"],
    }
    is_read_only = True
    is_concurrency_safe = True

    async def call(self, emit: ToolEmit, /, **kwargs: Any) -> Any:
        keywords: list[str] = list(kwargs.get("keywords") or [])
        limit = kwargs.get("limit")
        limit = 5 if limit is None else limit
        if not keywords:
            return "(no keywords supplied — nothing to search)"
        results: list[list[str]] = [[] for _ in keywords]
        errors: list[Exception] = []

        async def one(index: int, keyword: str, nursery: trio.Nursery) -> None:
            try:
                results[index] = await self.middleware.search(keyword, top_k=limit)
            except Exception as exc:  # reported as an error chunk; Cancelled passes
                errors.append(exc)
                nursery.cancel_scope.cancel()  # as a failed gather: the siblings stop

        try:
            async with trio.open_nursery() as nursery:
                for index, keyword in enumerate(keywords):
                    nursery.start_soon(one, index, keyword, nursery)
        except BaseExceptionGroup as group:
            reraise_unwrapped(group)
        if errors:
            return _error_chunk(f"Error retrieving memory: {errors[0]}")
        merged: list[str] = []
        for texts in results:
            for text in texts:
                if text not in merged:
                    merged.append(text)
        if not merged:
            return "(no relevant memories found)"
        return "\n".join(f"- {m}" for m in merged)


class AddMemoryTool(_MemoryTool):
    """``add_memory(thinking, content)``: record facts; only ``content`` reaches mem0."""

    name = "add_memory"
    description = (
        "Record important information about the user in long-term memory for future "
        "conversations. Each content item should be one specific, self-contained fact (who, "
        "what, when, where, why). Do not re-add facts a `search_memory` result already showed."
    )
    input_schema = {  # noqa: RUF012
        "type": "object",
        "properties": {
            "thinking": {
                "type": "string",
                "description": (
                    "Why this is worth remembering. Kept in the transcript, not stored in memory."
                ),
            },
            "content": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The facts to remember, one complete sentence per item.",
            },
        },
        "required": ["thinking", "content"],
    }
    is_read_only = False
    is_concurrency_safe = False

    async def call(self, emit: ToolEmit, /, **kwargs: Any) -> Any:
        thinking: str = kwargs.get("thinking") or ""
        content: list[str] = list(kwargs.get("content") or [])
        if not content:
            return _error_chunk("`content` is empty — nothing to record.")
        try:
            result = await self.middleware.add_with_fallback("\n".join(content))
        except Exception as exc:  # reported as an error chunk; Cancelled passes
            return _error_chunk(f"Error recording memory: {exc}")
        rationale = f" (rationale: {thinking})" if thinking else ""
        return f"Successfully recorded to memory{rationale} → {result}"
