"""Tools: the tool protocol, function tools, the toolkit, results and tool middlewares.

Tools stream by awaiting an injected ``emit`` (there are no async generators in trioagent);
middlewares run the inner layers with ``next_handler(sink=None, /, **overrides)``.
"""

from ..types import ToolChoice as ToolChoice
from ._base import ToolBase as ToolBase, ToolMiddlewareBase as ToolMiddlewareBase
from ._function import FunctionTool as FunctionTool
from ._group import ResetTools as ResetTools, ToolGroup as ToolGroup
from ._mcp import (
    MCPCallError as MCPCallError,
    MCPCallResult as MCPCallResult,
    MCPConnection as MCPConnection,
    MCPTool as MCPTool,
    MCPToolSource as MCPToolSource,
    MCPToolSpec as MCPToolSpec,
    ProgressCallback as ProgressCallback,
)
from ._middleware import ToolNextHandler as ToolNextHandler
from ._response import Emit as Emit, ToolChunk as ToolChunk, ToolResponse as ToolResponse
from ._toolkit import Toolkit as Toolkit, ToolkitMiddleware as ToolkitMiddleware

__all__ = [
    "Emit",
    "FunctionTool",
    "MCPCallError",
    "MCPCallResult",
    "MCPConnection",
    "MCPTool",
    "MCPToolSource",
    "MCPToolSpec",
    "ProgressCallback",
    "ResetTools",
    "ToolBase",
    "ToolChoice",
    "ToolChunk",
    "ToolGroup",
    "ToolMiddlewareBase",
    "ToolNextHandler",
    "ToolResponse",
    "Toolkit",
    "ToolkitMiddleware",
]
