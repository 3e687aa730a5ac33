"""The ReAct agent, its configuration, state and reply stream."""

from ._agent import Agent as Agent
from ._as_tool import AgentTool as AgentTool, answer_of as answer_of
from ._background import (
    BackgroundStatus as BackgroundStatus,
    BackgroundToolError as BackgroundToolError,
    BackgroundToolHandle as BackgroundToolHandle,
)
from ._config import (
    ContextConfig as ContextConfig,
    InjectionConfig as InjectionConfig,
    ModelConfig as ModelConfig,
    ReActConfig as ReActConfig,
)
from ._hook_kwargs import (
    OnActingKwargs as OnActingKwargs,
    OnCheckPermissionKwargs as OnCheckPermissionKwargs,
    OnCompressContextKwargs as OnCompressContextKwargs,
    OnModelCallKwargs as OnModelCallKwargs,
    OnReasoningKwargs as OnReasoningKwargs,
    OnReplyKwargs as OnReplyKwargs,
)
from ._protocol import (
    ActingItem as ActingItem,
    AgentLike as AgentLike,
    MiddlewareLike as MiddlewareLike,
    ReplyInputs as ReplyInputs,
)
from ._reply import ReplyItem as ReplyItem
from ._state import (
    AgentState as AgentState,
    ReadCacheEntry as ReadCacheEntry,
    ReplyContext as ReplyContext,
    Task as Task,
    TaskContext as TaskContext,
    TaskState as TaskState,
    ToolContext as ToolContext,
)
from ._stream import ReplyStream as ReplyStream
from ._structured import STRUCTURED_OUTPUT_TOOL_NAME as STRUCTURED_OUTPUT_TOOL_NAME

__all__ = [
    "STRUCTURED_OUTPUT_TOOL_NAME",
    "ActingItem",
    "Agent",
    "AgentLike",
    "AgentState",
    "AgentTool",
    "BackgroundStatus",
    "BackgroundToolError",
    "BackgroundToolHandle",
    "ContextConfig",
    "InjectionConfig",
    "MiddlewareLike",
    "ModelConfig",
    "OnActingKwargs",
    "OnCheckPermissionKwargs",
    "OnCompressContextKwargs",
    "OnModelCallKwargs",
    "OnReasoningKwargs",
    "OnReplyKwargs",
    "ReActConfig",
    "ReadCacheEntry",
    "ReplyContext",
    "ReplyInputs",
    "ReplyItem",
    "ReplyStream",
    "Task",
    "TaskContext",
    "TaskState",
    "ToolContext",
    "answer_of",
]
