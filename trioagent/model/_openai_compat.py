"""The shared half of the OpenAI-compatible providers (DashScope, DeepSeek, Moonshot).

``POST {base_url}/chat/completions`` with a Bearer key, sent and read by
:class:`~trioagent.model._openai.ChatCompletionsModel` (the transport shared with OpenAI and
xAI); a provider subclass builds its request body (:meth:`_build_body`) and says where its
usage reports cached prompt tokens (:attr:`cache_usage`).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import trio

from .._core.json_types import JSONObject
from ._openai import ChatCompletionsModel, OpenAIStreamParser
from ._provider import CredentialT, ParametersT

__all__ = ["OpenAICompatibleChatModel"]


class OpenAICompatibleChatModel(ChatCompletionsModel[CredentialT, ParametersT]):
    """Base of the chat models that speak OpenAI Chat Completions with their own body keys.

    Subclasses implement :meth:`_build_body`; this class sends it (Bearer auth, SSE until
    ``data: [DONE]``, retries and cancellation from :class:`ChatModelBase`) and parses the
    answer with :class:`~trioagent.model._openai.OpenAIStreamParser`.  A per-call extra body
    (structured output's disable-thinking step) updates the model's ``extra_body`` key by key
    (:meth:`_split_call_kwargs`).
    """

    #: Where the usage reports cached prompt tokens (``prompt_tokens_details.cached_tokens``
    #: or DeepSeek's ``prompt_cache_hit_tokens``).
    cache_usage: ClassVar[Literal["openai", "deepseek"]] = "openai"

    def _split_call_kwargs(self) -> tuple[JSONObject, JSONObject]:
        """(extra body, other per-call keys) for this call.

        The extra body is the constructor's ``extra_body`` updated key by key with a per-call
        ``extra_body`` (e.g. structured output's disable-thinking step), so neither is lost.
        """
        call_kwargs = self._call_kwargs()
        extra = dict(self.extra_body or {})
        extra.update(call_kwargs.pop("extra_body", None) or {})
        return extra, call_kwargs

    @staticmethod
    def _merge_thinking(extra: JSONObject, enabled: bool) -> JSONObject:
        """``{"type": "enabled"|"disabled"}`` updated with the extra body's ``thinking``
        object (popped from ``extra``), as DeepSeek and Kimi take it."""
        thinking: JSONObject = {"type": "enabled" if enabled else "disabled"}
        override = extra.pop("thinking", None)
        if isinstance(override, dict):
            thinking.update(override)
        return thinking

    def _parser(self) -> OpenAIStreamParser:
        return OpenAIStreamParser(trio.current_time(), cache=self.cache_usage)

    def _get_disable_thinking_kwargs(self) -> JSONObject:
        return {"extra_body": {"thinking": {"type": "disabled"}}}
