"""The toolkit: registered tools, tool groups, toolkit-wide middlewares, and calling a tool.

The agent uses two methods:

* :meth:`Toolkit.validate_call` — resolve the tool, parse the arguments (with repair) and
  validate them against the tool's schema; raises an
  :class:`~trioagent.exception.AgentOrientedException` whose ``.message`` the model can read;
* :meth:`Toolkit.call_tool` — run toolkit middlewares → the tool's middlewares → the tool,
  streaming chunks to ``emit`` and returning the final :class:`ToolResponse`.  A bad call or a
  failing tool becomes an error result; it never raises for those.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeAlias, TypeVar, cast

from .._core.callables import require_async
from .._core.chain import Chain, Kwargs, Layer
from .._core.copying import deep_copy
from .._core.emit import Emit as ChainEmit
from .._core.json_types import JSONObject
from .._json_repair import json_loads_with_repair
from ..exception import (
    AgentOrientedException,
    DeveloperOrientedException,
    ToolGroupInactiveError,
    ToolInputValidationError,
    ToolNotFoundError,
)
from ..message import ToolCallBlock
from ..permission import PermissionDecision
from ..skill import Skill
from ._base import ToolBase, ToolMiddlewareBase
from ._function import FunctionTool
from ._group import (
    BASIC_GROUP,
    ResetTools,
    ToolGroup,
    activated_groups_of,
    render_meta_tool_response,
)
from ._hints import callable_name
from ._mcp import MCPToolSource, check_sources_connected, list_source_tools
from ._middleware import ToolItem, ToolNextHandler, returning_layer, run_returning
from ._response import Emit, ToolChunk, ToolResponse, error_chunk
from ._schema import remove_title_field
from ._skills import (
    SkillSource,
    SkillViewer,
    collect_skills,
    render_skill_instructions,
    to_skill_sources,
)
from ._worker import CURRENT_CALL_ID

__all__ = ["Toolkit", "ToolkitMiddleware"]

#: A toolkit-wide middleware: ``async def mw(kwargs, next_handler, emit) -> ToolResponse | None``.
#: ``kwargs`` holds ``tool_call`` (a copy of the ToolCallBlock), ``tool`` (the resolved
#: ToolBase) and ``tool_input`` (the parsed arguments, a copy).  Override ``tool_input`` to
#: change the arguments, ``tool`` to redirect the call.
ToolkitMiddleware: TypeAlias = Callable[
    [dict[str, Any], ToolNextHandler, Emit], Awaitable[ToolResponse | None]
]

F = TypeVar("F", bound=Callable[..., object])
M = TypeVar("M", bound=ToolkitMiddleware)


class Toolkit:
    """Registered tools (in groups), toolkit-wide middlewares, and the tool-calling entry points.

    Args:
        tools: tools of the always-active ``"basic"`` group.
        mcps: MCP clients (``trioagent.mcp.MCPClient``) whose tools join the ``"basic"`` group;
            a stateful one must be connected (``async with client:``) first.
        tool_groups: further groups, activated by the model through ``reset_tools``.
        middlewares: toolkit-wide middlewares (first is outermost); see
            :meth:`register_middleware`.
        meta_tool_response: renders ``reset_tools``' answer from the activated groups.
        default_permission: the permission of the functions :meth:`register_function` wraps
            when it is given none (``None``: such a tool asks the user before every call).
        skills_or_loaders: skills of the ``"basic"`` group (see :class:`ToolGroup`).
        skill_instructions: renders the system-prompt section listing the visible skills
            from the skills and the viewer tool's name.

    Raises:
        ValueError: a user group named ``"basic"``, duplicate group names, a tool with an
            invalid input schema, or a stateful MCP client that is not connected.
    """

    def __init__(
        self,
        tools: Sequence[ToolBase] | None = None,
        tool_groups: Sequence[ToolGroup] | None = None,
        middlewares: Sequence[ToolkitMiddleware] | None = None,
        meta_tool_response: Callable[[Sequence[ToolGroup]], str] = render_meta_tool_response,
        *,
        mcps: Sequence[MCPToolSource] | None = None,
        default_permission: PermissionDecision | None = None,
        skills_or_loaders: Sequence[SkillSource] | None = None,
        skill_instructions: Callable[[Sequence[Skill], str], str] = render_skill_instructions,
    ) -> None:
        self.default_permission = default_permission
        groups = list(tool_groups or [])
        if any(group.name == BASIC_GROUP for group in groups):
            raise ValueError(
                "The 'basic' tool group is reserved for the default tool group; pass its tools "
                "with the `tools` argument."
            )
        basic = ToolGroup(
            BASIC_GROUP,
            tools=list(tools or []),
            mcps=list(mcps or []),
            skills_or_loaders=skills_or_loaders,
        )
        check_sources_connected(basic.mcps)
        self.tool_groups: list[ToolGroup] = [basic]
        for group in groups:
            self.add_group(group)
        for group in self.tool_groups:
            for tool in group.tools:
                _check_tool(tool)
        self._middlewares: list[ToolkitMiddleware] = []
        for middleware in middlewares or []:
            self.register_middleware(middleware)
        self.meta_tool = ResetTools(self.tool_groups, meta_tool_response)
        self.skill_viewer = SkillViewer(self.list_skills)
        self._skill_instructions = skill_instructions

    # -- registration ------------------------------------------------------------------------

    def register_function(
        self,
        fn: F,
        /,
        name: str | None = None,
        description: str | None = None,
        input_schema: JSONObject | type | None = None,
        *,
        group_name: str = BASIC_GROUP,
        is_concurrency_safe: bool = True,
        is_read_only: bool = False,
        is_state_injected: bool = False,
        is_background: bool = False,
        background_after: float | None = None,
        blocking: bool | None = None,
        isolate: Literal["thread", "process"] = "thread",
        metadata_schema: JSONObject | None = None,
        middlewares: list[ToolMiddlewareBase] | None = None,
        permission: PermissionDecision | None = None,
    ) -> F:
        """Wrap ``fn`` in a :class:`FunctionTool` and add it to ``group_name``.

        Returns ``fn`` itself, so this also works as a bare decorator
        (``@toolkit.register_function``).  The tool is available through :meth:`get_tool`.

        **Sync functions** run in a worker thread (``isolate="thread"``, the default) or, with
        ``isolate="process"``, in a worker process that a cancellation kills; never on the
        event loop.  ``blocking=`` is deprecated and ignored.  See :class:`FunctionTool`.

        **Permission.** Without ``permission`` (and without the toolkit's
        ``default_permission``) the tool asks before every call: the agent's reply *parks* on a
        ``RequireUserConfirmEvent`` (logged at WARNING), returns "I'm waiting for your
        permission..." with ``finished_reason=None``, and the next reply must resume it
        (``UserConfirmResultEvent``) or abort it (``UserInterruptEvent``).  To let it run::

            toolkit.register_function(fn, permission=PermissionDecision("allow", "read-only"))
        """
        tool = FunctionTool(
            fn,
            name=name,
            description=description,
            input_schema=input_schema,
            is_concurrency_safe=is_concurrency_safe,
            is_read_only=is_read_only,
            is_state_injected=is_state_injected,
            middlewares=middlewares,
            permission=permission if permission is not None else self.default_permission,
            is_background=is_background,
            background_after=background_after,
            metadata_schema=metadata_schema,
            blocking=blocking,
            isolate=isolate,
        )
        self.add_tool(tool, group_name)
        return fn

    #: AgentScope 1.x name of :meth:`register_function`.
    register_tool_function = register_function

    def register_middleware(self, middleware: M) -> M:
        """Append a toolkit-wide middleware (the first registered is outermost).

        ``async def middleware(kwargs, next_handler, emit) -> ToolResponse | None`` follows
        the return form of tool middlewares (details in :mod:`trioagent.tool._middleware`):
        ``await next_handler(sink=None,
        /, **overrides)`` runs the inner middlewares, the tool's own middlewares and the tool
        with ``{**kwargs, **overrides}`` and returns their final :class:`ToolResponse`; their
        chunks go to ``sink`` (default ``emit``).  Return ``None`` to make the accumulation of
        what you emitted the result, or a :class:`ToolResponse` (emitted as one chunk if you
        emitted nothing).  Not calling ``next_handler`` skips the tool.  Toolkit-wide
        middlewares wrap the per-tool ones.  Returns ``middleware`` (usable as a decorator).

        Raises:
            TypeError: not an ``async def`` taking ``(kwargs, next_handler, emit)``.
        """
        require_async(
            middleware,
            f"toolkit middleware {callable_name(middleware)}",
            ("kwargs", "next_handler", "emit"),
        )
        self._middlewares.append(middleware)
        return middleware

    @property
    def middlewares(self) -> list[ToolkitMiddleware]:
        """The toolkit-wide middlewares, outermost first."""
        return self._middlewares

    def add_group(self, group: ToolGroup) -> None:
        """Add a tool group.

        Raises:
            ValueError: a group with that name exists.
        """
        if any(existing.name == group.name for existing in self.tool_groups):
            raise ValueError(f"Tool groups must not contain duplicate names: {group.name!r}")
        for tool in group.tools:
            _check_tool(tool)
        check_sources_connected(group.mcps)
        self.tool_groups.append(group)

    def add_tool(self, tool: ToolBase | Sequence[ToolBase], group_name: str = BASIC_GROUP) -> None:
        """Add one or more tools to ``group_name``; a same-name tool there is replaced.

        Raises:
            ValueError: no such group, or an invalid input schema.
            TypeError: not a :class:`ToolBase`.
        """
        new_tools: list[ToolBase] = (
            list(tool) if isinstance(tool, list | tuple) else [cast(ToolBase, tool)]
        )
        for new_tool in new_tools:
            _check_tool(new_tool)
        group = self._group(group_name)
        for new_tool in new_tools:
            group.tools = [t for t in group.tools if t.name != new_tool.name]
            group.tools.append(new_tool)

    def remove_tool(self, name: str | Sequence[str]) -> None:
        """Remove the named tool(s) from every group (unknown names are ignored)."""
        names = {name} if isinstance(name, str) else set(name)
        for group in self.tool_groups:
            group.tools = [t for t in group.tools if t.name not in names]

    def clear(self) -> None:
        """Remove every tool and every non-basic group."""
        self.tool_groups[:] = [ToolGroup(BASIC_GROUP)]

    def _group(self, name: str) -> ToolGroup:
        for group in self.tool_groups:
            if group.name == name:
                return group
        raise ValueError(
            f"Cannot find group '{name}' in toolkit, only "
            f"{[g.name for g in self.tool_groups]} are available."
        )

    # -- lookup ------------------------------------------------------------------------------

    def available_tools(
        self, groups: Sequence[str] | None = None
    ) -> dict[str, tuple[ToolBase, str]]:
        """``name → (tool, group name)`` for ``"basic"`` plus ``groups``, in schema order.

        The ``Skill`` viewer comes first whenever one of these groups has skills (sources:
        a loader that finds nothing still counts), then ``reset_tools`` whenever there is a
        group besides ``"basic"``.  Each group's own tools come before its MCP clients' tools
        (an MCP client that cannot list its tools is logged and skipped).  A later tool with
        the same name replaces an earlier one (keeping its position).
        """
        wanted = {BASIC_GROUP, *(groups or ())}
        tools: dict[str, tuple[ToolBase, str]] = {}
        with_skills = [g.name for g in self.tool_groups if g.name in wanted and g.skills_or_loaders]
        if with_skills:
            tools[self.skill_viewer.name] = (self.skill_viewer, with_skills[0])
        if any(group.name != BASIC_GROUP for group in self.tool_groups):
            tools[self.meta_tool.name] = (self.meta_tool, BASIC_GROUP)
        for group in self.tool_groups:
            if group.name in wanted:
                for tool in [*group.tools, *list_source_tools(group.mcps, group.name)]:
                    tools[tool.name] = (tool, group.name)
        return tools

    def _all_tools(self) -> dict[str, tuple[ToolBase, str]]:
        return self.available_tools([g.name for g in self.tool_groups])

    # -- skills ------------------------------------------------------------------------------

    def add_skills(self, skills: Sequence[SkillSource], group_name: str = BASIC_GROUP) -> None:
        """Add skills (paths, :class:`~trioagent.skill.Skill` objects or loaders) to a group.

        Raises:
            ValueError: no such group.
            TypeError: an item is none of those.
        """
        self._group(group_name).skills_or_loaders.extend(to_skill_sources(skills))

    async def list_skills(self, groups: Sequence[str] | None = None) -> dict[str, Skill]:
        """The skills visible with ``groups`` active (``"basic"`` always), by name."""
        wanted = {BASIC_GROUP, *(groups or ())}
        return await collect_skills(
            [(g.name, list(g.skills_or_loaders)) for g in self.tool_groups if g.name in wanted]
        )

    async def get_skill_instructions(
        self, activated_groups: Sequence[str] | None = None
    ) -> str | None:
        """The system-prompt section listing the visible skills, or ``None`` without any.

        ``activated_groups=None`` means every group.
        """
        if activated_groups is None:
            activated_groups = [g.name for g in self.tool_groups]
        skills = await self.list_skills(activated_groups)
        if not skills:
            return None
        return self._skill_instructions(list(skills.values()), self.skill_viewer.name)

    @property
    def abandoned_threads(self) -> int:
        """Worker threads of this toolkit's sync function tools still running after their call
        was cancelled (each is counted until it ends; see :class:`FunctionTool`)."""
        return sum(
            tool.abandoned_threads
            for group in self.tool_groups
            for tool in group.tools
            if isinstance(tool, FunctionTool)
        )

    def get_tool(self, name: str) -> ToolBase | None:
        """The tool named ``name`` in any group, active or not, or ``None``."""
        found = self._all_tools().get(name)
        return found[0] if found is not None else None

    def get_tool_schemas(self, groups: Sequence[str] | None = None) -> list[JSONObject]:
        """OpenAI-style function schemas of the tools available with ``groups`` active.

        Each is ``{"type": "function", "function": {"name", "description", "parameters"}}``,
        ``parameters`` being a title-free copy of the tool's input schema, in registration
        order.
        """
        return [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": remove_title_field(deep_copy(tool.input_schema)),
                },
            }
            for tool, _ in self.available_tools(groups).values()
        ]

    def check_tool_available(
        self, tool_name: str, activated_groups: Sequence[str] | None = None
    ) -> ToolBase:
        """The tool, if it is available with ``activated_groups`` active.

        Raises:
            ToolGroupInactiveError: it exists in a group that is not active.
            ToolNotFoundError: it does not exist.
        """
        found = self.available_tools(activated_groups).get(tool_name)
        if found is not None:
            return found[0]
        anywhere = self._all_tools().get(tool_name)
        if anywhere is not None:
            raise ToolGroupInactiveError(
                f"ToolGroupInactiveError: The tool '{tool_name}' in group '{anywhere[1]}' is "
                "currently inactive. You should first activate the group by calling the "
                f"'{self.meta_tool.name}' tool."
            )
        raise ToolNotFoundError(f"ToolNotFoundError: The tool named '{tool_name}' doesn't exist.")

    # -- calling -----------------------------------------------------------------------------

    def validate_call(
        self, tool_call: ToolCallBlock, activated_groups: Sequence[str] | None = None
    ) -> tuple[ToolBase, JSONObject]:
        """Resolve the tool and parse and validate the call's arguments.

        Raises:
            ToolNotFoundError | ToolGroupInactiveError: see :meth:`check_tool_available`.
            ToolJSONDecodeError: the arguments are not a JSON object, even after repair.
            ToolInputValidationError: ``"Input validation failed for tool '<n>': <msg> (at
                <json path>)"``.
        """
        tool = self.check_tool_available(tool_call.name, activated_groups)
        tool_input = json_loads_with_repair(tool_call.input, tool.input_schema)
        _validate_input(tool, tool_input)
        return tool, tool_input

    async def call_tool(
        self,
        tool_call: ToolCallBlock,
        *,
        state: object = None,
        tool_input: JSONObject | None = None,
        emit: Callable[[ToolChunk], Awaitable[None]] | None = None,
    ) -> ToolResponse:
        """Run the call through the middlewares and the tool; return the final response.

        * Without ``tool_input`` the call is validated first (:meth:`validate_call`, with the
          groups recorded in ``state.tool_context.activated_groups``).  With ``tool_input``
          (already validated, perhaps rewritten by a permission decision) the tool is looked
          up in every group and the arguments are used as given.
        * ``_agent_state=state`` is passed when the tool is state-injected (and neither MCP
          nor external).
        * Every chunk goes to ``emit`` (when given).  The result is the outermost layer's
          final response (see :meth:`register_middleware`), a copy with ``id = tool_call.id``.
        * An unknown tool, bad or invalid arguments, or an exception from a tool or middleware
          becomes one error chunk — the text is an ``AgentOrientedException``'s ``.message``,
          otherwise ``"<ExceptionType>: <message>"`` — appended to what was streamed so far,
          and an ``error`` response.  A :class:`DeveloperOrientedException` propagates, as
          does an exception raised by ``emit`` itself.  ``trio.Cancelled`` is never caught.
        """
        accumulated = ToolResponse(id=tool_call.id)
        listener_error: Exception | None = None
        finished = False

        async def outer_emit(chunk: ToolChunk) -> None:
            nonlocal listener_error
            if finished:
                raise DeveloperOrientedException(
                    f"a chunk was emitted for tool call {tool_call.id!r} ({tool_call.name}) "
                    "after that call returned: a middleware kept its emit"
                )
            accumulated.append_chunk(chunk)
            if emit is not None:
                try:
                    await emit(chunk)
                except Exception as exc:
                    listener_error = exc  # the consumer failed, not the tool: propagate
                    raise

        try:
            if tool_input is None:
                tool, arguments = self.validate_call(tool_call, activated_groups_of(state))
            else:
                tool = self._tool_for_validated_call(tool_call.name)
                arguments = deep_copy(tool_input)
            kwargs = {"tool_call": deep_copy(tool_call), "tool": tool, "tool_input": arguments}
            chain = Chain(self._layers(), _make_core(state))
            result = await run_returning(functools.partial(chain.run, kwargs), outer_emit)
        except DeveloperOrientedException:
            raise
        except Exception as exc:
            if listener_error is not None or _has_developer_error(exc):
                raise
            await outer_emit(error_chunk(_model_readable(exc)))
            return accumulated
        else:
            final = deep_copy(result)
            final.id = tool_call.id
            return final
        finally:
            finished = True  # the call is over: a chunk emitted from now on is a bug

    def _layers(self) -> list[Layer[ToolItem]]:
        return [returning_layer(mw, f"tool middleware {_describe(mw)}") for mw in self._middlewares]

    def _tool_for_validated_call(self, name: str) -> ToolBase:
        found = self._all_tools().get(name)
        if found is None:
            raise ToolNotFoundError(f"ToolNotFoundError: The tool named '{name}' doesn't exist.")
        return found[0]


def _make_core(state: object) -> Callable[[Kwargs, ChainEmit[ToolItem]], Awaitable[None]]:
    async def run_tool(kwargs: Kwargs, emit: ChainEmit[ToolItem]) -> None:
        tool: ToolBase = kwargs["tool"]
        arguments = dict(kwargs["tool_input"])
        if tool.is_state_injected and not tool.is_mcp and not tool.is_external_tool:
            arguments["_agent_state"] = state
        token = CURRENT_CALL_ID.set(kwargs["tool_call"].id)  # names the call in thread logs
        try:
            response = await tool.run(arguments, emit)
        finally:
            CURRENT_CALL_ID.reset(token)
        await emit(response)

    return run_tool


def _describe(layer: object) -> str:
    while isinstance(layer, functools.partial):
        layer = layer.func
    owner = getattr(layer, "__self__", None)
    if owner is not None:
        return type(owner).__name__
    return getattr(layer, "__qualname__", None) or repr(layer)


def _check_tool(tool: Any) -> None:
    if not isinstance(tool, ToolBase):
        raise TypeError(f"expected a ToolBase, got {type(tool).__name__}")
    tool.validate_name()
    tool.validate_schema()
    tool.check_middlewares()


#: Validators by the id of their schema (the schema kept with its validator, so an id is never
#: reused while cached); building one checks the schema's dialect and costs more than most
#: validations, and every tool call of a reply validates against the same few schemas.
_VALIDATORS: collections.OrderedDict[int, tuple[JSONObject, Any]] = collections.OrderedDict()
_MAX_VALIDATORS = 256


def _validator_for(schema: JSONObject) -> Any:
    cached = _VALIDATORS.get(id(schema))
    if cached is not None and cached[0] is schema:
        _VALIDATORS.move_to_end(id(schema))
        return cached[1]
    import jsonschema  # imported on first use, not with trioagent

    validator = jsonschema.validators.validator_for(schema)(schema)
    _VALIDATORS[id(schema)] = (schema, validator)
    if len(_VALIDATORS) > _MAX_VALIDATORS:
        _VALIDATORS.popitem(last=False)
    return validator


def _validate_input(tool: ToolBase, tool_input: JSONObject) -> None:
    import jsonschema  # imported on first use, not with trioagent

    validator = _validator_for(tool.input_schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(tool_input))
    if error is not None:
        raise ToolInputValidationError(
            f"Input validation failed for tool '{tool.name}': {error.message} "
            f"(at {error.json_path})"
        )


def _has_developer_error(exc: Exception) -> bool:
    return isinstance(exc, ExceptionGroup) and exc.subgroup(DeveloperOrientedException) is not None


def _model_readable(exc: BaseException) -> str:
    """The text an error result shows the model."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_model_readable(sub) for sub in exc.exceptions)
    if isinstance(exc, AgentOrientedException):
        return exc.message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
