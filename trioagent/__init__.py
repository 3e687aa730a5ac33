"""trioagent: a Trio-native, structured-concurrency LLM agent core.

A cancelled reply always ends in exactly one INTERRUPTED end event, with a consistent,
resumable context, no orphaned task and no open connection.
"""

from ._version import __version__ as __version__
from .agent import Agent as Agent
from .message import (
    AssistantMsg as AssistantMsg,
    Msg as Msg,
    SystemMsg as SystemMsg,
    UserMsg as UserMsg,
)
from .middleware import MiddlewareBase as MiddlewareBase
from .tool import Toolkit as Toolkit

__all__ = [
    "Agent",
    "AssistantMsg",
    "MiddlewareBase",
    "Msg",
    "SystemMsg",
    "Toolkit",
    "UserMsg",
    "__version__",
]
