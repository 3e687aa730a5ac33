"""Agent middlewares: the hook base class and the chain's ``NextHandler``."""

from ._base import MiddlewareBase as MiddlewareBase
from ._budget import ReplyBudgetControlMiddleware as ReplyBudgetControlMiddleware
from ._chain import Emit as Emit, NextHandler as NextHandler
from ._router import (
    ChatModelCandidate as ChatModelCandidate,
    ModelRouterMiddleware as ModelRouterMiddleware,
)
from ._tracing import TracingMiddleware as TracingMiddleware
from ._tts import TTSMiddleware as TTSMiddleware

__all__ = [
    "ChatModelCandidate",
    "Emit",
    "MiddlewareBase",
    "ModelRouterMiddleware",
    "NextHandler",
    "ReplyBudgetControlMiddleware",
    "TTSMiddleware",
    "TracingMiddleware",
]
