"""An agent's defaults for the MCP clients in its toolkit."""

from __future__ import annotations

from ..model import ChatModelBase
from ..permission import PermissionEngine
from ..tool import Toolkit

__all__ = ["offer_defaults_to_mcp_clients"]


def offer_defaults_to_mcp_clients(
    toolkit: Toolkit, model: ChatModelBase, permissions: PermissionEngine
) -> None:
    """MCP clients in the toolkit may answer their servers' sampling requests with this
    agent's model, checked by its permission engine (``trioagent.mcp.MCPSampling`` without
    a model).  Duck-typed (``adopt_agent_defaults``): the MCP package sits below this one
    and is optional."""
    for group in toolkit.tool_groups:
        for source in group.mcps:
            adopt = getattr(source, "adopt_agent_defaults", None)
            if callable(adopt):
                adopt(model, permissions)
