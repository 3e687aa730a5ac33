"""Formatters: ``Msg`` lists to provider message lists (``await formatter.format(msgs)``)."""

from ._base import FormatterBase as FormatterBase
from ._openai import (
    OpenAIChatFormatter as OpenAIChatFormatter,
    OpenAIMultiAgentFormatter as OpenAIMultiAgentFormatter,
)

__all__ = ["FormatterBase", "OpenAIChatFormatter", "OpenAIMultiAgentFormatter"]
