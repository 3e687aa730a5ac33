"""Agent middlewares: the hook base class and the chain's ``NextHandler``."""

from typing import TYPE_CHECKING

from .._core.lazy import lazy_attributes

if TYPE_CHECKING:
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

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "AgenticMemoryMiddleware": "._agentic_memory",
            "ChatModelCandidate": "._router",
            "Emit": ".._core.emit",
            "LocalBackend": "..memory",
            "Mem0APIError": "..memory",
            "Mem0Middleware": "._mem0",
            "Mem0PlatformClient": "..memory",
            "MemoryBackend": "..memory",
            "MiddlewareBase": "._base",
            "ModelRouterMiddleware": "._router",
            "NextHandler": ".._core.chain",
            "OnActingKwargs": "..agent",
            "OnCheckPermissionKwargs": "..agent",
            "OnCompressContextKwargs": "..agent",
            "OnModelCallKwargs": "..agent",
            "OnReasoningKwargs": "..agent",
            "OnReplyKwargs": "..agent",
            "RAGMiddleware": "._rag",
            "ReplyBudgetControlMiddleware": "._budget",
            "TTSMiddleware": "._tts",
            "TracingMiddleware": "._tracing",
        },
        globals(),
    )

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
