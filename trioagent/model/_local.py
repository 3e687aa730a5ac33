"""OpenAI-compatible servers of your own: llama.cpp, Ollama's ``/v1``, vLLM, LM Studio, ...

:class:`LocalChatModel` speaks Chat Completions as :class:`OpenAIChatModel` does, with what
such servers take best: text-only content as a plain string (many chat templates concatenate
``content`` and fail on a list of parts), the length limit as ``max_tokens`` (the older key
every server reads; ``max_completion_tokens`` is ignored by some), no key unless one is set,
and a smaller default context.  The spec ``local:<model>`` builds it
(:func:`~trioagent.model.chat_model_from_spec`); the base URL comes from ``--base-url``,
``TRIOAGENT_LOCAL_BASE_URL`` or llama.cpp's default ``http://127.0.0.1:8080/v1``.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from .._core.json_types import JSONObject
from ..credential import LocalCredential
from ..formatter import FormatterBase, OpenAIChatFormatter
from ..message import Msg
from ..types import ToolChoice
from ._openai import ChatCompletionsModel
from ._params import in_range, positive_or_none

__all__ = ["LocalChatModel", "LocalChatParameters"]


@attrs.define(kw_only=True)
class LocalChatParameters:
    """Generation parameters of :class:`LocalChatModel` (``None``: the server's default).

    ``max_tokens`` is sent as ``max_tokens``; ``seed`` makes sampling repeatable on servers
    that take one (llama.cpp, vLLM).
    """

    max_tokens: int | None = attrs.field(default=None, validator=positive_or_none)
    temperature: float | None = attrs.field(default=None, validator=in_range(0, 2))
    top_p: float | None = attrs.field(default=None, validator=in_range(0, 1, low_open=True))
    seed: int | None = None
    parallel_tool_calls: bool = True


class LocalChatModel(ChatCompletionsModel[LocalCredential, LocalChatParameters]):
    """A chat model on an OpenAI-compatible server you run (see the module docstring).

    Defaults: ``LocalCredential()`` (``TRIOAGENT_LOCAL_BASE_URL``, else
    ``http://127.0.0.1:8080/v1``; ``TRIOAGENT_LOCAL_API_KEY`` only when set),
    :class:`LocalChatParameters`, a context of 8192 tokens,
    ``OpenAIChatFormatter(text_as_string=True)``.  The keywords:
    :class:`~trioagent.model.ProviderChatModel`; ``extra_body`` (server-specific keys such as
    llama.cpp's ``top_k`` or ``grammar``) is merged after the parameters and a per-call
    ``extra_body`` replaces it.  Tool parameter schemas are sent flattened (no ``$ref``).

    ``model`` is the name the server knows the model by (single-model servers such as
    llama.cpp's accept any name).
    """

    type: ClassVar[str] = "local_chat"
    Parameters = LocalChatParameters
    default_credential = LocalCredential
    default_formatter = OpenAIChatFormatter
    default_context_size = 8192

    @classmethod
    def _new_formatter(cls) -> FormatterBase:
        return OpenAIChatFormatter(text_as_string=True)

    def _headers(self, *, stream: bool) -> dict[str, str]:
        headers = {"Accept": "text/event-stream" if stream else "application/json"}
        if key := self.credential.get_api_key():
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def _build_body(
        self,
        messages: list[Msg],
        tools: list[JSONObject] | None,
        tool_choice: ToolChoice | None,
        *,
        stream: bool,
    ) -> JSONObject:
        p = self.parameters
        body = await self._chat_body(
            messages,
            stream=stream,
            max_tokens=p.max_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            seed=p.seed,
        )
        return self._finish_flattened_body(
            body, tools, tool_choice, stream=stream, parallel_tool_calls=p.parallel_tool_calls
        )
