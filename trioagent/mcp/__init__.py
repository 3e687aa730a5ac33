"""MCP servers as tool sources: :class:`MCPClient` over stdio or streamable HTTP.

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
from ._client import MCPClient as MCPClient, MCPClientError as MCPClientError
from ._config import HttpMCPConfig as HttpMCPConfig, StdioMCPConfig as StdioMCPConfig

__all__ = [
    "HttpMCPConfig",
    "MCPCallError",
    "MCPClient",
    "MCPClientError",
    "MCPTool",
    "StdioMCPConfig",
]
