"""Messages and their content blocks."""

from .._blocks import (
    Base64Source as Base64Source,
    ContentBlock as ContentBlock,
    DataBlock as DataBlock,
    HintBlock as HintBlock,
    TextBlock as TextBlock,
    ThinkingBlock as ThinkingBlock,
    ToolCallBlock as ToolCallBlock,
    ToolCallState as ToolCallState,
    ToolResultBlock as ToolResultBlock,
    ToolResultState as ToolResultState,
    URLSource as URLSource,
)
from ._msg import (
    AssistantMsg as AssistantMsg,
    Msg as Msg,
    Role as Role,
    SystemMsg as SystemMsg,
    Usage as Usage,
    UserMsg as UserMsg,
)

__all__ = [
    "AssistantMsg",
    "Base64Source",
    "ContentBlock",
    "DataBlock",
    "HintBlock",
    "Msg",
    "Role",
    "SystemMsg",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolCallState",
    "ToolResultBlock",
    "ToolResultState",
    "URLSource",
    "Usage",
    "UserMsg",
]
