"""Long-term memory in mem0: one user's memories in any async mem0-style store.

The store is any *async* mem0-style client — an object whose ``search`` and ``add`` are
coroutine functions (or sync wrappers of coroutine functions, as mem0's own hosted client
has) called as::

    await client.search(query, filters={"user_id": ..., "agent_id": ...}, top_k=5,
                        threshold=0.3)                 # threshold only when configured
    await client.add(messages, user_id=..., agent_id=..., infer=False)  # agent_id / infer
                                                                       # only when needed

No vendor SDK is used: :class:`Mem0PlatformClient` speaks the hosted Mem0 REST API over httpx2,
and is the default client when ``MEM0_API_KEY`` is set.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Awaitable
from typing import Protocol, TypedDict, cast

from ..event import ExternalExecutionResultEvent, UserConfirmResultEvent, UserInterruptEvent
from ..message import Msg
from ._mem0_client import API_KEY_ENV, Mem0PlatformClient

__all__ = [
    "Mem0Client",
    "Mem0Memory",
    "extract_memory_texts",
    "extract_query_text",
    "mem0_extracted_anything",
    "resolve_mem0_client",
]

# The logger of the middleware that runs this memory for the agent.
logger = logging.getLogger("trioagent.middleware")


class Mem0Client(Protocol):
    """What is used of a mem0 client: its async ``search`` and ``add``, called with these
    keyword arguments (``threshold``, ``agent_id`` and ``infer`` only when needed)."""

    def search(
        self, query: str, /, *, filters: dict[str, str], top_k: int, threshold: float = ...
    ) -> Awaitable[object]: ...

    def add(
        self,
        messages: list[dict[str, str]],
        /,
        *,
        user_id: str,
        agent_id: str = ...,
        infer: bool = ...,
    ) -> Awaitable[object]: ...


class _SearchOptions(TypedDict, total=False):
    threshold: float


class _AddOptions(TypedDict, total=False):
    agent_id: str
    infer: bool


def extract_query_text(inputs: object) -> str | None:
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


def extract_memory_texts(raw: object) -> list[str]:
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


def mem0_extracted_anything(raw: object) -> bool:
    """Whether an ``add`` result reports extracted memories (a non-empty ``results`` list)."""
    if not isinstance(raw, dict):
        return False
    results = raw.get("results")
    return isinstance(results, list) and len(results) > 0


def _looks_async(method: object) -> bool:
    """A coroutine function, possibly behind sync ``functools.wraps`` wrappers."""
    return callable(method) and inspect.iscoroutinefunction(inspect.unwrap(method))


def resolve_mem0_client(
    client: object, chat_model: object, embedding_model: object, mem0_config: object
) -> tuple[Mem0Client, bool]:
    """The client to use, and whether it was created here (and so is to be closed here).

    A given ``client`` wins (the other arguments are then ignored with a warning); without
    one, a :class:`Mem0PlatformClient` when ``MEM0_API_KEY`` is set.

    Raises:
        ValueError: no backend at all; only one of ``chat_model`` / ``embedding_model``
            without ``mem0_config``.
        NotImplementedError: models or config without ``client`` (building mem0's own
            ``AsyncMemory`` needs the ``mem0`` package, which trioagent does not depend on).
        TypeError: the client's ``search`` or ``add`` is not async.
    """
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
                return Mem0PlatformClient(), True
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
        _looks_async(getattr(client, "search", None)) and _looks_async(getattr(client, "add", None))
    ):
        raise TypeError(
            "Mem0Middleware requires an async mem0 client (async `search` and `add`, e.g. "
            "mem0.AsyncMemory, mem0.AsyncMemoryClient or Mem0PlatformClient); the "
            "synchronous Memory / MemoryClient are not supported."
        )
    return cast(Mem0Client, client), False


class Mem0Memory:
    """One user's memories (tagged with an agent when ``agent_id`` is set) in a mem0 client.

    Args:
        client: an async mem0-style client (see the module docstring).
        user_id: the mem0 ``user_id``.
        agent_id: the mem0 ``agent_id`` to tag writes with (and to scope searches by).
        top_k: memories per search unless a call says otherwise.
        threshold: the minimum similarity score passed to ``search`` (``None``: not passed).
        scope_search_by_agent: include ``agent_id`` in search filters by default.
    """

    def __init__(
        self,
        client: Mem0Client,
        *,
        user_id: str,
        agent_id: str | None = None,
        top_k: int = 5,
        threshold: float | None = None,
        scope_search_by_agent: bool = True,
    ) -> None:
        self.client = client
        self.user_id = user_id
        self.agent_id = agent_id
        self.top_k = top_k
        self.threshold = threshold
        self.scope_search_by_agent = scope_search_by_agent

    async def search(
        self, query: str, *, top_k: int | None = None, scoped: bool | None = None
    ) -> list[str]:
        """Search mem0 and return the memory texts.

        Filters: ``user_id``, plus ``agent_id`` when set and ``scoped`` (default:
        ``scope_search_by_agent``).  ``top_k`` defaults to the memory's.
        """
        scoped = self.scope_search_by_agent if scoped is None else scoped
        filters = {"user_id": self.user_id}
        if self.agent_id and scoped:
            filters["agent_id"] = self.agent_id
        options: _SearchOptions = {}
        if self.threshold is not None:
            options["threshold"] = self.threshold
        limit = self.top_k if top_k is None else top_k
        return extract_memory_texts(
            await self.client.search(query, filters=filters, top_k=limit, **options)
        )

    async def add(self, messages: list[dict[str, str]], *, infer: bool = True) -> object:
        """Add ``messages`` under ``user_id`` (and ``agent_id`` when set); returns mem0's
        result.  ``infer=False`` stores the text as is."""
        options: _AddOptions = {}
        if self.agent_id:
            options["agent_id"] = self.agent_id
        if not infer:
            options["infer"] = False
        return await self.client.add(messages, user_id=self.user_id, **options)

    async def add_with_fallback(self, text: str) -> object:
        """Add ``text`` as a user message; when mem0 extracts nothing, add it again with
        ``infer=False`` so it is kept verbatim."""
        messages = [{"role": "user", "content": text, "name": "user"}]
        result = await self.add(messages)
        if mem0_extracted_anything(result):
            return result
        return await self.add(messages, infer=False)
