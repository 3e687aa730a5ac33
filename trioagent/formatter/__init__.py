"""Formatters: ``Msg`` lists to provider message lists (``await formatter.format(msgs)``)."""

from typing import TYPE_CHECKING

from .._core.lazy import lazy_attributes

if TYPE_CHECKING:
    from ._anthropic import (
        AnthropicChatFormatter as AnthropicChatFormatter,
        AnthropicMultiAgentFormatter as AnthropicMultiAgentFormatter,
        MiniMaxChatFormatter as MiniMaxChatFormatter,
    )
    from ._base import FormatterBase as FormatterBase
    from ._dashscope import (
        DashScopeChatFormatter as DashScopeChatFormatter,
        DashScopeMultiAgentFormatter as DashScopeMultiAgentFormatter,
    )
    from ._deepseek import (
        DeepSeekChatFormatter as DeepSeekChatFormatter,
        DeepSeekMultiAgentFormatter as DeepSeekMultiAgentFormatter,
    )
    from ._gemini import (
        THOUGHT_SIGNATURE_PREFIX as THOUGHT_SIGNATURE_PREFIX,
        GeminiChatFormatter as GeminiChatFormatter,
        GeminiMultiAgentFormatter as GeminiMultiAgentFormatter,
    )
    from ._moonshot import (
        MoonshotChatFormatter as MoonshotChatFormatter,
        MoonshotMultiAgentFormatter as MoonshotMultiAgentFormatter,
    )
    from ._ollama import (
        OllamaChatFormatter as OllamaChatFormatter,
        OllamaMultiAgentFormatter as OllamaMultiAgentFormatter,
    )
    from ._openai import (
        OpenAIChatFormatter as OpenAIChatFormatter,
        OpenAIMultiAgentFormatter as OpenAIMultiAgentFormatter,
    )
    from ._openai_response import (
        OpenAIResponseFormatter as OpenAIResponseFormatter,
        OpenAIResponseMultiAgentFormatter as OpenAIResponseMultiAgentFormatter,
    )
    from ._xai import (
        XAIChatFormatter as XAIChatFormatter,
        XAIMultiAgentFormatter as XAIMultiAgentFormatter,
    )

# Hidden from type checkers, which see the imports above: a visible module __getattr__
# would make every misspelt name of this package type-check as Any.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "AnthropicChatFormatter": "._anthropic",
            "AnthropicMultiAgentFormatter": "._anthropic",
            "DashScopeChatFormatter": "._dashscope",
            "DashScopeMultiAgentFormatter": "._dashscope",
            "DeepSeekChatFormatter": "._deepseek",
            "DeepSeekMultiAgentFormatter": "._deepseek",
            "FormatterBase": "._base",
            "GeminiChatFormatter": "._gemini",
            "GeminiMultiAgentFormatter": "._gemini",
            "MiniMaxChatFormatter": "._anthropic",
            "MoonshotChatFormatter": "._moonshot",
            "MoonshotMultiAgentFormatter": "._moonshot",
            "OllamaChatFormatter": "._ollama",
            "OllamaMultiAgentFormatter": "._ollama",
            "OpenAIChatFormatter": "._openai",
            "OpenAIMultiAgentFormatter": "._openai",
            "OpenAIResponseFormatter": "._openai_response",
            "OpenAIResponseMultiAgentFormatter": "._openai_response",
            "THOUGHT_SIGNATURE_PREFIX": "._gemini",
            "XAIChatFormatter": "._xai",
            "XAIMultiAgentFormatter": "._xai",
        },
        globals(),
    )

__all__ = [
    "THOUGHT_SIGNATURE_PREFIX",
    "AnthropicChatFormatter",
    "AnthropicMultiAgentFormatter",
    "DashScopeChatFormatter",
    "DashScopeMultiAgentFormatter",
    "DeepSeekChatFormatter",
    "DeepSeekMultiAgentFormatter",
    "FormatterBase",
    "GeminiChatFormatter",
    "GeminiMultiAgentFormatter",
    "MiniMaxChatFormatter",
    "MoonshotChatFormatter",
    "MoonshotMultiAgentFormatter",
    "OllamaChatFormatter",
    "OllamaMultiAgentFormatter",
    "OpenAIChatFormatter",
    "OpenAIMultiAgentFormatter",
    "OpenAIResponseFormatter",
    "OpenAIResponseMultiAgentFormatter",
    "XAIChatFormatter",
    "XAIMultiAgentFormatter",
]
