"""Tool groups and the ``reset_tools`` meta tool.

Tools of the ``"basic"`` group are always available.  Other groups are off until the model
activates them by calling ``reset_tools`` with one boolean per group; the booleans are the final
state (unset → off).  The activated group names live in the agent state
(``state.tool_context.activated_groups``), so they persist with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from .._core.json_types import JSONObject, JSONValue
from ..exception import DeveloperOrientedException
from ..message import TextBlock, ToolResultState
from ..permission import PermissionBehavior, PermissionContext, PermissionDecision
from ..skill import Skill, SkillLoaderBase
from ._base import ToolBase
from ._mcp import MCPToolSource
from ._response import Emit, ToolChunk
from ._skills import to_skill_sources

__all__ = ["BASIC_GROUP", "ResetTools", "ToolGroup", "render_meta_tool_response"]

BASIC_GROUP = "basic"


def _copy_tools(tools: Sequence[ToolBase] | None) -> list[ToolBase]:
    return list(tools or [])


def _copy_mcps(mcps: Sequence[MCPToolSource] | None) -> list[MCPToolSource]:
    return list(mcps or [])


@attrs.define
class ToolGroup:
    """A named set of tools the model can switch on and off together.

    ``description`` (required except for ``"basic"``) tells the model when to activate the
    group; ``instructions`` are returned by ``reset_tools`` when the group is activated.
    ``mcps`` are MCP clients (``trioagent.mcp.MCPClient``) whose tools belong to the group.
    ``skills_or_loaders`` are the group's skills: directory paths (each becomes a
    :class:`~trioagent.skill.LocalSkillLoader`), :class:`~trioagent.skill.Skill` objects or
    :class:`~trioagent.skill.SkillLoaderBase` loaders (anything else: ``TypeError``).
    """

    name: str
    description: str | None = None
    instructions: str | None = None
    tools: list[ToolBase] = attrs.field(factory=list, converter=_copy_tools)
    mcps: list[MCPToolSource] = attrs.field(factory=list, converter=_copy_mcps)
    skills_or_loaders: list[Skill | SkillLoaderBase] = attrs.field(
        factory=list, converter=to_skill_sources
    )

    def __attrs_post_init__(self) -> None:
        if self.name != BASIC_GROUP and self.description is None:
            raise ValueError(
                f"The tool group description is required for tool group '{self.name}' "
                "(only the 'basic' tool group can omit it)."
            )


_INSTRUCTIONS_PREAMBLE = (
    "The tool instructions are a collection of suggestions, rules and notifications about how "
    "to use the tools in the activated groups."
)


def render_meta_tool_response(groups: Sequence[ToolGroup]) -> str:
    """The default text ``reset_tools`` returns for the activated ``groups``."""
    if not groups:
        return "All tool groups are currently deactivated."
    text = "The currently activated tool group(s): " + ", ".join(g.name for g in groups) + "."
    if any(g.instructions is not None for g in groups):
        body = "".join(
            f'<group name="{g.name}">{g.instructions}</group>' for g in groups if g.instructions
        )
        text += f"\n<tool-instructions>\n{_INSTRUCTIONS_PREAMBLE}\n{body}\n</tool-instructions>"
    return text


class ResetTools(ToolBase):
    """The meta tool that sets which tool groups are active.

    Its input schema is computed from the toolkit's groups at the time it is read: one boolean
    property per non-basic group (default ``false``, description = the group's).
    """

    name = "reset_tools"
    description = (
        "This tool allows you to reset your equipped tools based on your current task "
        "requirements. These tools are organized into different groups, and you can "
        "activate/deactivate them by specifying the boolean values for each group in the "
        "input.\n\n"
        "**Important: The input booleans are the final state of their corresponding tool "
        "groups, not incremental changes.** Any group not explicitly set to True will be "
        "deactivated, regardless of its previous state.\n\n"
        "**Best practice**: Actively manage your tool groups——activate only what you need "
        "for the current task, and promptly deactivate groups as soon as they are no longer "
        "needed to conserve context space.\n\n"
        "This tool will return the usage instructions for the activated tool groups, which you "
        "**MUST pay attention to and follow**. You can also reuse this tool to re-check the "
        "instructions."
    )
    is_concurrency_safe = True
    is_read_only = False
    is_state_injected = True

    def __init__(
        self,
        groups: list[ToolGroup],
        render: Callable[[Sequence[ToolGroup]], str] = render_meta_tool_response,
    ) -> None:
        super().__init__()
        self._groups = groups
        self._render = render

    @property
    def input_schema(self) -> JSONObject:
        """One boolean per non-basic group, computed live."""
        properties = {
            group.name: {"default": False, "description": group.description, "type": "boolean"}
            for group in self._groups
            if group.name != BASIC_GROUP
        }
        return {"properties": properties, "type": "object"}

    @input_schema.setter
    def input_schema(self, value: JSONObject) -> None:
        raise AttributeError("reset_tools' input schema is derived from the tool groups")

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        """Always allowed: it only changes which tools the model sees."""
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message="The meta tool is always allowed to be called.",
        )

    async def call(
        self, emit: Emit, /, _agent_state: object = None, **kwargs: JSONValue
    ) -> ToolChunk:
        """Validate the booleans, replace the activated groups in place, report them."""
        activated = _activated_groups_of(_agent_state)
        if activated is None:
            raise DeveloperOrientedException(
                "reset_tools requires the agent state (with tool_context.activated_groups) "
                "to be injected"
            )
        available = [g.name for g in self._groups if g.name != BASIC_GROUP]
        unknown = [key for key in kwargs if key not in available]
        if unknown:
            return _error(
                f"Invalid group name(s): {', '.join(unknown)}. "
                f"The current available groups are: {', '.join(available)}"
            )
        for key, value in kwargs.items():
            if not isinstance(value, bool):
                return _error(
                    f"Invalid arguments: the argument '{key}' should be a bool value, "
                    f"but got {type(value)}."
                )
        wanted = {key for key, value in kwargs.items() if value}
        activated[:] = [g.name for g in self._groups if g.name in wanted]
        groups = [g for g in self._groups if g.name in wanted]
        return ToolChunk(
            content=[TextBlock(text=self._render(groups))], state=ToolResultState.SUCCESS
        )


def _error(text: str) -> ToolChunk:
    return ToolChunk(content=[TextBlock(text=text)], state=ToolResultState.ERROR)


def _activated_groups_of(state: object) -> list[str] | None:
    """``state.tool_context.activated_groups`` when the state has it (duck-typed)."""
    groups = getattr(getattr(state, "tool_context", None), "activated_groups", None)
    return groups if isinstance(groups, list) else None


def activated_groups_of(state: object) -> list[str]:
    """The activated group names recorded in ``state`` (``[]`` when it records none)."""
    return list(_activated_groups_of(state) or [])
