"""Agent middlewares: the hook base class and the chain's ``NextHandler``."""

from .._core.chain import NextHandler as NextHandler
from .._core.emit import Emit as Emit
from ..agent import (
    OnActingKwargs as OnActingKwargs,
    OnCheckPermissionKwargs as OnCheckPermissionKwargs,
    OnCompressContextKwargs as OnCompressContextKwargs,
    OnModelCallKwargs as OnModelCallKwargs,
    OnReasoningKwargs as OnReasoningKwargs,
    OnReplyKwargs as OnReplyKwargs,
)
from ..memory import (
    LocalBackend as LocalBackend,
    Mem0APIError as Mem0APIError,
    Mem0PlatformClient as Mem0PlatformClient,
    MemoryBackend as MemoryBackend,
)
from ._agentic_memory import AgenticMemoryMiddleware as AgenticMemoryMiddleware
from ._base import MiddlewareBase as MiddlewareBase
from ._budget import ReplyBudgetControlMiddleware as ReplyBudgetControlMiddleware
from ._mem0 import Mem0Middleware as Mem0Middleware
from ._rag import RAGMiddleware as RAGMiddleware
from ._router import (
    ChatModelCandidate as ChatModelCandidate,
    ModelRouterMiddleware as ModelRouterMiddleware,
)
from ._tracing import TracingMiddleware as TracingMiddleware
from ._tts import TTSMiddleware as TTSMiddleware

__all__ = [
    "AgenticMemoryMiddleware",
    "ChatModelCandidate",
    "Emit",
    "LocalBackend",
    "Mem0APIError",
    "Mem0Middleware",
    "Mem0PlatformClient",
    "MemoryBackend",
    "MiddlewareBase",
    "ModelRouterMiddleware",
    "NextHandler",
    "OnActingKwargs",
    "OnCheckPermissionKwargs",
    "OnCompressContextKwargs",
    "OnModelCallKwargs",
    "OnReasoningKwargs",
    "OnReplyKwargs",
    "RAGMiddleware",
    "ReplyBudgetControlMiddleware",
    "TTSMiddleware",
    "TracingMiddleware",
]
