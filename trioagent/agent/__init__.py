"""The ReAct agent, its configuration, state and reply stream."""

from ._agent import Agent as Agent
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

__all__ = [
    "Agent",
    "AgentState",
    "BackgroundStatus",
    "BackgroundToolError",
    "BackgroundToolHandle",
    "ContextConfig",
    "InjectionConfig",
    "ModelConfig",
    "ReActConfig",
    "ReadCacheEntry",
    "ReplyContext",
    "ReplyStream",
    "Task",
    "TaskContext",
    "TaskState",
    "ToolContext",
]
