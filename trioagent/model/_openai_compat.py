"""The shared half of the OpenAI-compatible providers (DashScope, DeepSeek, Moonshot).

``POST {base_url}/chat/completions`` with a Bearer key, read by
:class:`~trioagent.model._openai.OpenAIStreamParser` through the transport functions of
``_openai.py``; a provider subclass builds its request body (:meth:`_build_body`) and says
where its usage reports cached prompt tokens (:attr:`cache_usage`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

import attrs
import httpx
import trio

from ..credential import CredentialBase
from ..message import Msg
from ..types import ToolChoice
from ._base import ChatModelBase
from ._openai import OpenAIStreamParser, complete_chat_completions, stream_chat_completions
from ._response import ChatResponse

__all__ = ["OpenAICompatibleChatModel", "in_range", "one_of", "positive_or_none"]

_Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def in_range(
    low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> _Validator:
    """An attrs validator: ``None`` or a number within the interval."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: float | None) -> None:
        if value is None:
            return
        ok_low = value > low if low_open else value >= low
        ok_high = value < high if high_open else value <= high
        if not (ok_low and ok_high):
            interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
            raise ValueError(f"{attribute.name} must be in {interval}, got {value}")

    return check


def positive_or_none(instance: Any, attribute: attrs.Attribute[Any], value: int | None) -> None:
    """An attrs validator: ``None`` or an integer > 0."""
    if value is not None and value <= 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value}")


def one_of(*choices: str) -> _Validator:
    """An attrs validator: ``None`` or one of ``choices``."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
        if value is not None and value not in choices:
            raise ValueError(f"{attribute.name} must be one of {', '.join(choices)}, got {value!r}")

    return check


class OpenAICompatibleChatModel(ChatModelBase):
    """Base of the chat models that speak OpenAI Chat Completions with their own body keys.

    Subclasses implement :meth:`_build_body`; this class sends it (Bearer auth, SSE until
    ``data: [DONE]``, retries and cancellation from :class:`ChatModelBase`) and parses the
    answer with :class:`~trioagent.model._openai.OpenAIStreamParser`.
    """

    credential: CredentialBase
    #: Where the usage reports cached prompt tokens (``prompt_tokens_details.cached_tokens``
    #: or DeepSeek's ``prompt_cache_hit_tokens``).
    cache_usage: ClassVar[Literal["openai", "deepseek"]] = "openai"
    extra_body: dict[str, Any] | None

    # -- request helpers -------------------------------------------------------------------

    async def _build_body(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        raise NotImplementedError

    async def _base_body(self, messages: list[Msg], *, stream: bool) -> dict[str, Any]:
        """``model``, ``messages`` (through the formatter) and ``stream``."""
        if self.formatter is None:
            raise ValueError(f"{type(self).__name__} needs a formatter")
        return {
            "model": self.model,
            "messages": await self.formatter.format(messages, http_client=self.http_client),
            "stream": stream,
        }

    def _split_call_kwargs(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(extra body, other per-call keys) for this call.

        The extra body is the constructor's ``extra_body`` updated key by key with a per-call
        ``extra_body`` (e.g. structured output's disable-thinking step), so neither is lost.
        """
        call_kwargs = self._call_kwargs()
        extra = dict(self.extra_body or {})
        extra.update(call_kwargs.pop("extra_body", None) or {})
        return extra, call_kwargs

    @staticmethod
    def _filter_tools(
        tools: list[dict[str, Any]] | None, tool_choice: ToolChoice | None
    ) -> list[dict[str, Any]] | None:
        """``tools`` restricted to ``tool_choice.tools`` when that is set."""
        if tools and tool_choice is not None and tool_choice.tools:
            allowed = set(tool_choice.tools)
            tools = [t for t in tools if t.get("function", {}).get("name") in allowed]
        return tools or None

    def _format_tool_choice(self, tool_choice: ToolChoice) -> str | dict[str, Any]:
        """``auto``/``none``/``required`` as strings, a tool name as a function object."""
        if tool_choice.mode in ("auto", "none", "required"):
            return tool_choice.mode
        return {"type": "function", "function": {"name": tool_choice.mode}}

    @staticmethod
    def _merge_thinking(extra: dict[str, Any], enabled: bool) -> dict[str, Any]:
        """``{"type": "enabled"|"disabled"}`` updated with the extra body's ``thinking``
        object (popped from ``extra``), as DeepSeek and Kimi take it."""
        thinking: dict[str, Any] = {"type": "enabled" if enabled else "disabled"}
        override = extra.pop("thinking", None)
        if isinstance(override, dict):
            thinking.update(override)
        return thinking

    def _headers(self, *, stream: bool) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.credential.get_api_key()}",
            "Accept": "text/event-stream" if stream else "application/json",
        }

    def _request(self, body: dict[str, Any], *, stream: bool) -> httpx.Request:
        return self.http_client.build_request(
            "POST",
            f"{self.credential.get_base_url()}/chat/completions",
            json=body,
            headers=self._headers(stream=stream),
        )

    def _parser(self) -> OpenAIStreamParser:
        return OpenAIStreamParser(trio.current_time(), cache=self.cache_usage)

    def _get_disable_thinking_kwargs(self) -> dict[str, Any]:
        return {"extra_body": {"thinking": {"type": "disabled"}}}

    # -- hooks -------------------------------------------------------------------------------

    async def _stream_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
        send: trio.MemorySendChannel[ChatResponse],
    ) -> None:
        body = await self._build_body(messages, tools, tool_choice, stream=True)
        request = self._request(body, stream=True)
        await stream_chat_completions(
            self.http_client, request, self._parser(), send, model=self.model, redact=self._redact
        )

    async def _call_api(
        self,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None,
        tool_choice: ToolChoice | None,
    ) -> ChatResponse:
        body = await self._build_body(messages, tools, tool_choice, stream=False)
        request = self._request(body, stream=False)
        return await complete_chat_completions(
            self.http_client, request, self._parser(), model=self.model, redact=self._redact
        )
