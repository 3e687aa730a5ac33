"""trioagent: a Trio-native, structured-concurrency LLM agent core.

A cancelled reply always ends in exactly one INTERRUPTED end event, with a consistent,
resumable context, no orphaned task and no open connection.

The names below are imported from their subpackage when first used (PEP 562), so ``from
trioagent import Agent`` loads the agent and not, say, every middleware.
"""

from typing import TYPE_CHECKING

from ._core.lazy import lazy_attributes
from ._version import __version__ as __version__

if TYPE_CHECKING:
    from .agent import Agent as Agent
    from .exception import TrioagentError as TrioagentError
    from .message import (
        AssistantMsg as AssistantMsg,
        Msg as Msg,
        SystemMsg as SystemMsg,
        UserMsg as UserMsg,
    )
    from .middleware import MiddlewareBase as MiddlewareBase
    from .tool import Toolkit as Toolkit

# Hidden from type checkers, which see the imports above: a visible module __getattr__
# would make every misspelt name of this package type-check as Any.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "Agent": ".agent",
            "AssistantMsg": ".message",
            "MiddlewareBase": ".middleware",
            "Msg": ".message",
            "SystemMsg": ".message",
            "Toolkit": ".tool",
            "TrioagentError": ".exception",
            "UserMsg": ".message",
        },
        globals(),
    )

__all__ = [
    "Agent",
    "AssistantMsg",
    "MiddlewareBase",
    "Msg",
    "SystemMsg",
    "Toolkit",
    "TrioagentError",
    "UserMsg",
    "__version__",
]
