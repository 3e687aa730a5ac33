"""Chat models: the provider-independent base, responses, and the provider clients."""

from ._accumulator import StreamAccumulator as StreamAccumulator
from ._base import (
    ChatModelBase as ChatModelBase,
    Emit as Emit,
    StructuredResponse as StructuredResponse,
)
from ._json_repair import (
    flatten_json_schema as flatten_json_schema,
    json_loads_with_repair as json_loads_with_repair,
)
from ._openai import (
    OpenAIChatModel as OpenAIChatModel,
    OpenAIChatParameters as OpenAIChatParameters,
)
from ._response import ChatResponse as ChatResponse, ChatUsage as ChatUsage

__all__ = [
    "ChatModelBase",
    "ChatResponse",
    "ChatUsage",
    "Emit",
    "OpenAIChatModel",
    "OpenAIChatParameters",
    "StreamAccumulator",
    "StructuredResponse",
    "flatten_json_schema",
    "json_loads_with_repair",
]
