"""Chat models: the provider-independent base, responses, and the provider clients."""

from typing import TYPE_CHECKING

from .._core.lazy import lazy_attributes

if TYPE_CHECKING:
    from .._json_repair import (
        flatten_json_schema as flatten_json_schema,
        json_loads_with_repair as json_loads_with_repair,
    )
    from ._accumulator import StreamAccumulator as StreamAccumulator
    from ._anthropic import (
        AnthropicChatModel as AnthropicChatModel,
        AnthropicChatParameters as AnthropicChatParameters,
        MiniMaxChatModel as MiniMaxChatModel,
        MiniMaxChatParameters as MiniMaxChatParameters,
    )
    from ._base import (
        ChatModelBase as ChatModelBase,
        ChatModelOptions as ChatModelOptions,
        ChunkSink as ChunkSink,
    )
    from ._dashscope import (
        DashScopeChatModel as DashScopeChatModel,
        DashScopeChatParameters as DashScopeChatParameters,
    )
    from ._deepseek import (
        DeepSeekChatModel as DeepSeekChatModel,
        DeepSeekChatParameters as DeepSeekChatParameters,
    )
    from ._gemini import (
        GeminiChatModel as GeminiChatModel,
        GeminiChatParameters as GeminiChatParameters,
    )
    from ._local import (
        LocalChatModel as LocalChatModel,
        LocalChatParameters as LocalChatParameters,
    )
    from ._moonshot import (
        MoonshotChatModel as MoonshotChatModel,
        MoonshotChatParameters as MoonshotChatParameters,
    )
    from ._ollama import (
        OllamaChatModel as OllamaChatModel,
        OllamaChatParameters as OllamaChatParameters,
    )
    from ._openai import (
        OpenAIChatModel as OpenAIChatModel,
        OpenAIChatParameters as OpenAIChatParameters,
    )
    from ._openai_response import (
        OpenAIResponseModel as OpenAIResponseModel,
        OpenAIResponseParameters as OpenAIResponseParameters,
    )
    from ._provider import (
        ProviderChatModel as ProviderChatModel,
        ProviderOptions as ProviderOptions,
    )
    from ._pull import ModelStream as ModelStream
    from ._registry import (
        PROVIDERS as PROVIDERS,
        chat_model_from_spec as chat_model_from_spec,
        credential_from_spec as credential_from_spec,
    )
    from ._response import ChatResponse as ChatResponse, ChatUsage as ChatUsage
    from ._spec import as_chat_model as as_chat_model, close_owned_model as close_owned_model
    from ._structured import StructuredResponse as StructuredResponse
    from ._xai import XAIChatModel as XAIChatModel, XAIChatParameters as XAIChatParameters

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "AnthropicChatModel": "._anthropic",
            "AnthropicChatParameters": "._anthropic",
            "ChatModelBase": "._base",
            "ChatModelOptions": "._base",
            "ChatResponse": "._response",
            "ChatUsage": "._response",
            "ChunkSink": "._base",
            "DashScopeChatModel": "._dashscope",
            "DashScopeChatParameters": "._dashscope",
            "DeepSeekChatModel": "._deepseek",
            "DeepSeekChatParameters": "._deepseek",
            "GeminiChatModel": "._gemini",
            "GeminiChatParameters": "._gemini",
            "LocalChatModel": "._local",
            "LocalChatParameters": "._local",
            "MiniMaxChatModel": "._anthropic",
            "MiniMaxChatParameters": "._anthropic",
            "ModelStream": "._pull",
            "MoonshotChatModel": "._moonshot",
            "MoonshotChatParameters": "._moonshot",
            "OllamaChatModel": "._ollama",
            "OllamaChatParameters": "._ollama",
            "OpenAIChatModel": "._openai",
            "OpenAIChatParameters": "._openai",
            "OpenAIResponseModel": "._openai_response",
            "OpenAIResponseParameters": "._openai_response",
            "PROVIDERS": "._registry",
            "ProviderChatModel": "._provider",
            "ProviderOptions": "._provider",
            "StreamAccumulator": "._accumulator",
            "StructuredResponse": "._structured",
            "XAIChatModel": "._xai",
            "XAIChatParameters": "._xai",
            "as_chat_model": "._spec",
            "close_owned_model": "._spec",
            "chat_model_from_spec": "._registry",
            "credential_from_spec": "._registry",
            "flatten_json_schema": ".._json_repair",
            "json_loads_with_repair": ".._json_repair",
        },
        globals(),
    )

__all__ = [
    "PROVIDERS",
    "AnthropicChatModel",
    "AnthropicChatParameters",
    "ChatModelBase",
    "ChatModelOptions",
    "ChatResponse",
    "ChatUsage",
    "ChunkSink",
    "DashScopeChatModel",
    "DashScopeChatParameters",
    "DeepSeekChatModel",
    "DeepSeekChatParameters",
    "GeminiChatModel",
    "GeminiChatParameters",
    "LocalChatModel",
    "LocalChatParameters",
    "MiniMaxChatModel",
    "MiniMaxChatParameters",
    "ModelStream",
    "MoonshotChatModel",
    "MoonshotChatParameters",
    "OllamaChatModel",
    "OllamaChatParameters",
    "OpenAIChatModel",
    "OpenAIChatParameters",
    "OpenAIResponseModel",
    "OpenAIResponseParameters",
    "ProviderChatModel",
    "ProviderOptions",
    "StreamAccumulator",
    "StructuredResponse",
    "XAIChatModel",
    "XAIChatParameters",
    "as_chat_model",
    "chat_model_from_spec",
    "close_owned_model",
    "credential_from_spec",
    "flatten_json_schema",
    "json_loads_with_repair",
]
