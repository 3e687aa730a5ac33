"""MCP both ways: servers as tool sources (:class:`MCPClient` over stdio or streamable HTTP),
and agents or toolkits served to MCP clients (:func:`serve`).

.. code-block:: python

    client = MCPClient("files", StdioMCPConfig(command="mcp-server-files", args=["/data"]))
    async with client:                      # starts the server, lists its tools
        toolkit = Toolkit(mcps=[client])    # tools named mcp__files__<tool>
        ...                                 # leaving the block terminates the server

Built on the official ``mcp`` SDK (anyio-based, so it runs under Trio), which the ``mcp``
extra installs (``pip install 'trioagent[mcp]'``); without it, importing this package raises
:class:`~trioagent.exception.MissingExtraError` naming that command.
"""

from ..exception import MissingExtraError

try:
    import mcp as _mcp  # noqa: F401  (only: is the extra installed?)
except ImportError as exc:
    raise MissingExtraError("trioagent.mcp", "mcp", module="mcp") from exc

from ..tool import MCPCallError as MCPCallError, MCPTool as MCPTool
from ._capabilities import (
    ElicitationCallback as ElicitationCallback,
    ElicitationContent as ElicitationContent,
    MCPElicitation as MCPElicitation,
    MCPSampling as MCPSampling,
    SamplingRequest as SamplingRequest,
)
from ._client import MCPClient as MCPClient, MCPClientError as MCPClientError
from ._config import HttpMCPConfig as HttpMCPConfig, StdioMCPConfig as StdioMCPConfig
from ._resources import (
    MCPPrompt as MCPPrompt,
    MCPPromptArgument as MCPPromptArgument,
    MCPResource as MCPResource,
    MCPResourceReader as MCPResourceReader,
    MCPResourceTemplate as MCPResourceTemplate,
)
from ._serve import ServableAgent as ServableAgent, serve as serve

__all__ = [
    "ElicitationCallback",
    "ElicitationContent",
    "HttpMCPConfig",
    "MCPCallError",
    "MCPClient",
    "MCPClientError",
    "MCPElicitation",
    "MCPPrompt",
    "MCPPromptArgument",
    "MCPResource",
    "MCPResourceReader",
    "MCPResourceTemplate",
    "MCPSampling",
    "MCPTool",
    "SamplingRequest",
    "ServableAgent",
    "StdioMCPConfig",
    "serve",
]
