"""Build a chat model from a ``"provider:model"`` string (``TRIOAGENT_MODEL``, ``--model``)."""

from __future__ import annotations

from typing import Any

from ..credential import (
    AnthropicCredential,
    CredentialBase,
    DashScopeCredential,
    DeepSeekCredential,
    GeminiCredential,
    LocalCredential,
    MiniMaxCredential,
    MoonshotCredential,
    OllamaCredential,
    OpenAICredential,
    XAICredential,
)
from ._anthropic import AnthropicChatModel, MiniMaxChatModel
from ._base import ChatModelBase
from ._dashscope import DashScopeChatModel
from ._deepseek import DeepSeekChatModel
from ._gemini import GeminiChatModel
from ._local import LocalChatModel
from ._moonshot import MoonshotChatModel
from ._ollama import OllamaChatModel
from ._openai import OpenAIChatModel
from ._openai_response import OpenAIResponseModel
from ._xai import XAIChatModel

__all__ = ["PROVIDERS", "chat_model_from_spec", "credential_from_spec"]

#: Provider prefix → (model class, credential class).
PROVIDERS: dict[str, tuple[type[ChatModelBase], type[CredentialBase]]] = {
    "openai": (OpenAIChatModel, OpenAICredential),
    "openai-response": (OpenAIResponseModel, OpenAICredential),
    "anthropic": (AnthropicChatModel, AnthropicCredential),
    "minimax": (MiniMaxChatModel, MiniMaxCredential),
    "gemini": (GeminiChatModel, GeminiCredential),
    "dashscope": (DashScopeChatModel, DashScopeCredential),
    "deepseek": (DeepSeekChatModel, DeepSeekCredential),
    "moonshot": (MoonshotChatModel, MoonshotCredential),
    "ollama": (OllamaChatModel, OllamaCredential),
    "xai": (XAIChatModel, XAICredential),
    # Any OpenAI-compatible server you run (llama.cpp, Ollama's /v1, vLLM): no key needed.
    "local": (LocalChatModel, LocalCredential),
}


def _split(spec: str) -> tuple[str, str]:
    """``"ollama:llama3:8b"`` → ``("ollama", "llama3:8b")``: only the first colon splits, and
    whitespace around either part (a trailing newline in an environment variable) is no part
    of the names."""
    provider, _, name = spec.partition(":")
    provider, name = provider.strip(), name.strip()
    if provider not in PROVIDERS or not name:
        raise ValueError(
            f"a model must be given as '<provider>:<model>' with provider one of "
            f"{', '.join(sorted(PROVIDERS))}; got {spec!r}"
        )
    return provider, name


def credential_from_spec(spec: str, *, base_url: str | None = None) -> CredentialBase:
    """The provider's credential for ``spec`` (key and base URL from the environment)."""
    provider, _ = _split(spec)
    return PROVIDERS[provider][1](base_url=base_url)


def chat_model_from_spec(
    spec: str, *, credential: CredentialBase | None = None, **kwargs: Any
) -> ChatModelBase:
    """``chat_model_from_spec("anthropic:claude-sonnet-4-5")`` → an :class:`AnthropicChatModel`.

    ``kwargs`` go to the model class (``max_retries``, ``timeout``, ...).

    Raises:
        ValueError: an unknown provider or a missing model name.
    """
    provider, name = _split(spec)
    model_class = PROVIDERS[provider][0]
    model: ChatModelBase = model_class(
        name, credential=credential or credential_from_spec(spec), **kwargs
    )
    return model
