"""Tools: the tool protocol, function tools, the toolkit, results and tool middlewares, skills
in the toolkit, and the built-in tools (``Bash``, ``Read``, ``Write``, ``Edit``, ``Glob``,
``Grep``, ``AskUser`` and the task tools).

Tools stream by awaiting an injected ``emit`` (there are no async generators in trioagent);
middlewares run the inner layers with ``next_handler(sink=None, /, **overrides)``.
"""

from typing import TYPE_CHECKING

from .._core.lazy import lazy_attributes

if TYPE_CHECKING:
    from ..types import ToolChoice as ToolChoice
    from ._base import ToolBase as ToolBase, ToolMiddlewareBase as ToolMiddlewareBase
    from ._builtin import (
        AskUser as AskUser,
        AskUserAnswer as AskUserAnswer,
        Bash as Bash,
        Edit as Edit,
        Glob as Glob,
        Grep as Grep,
        Read as Read,
        TaskCreate as TaskCreate,
        TaskGet as TaskGet,
        TaskList as TaskList,
        TaskUpdate as TaskUpdate,
        Write as Write,
    )
    from ._class_schema import ClassSchema as ClassSchema, is_schema_class as is_schema_class
    from ._function import FunctionTool as FunctionTool
    from ._group import ResetTools as ResetTools, ToolGroup as ToolGroup
    from ._mcp import (
        MAX_TOOL_NAME as MAX_TOOL_NAME,
        MCP_QUESTION_KEY as MCP_QUESTION_KEY,
        MCPCallError as MCPCallError,
        MCPCallResult as MCPCallResult,
        MCPConnection as MCPConnection,
        MCPQuestion as MCPQuestion,
        MCPTool as MCPTool,
        MCPToolSource as MCPToolSource,
        MCPToolSpec as MCPToolSpec,
        ProgressCallback as ProgressCallback,
        mcp_tool_name as mcp_tool_name,
    )
    from ._middleware import ToolNextHandler as ToolNextHandler
    from ._response import Emit as Emit, ToolChunk as ToolChunk, ToolResponse as ToolResponse
    from ._skills import SkillViewer as SkillViewer
    from ._state import (
        ReadCacheEntry as ReadCacheEntry,
        Task as Task,
        TaskContext as TaskContext,
        TaskState as TaskState,
        ToolContext as ToolContext,
    )
    from ._toolkit import Toolkit as Toolkit, ToolkitMiddleware as ToolkitMiddleware

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "AskUser": "._builtin",
            "AskUserAnswer": "._builtin",
            "Bash": "._builtin",
            "ClassSchema": "._class_schema",
            "Edit": "._builtin",
            "Emit": "._response",
            "FunctionTool": "._function",
            "Glob": "._builtin",
            "Grep": "._builtin",
            "MAX_TOOL_NAME": "._mcp",
            "MCP_QUESTION_KEY": "._mcp",
            "MCPCallError": "._mcp",
            "MCPCallResult": "._mcp",
            "MCPConnection": "._mcp",
            "MCPQuestion": "._mcp",
            "MCPTool": "._mcp",
            "MCPToolSource": "._mcp",
            "MCPToolSpec": "._mcp",
            "ProgressCallback": "._mcp",
            "Read": "._builtin",
            "ReadCacheEntry": "._state",
            "ResetTools": "._group",
            "SkillViewer": "._skills",
            "Task": "._state",
            "TaskContext": "._state",
            "TaskCreate": "._builtin",
            "TaskGet": "._builtin",
            "TaskList": "._builtin",
            "TaskState": "._state",
            "TaskUpdate": "._builtin",
            "ToolBase": "._base",
            "ToolChoice": "..types",
            "ToolChunk": "._response",
            "ToolContext": "._state",
            "ToolGroup": "._group",
            "ToolMiddlewareBase": "._base",
            "ToolNextHandler": "._middleware",
            "ToolResponse": "._response",
            "Toolkit": "._toolkit",
            "ToolkitMiddleware": "._toolkit",
            "Write": "._builtin",
            "is_schema_class": "._class_schema",
            "mcp_tool_name": "._mcp",
        },
        globals(),
    )

__all__ = [
    "MAX_TOOL_NAME",
    "MCP_QUESTION_KEY",
    "AskUser",
    "AskUserAnswer",
    "Bash",
    "ClassSchema",
    "Edit",
    "Emit",
    "FunctionTool",
    "Glob",
    "Grep",
    "MCPCallError",
    "MCPCallResult",
    "MCPConnection",
    "MCPQuestion",
    "MCPTool",
    "MCPToolSource",
    "MCPToolSpec",
    "ProgressCallback",
    "Read",
    "ReadCacheEntry",
    "ResetTools",
    "SkillViewer",
    "Task",
    "TaskContext",
    "TaskCreate",
    "TaskGet",
    "TaskList",
    "TaskState",
    "TaskUpdate",
    "ToolBase",
    "ToolChoice",
    "ToolChunk",
    "ToolContext",
    "ToolGroup",
    "ToolMiddlewareBase",
    "ToolNextHandler",
    "ToolResponse",
    "Toolkit",
    "ToolkitMiddleware",
    "Write",
    "is_schema_class",
    "mcp_tool_name",
]
