"""trioagent: a Trio-native, structured-concurrency LLM agent core.

A cancelled reply always ends in exactly one INTERRUPTED end event, with a consistent,
resumable context, no orphaned task and no open connection.
"""

from .message import (
    AssistantMsg as AssistantMsg,
    Msg as Msg,
    SystemMsg as SystemMsg,
    UserMsg as UserMsg,
)

__version__ = "0.1.0"

__all__ = ["AssistantMsg", "Msg", "SystemMsg", "UserMsg", "__version__"]
