"""An official-SDK MCP server whose tools ask the user (``Resolve(Elicit)``), for
``test_mcp_park.py``: in process, or over stdio when run as a script."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from pydantic import BaseModel

SCRIPT = Path(__file__)


class Color(BaseModel):
    color: str


class Finish(BaseModel):
    finish: str


def ask_color() -> Elicit[Color]:
    return Elicit("Which color?", Color)


def ask_finish() -> Elicit[Finish]:
    return Elicit("Matte or gloss?", Finish)


def painter(painted: list[str]) -> MCPServer:
    """``paint`` asks one question (and runs on decline), ``varnish`` two; each run is
    recorded in ``painted``."""
    server = MCPServer("painter")

    @server.tool()
    def paint(wall: str, choice: Annotated[ElicitationResult[Color], Resolve(ask_color)]) -> str:
        """Paint a wall in the color the user picks."""
        if not isinstance(choice, AcceptedElicitation):
            painted.append(f"{wall}: {choice.action}")
            return f"{wall} left as it is ({choice.action})"
        painted.append(f"{wall}: {choice.data.color}")
        return f"{wall} painted {choice.data.color}"

    @server.tool()
    def varnish(
        wall: str,
        color: Annotated[Color, Resolve(ask_color)],
        finish: Annotated[Finish, Resolve(ask_finish)],
    ) -> str:
        """Varnish a wall: two questions."""
        painted.append(f"{wall}: {color.color} {finish.finish}")
        return f"{wall} varnished {color.color}, {finish.finish}"

    return server


if __name__ == "__main__":
    painter([]).run("stdio")
