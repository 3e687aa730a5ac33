"""The tool protocol: :class:`ToolBase` and per-tool :class:`ToolMiddlewareBase`.

A tool is an object with a name, a description, a JSON input schema and a few flags, whose
:meth:`ToolBase.call` does the work.  Tools stream by awaiting the ``emit`` they are handed
(there are no async generators in trioagent):

.. code-block:: python

    class Countdown(ToolBase):
        name = "countdown"
        description = "Count down from n."
        input_schema = {"type": "object", "properties": {"n": {"type": "integer"}}}

        async def call(self, emit, /, n):
            for i in range(n, 0, -1):
                await emit(ToolChunk(content=[TextBlock(text=f"{i} ")], is_last=False))
            return "liftoff"            # becomes the last chunk

:meth:`ToolBase.run` wraps ``call`` with the tool's middlewares and returns the final
:class:`ToolResponse`; the toolkit adds toolkit-wide middlewares, argument parsing, state
injection and error handling around it.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping

from .._core.callables import require_async
from .._core.chain import Chain, Kwargs, Layer
from .._core.emit import Emit as ChainEmit
from .._core.json_types import JSONObject, JSONValue
from ..message import ToolResultBlock, ToolResultState
from ..permission import (
    PermissionBehavior,
    PermissionContext,
    PermissionDecision,
    PermissionRule,
)
from ._middleware import ChunkCollector, ToolItem, ToolNextHandler, returning_layer, run_returning
from ._response import Emit, ToolResponse, chunk_from_value

__all__ = [
    "DANGEROUS_DIRECTORIES",
    "DANGEROUS_FILES",
    "TOOL_NAME_PATTERN",
    "ToolBase",
    "ToolMiddlewareBase",
]

#: What every provider accepts as a tool (function) name.
TOOL_NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")

#: Files whose edits can run code or leak credentials; tools ask before touching them.
DANGEROUS_FILES: tuple[str, ...] = (
    ".gitconfig",
    ".gitmodules",
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zprofile",
    ".profile",
    ".ssh/config",
    ".ssh/authorized_keys",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".env",
    ".envrc",
    ".env.local",
    ".env.development",
    ".env.development.local",
    ".env.test",
    ".env.test.local",
    ".env.staging",
    ".env.production",
    ".env.production.local",
)
#: Directories holding configuration or keys; tools ask before touching anything inside.
DANGEROUS_DIRECTORIES: tuple[str, ...] = (".git", ".vscode", ".idea", ".ssh")


class ToolMiddlewareBase:
    """Wraps every invocation of one tool instance (onion order: first listed is outermost).

    Override :meth:`on_tool_call`.  The contract is the return form of tool middlewares (see
    :mod:`trioagent.tool._middleware`): ``await next_handler(sink=None, /, **overrides)`` runs the
    inner layers and the tool with ``{**input_kwargs, **overrides}`` and returns their final
    :class:`ToolResponse`; their chunks go to ``sink`` (default: ``emit``).  Return ``None`` to
    make your result the accumulation of what you emitted, or return a :class:`ToolResponse`
    (emitted as one chunk if you emitted nothing).  Not calling ``next_handler`` skips the tool.

    Example — upper-case every text chunk::

        class Upper(ToolMiddlewareBase):
            async def on_tool_call(self, tool, input_kwargs, next_handler, emit):
                async def sink(chunk):
                    for block in chunk.content:
                        if isinstance(block, TextBlock):
                            block.text = block.text.upper()
                    await emit(chunk)

                await next_handler(sink)   # result = accumulation of the upper-cased chunks
    """

    async def on_tool_call(
        self,
        tool: ToolBase,
        input_kwargs: JSONObject,
        next_handler: ToolNextHandler,
        emit: Emit,
    ) -> ToolResponse | None:
        """Intercept one invocation of ``tool``; the default just runs the inner layers."""
        return await next_handler()


class ToolBase:
    """Base class of every tool.

    Class attributes (override per subclass or per instance):

    * ``name``, ``description``, ``input_schema`` — what the model sees; ``input_schema`` must
      be a JSON schema ``{"type": "object", "properties": {...}}`` (checked by
      :meth:`validate_schema` when the tool is added to a toolkit).
    * ``is_concurrency_safe`` — may run concurrently with other safe calls of the same round.
    * ``is_read_only`` — no side effects (permission fast path; see :meth:`check_read_only`).
    * ``is_external_tool`` — executed by the caller, not here (the agent parks the reply).
    * ``is_state_injected`` — receives the agent state as the ``_agent_state`` argument.
    * ``metadata_schema`` — JSON schema an external executor's result metadata must satisfy.
    * ``is_background`` — the agent runs the call in its supervision nursery (inside
      ``async with agent:``), and the reply gets a "running in background" result.
    * ``background_after`` — seconds after which a still-running call moves to the background.
    * ``is_mcp`` / ``mcp_name`` — set by MCP adapters.

    Override :meth:`call` to implement the tool.
    """

    name: str = ""
    description: str = ""
    input_schema: JSONObject = {"type": "object", "properties": {}}  # noqa: RUF012
    is_concurrency_safe: bool = False
    is_read_only: bool = False
    is_external_tool: bool = False
    is_state_injected: bool = False
    metadata_schema: JSONObject | None = None
    is_background: bool = False
    background_after: float | None = None
    is_mcp: bool = False
    mcp_name: str | None = None
    dangerous_files: tuple[str, ...] = DANGEROUS_FILES
    dangerous_directories: tuple[str, ...] = DANGEROUS_DIRECTORIES

    def __init__(
        self,
        middlewares: list[ToolMiddlewareBase] | None = None,
        *,
        is_background: bool | None = None,
        background_after: float | None = None,
    ) -> None:
        """Attach per-instance ``middlewares``; optionally override the background flags."""
        self._middlewares: list[ToolMiddlewareBase] = list(middlewares or [])
        self.check_middlewares()
        if is_background is not None:
            self.is_background = is_background
        if background_after is not None:
            if not background_after > 0:  # also NaN
                raise ValueError("background_after must be a positive number of seconds")
            self.background_after = background_after

    @property
    def middlewares(self) -> list[ToolMiddlewareBase]:
        """This tool's middlewares (works even if a subclass skipped ``__init__``)."""
        found: list[ToolMiddlewareBase] | None = self.__dict__.get("_middlewares")
        if found is None:
            found = []
            self.__dict__["_middlewares"] = found
        return found

    # -- execution ---------------------------------------------------------------------------

    async def call(self, emit: Emit, /, **kwargs: JSONValue) -> object:
        """Do the work.  The override point.

        Stream by ``await emit(ToolChunk(...))``; then return the final value, which becomes
        the last chunk: ``None`` (nothing more), a :class:`ToolChunk`, a ``str``, a
        ``TextBlock`` / ``DataBlock`` or a list of them, or any JSON-serializable value.  A
        returned :class:`ToolResponse` is the final result as is (emitted as one chunk if the
        tool emitted nothing).
        """
        if self.is_external_tool:
            raise RuntimeError(
                f"{type(self).__name__} is an external tool and should not be called directly"
            )
        raise NotImplementedError(f"{type(self).__name__} does not implement call")

    async def run(
        self, tool_input: Mapping[str, JSONValue] | None = None, emit: Emit | None = None
    ) -> ToolResponse:
        """Run the tool's middlewares and :meth:`call`; chunks go to ``emit``.

        Returns the final :class:`ToolResponse` (see :mod:`trioagent.tool._middleware` for how
        middleware results combine).  Exceptions propagate; the toolkit turns them into error
        results.
        """
        layers = [_bind_middleware(middleware, self) for middleware in self.middlewares]
        chain = Chain(layers, self._call_core)
        return await run_returning(functools.partial(chain.run, dict(tool_input or {})), emit)

    async def __call__(self, *args: object, **kwargs: JSONValue) -> ToolResponse:
        """``await tool(**kwargs)``: run without a listener and return the final response.

        Raises:
            TypeError: a positional argument was given (tools take keyword arguments only).
        """
        if args:
            raise TypeError(
                f"{type(self).__name__} must be called with keyword arguments only, "
                f"but got {len(args)} positional argument(s)."
            )
        return await self.run(kwargs)

    async def _call_core(self, kwargs: Kwargs, emit: ChainEmit[ToolItem]) -> None:
        collector = ChunkCollector(emit)
        result = await self.call(collector, **kwargs)
        if not isinstance(result, ToolResponse):
            chunk = chunk_from_value(result)
            if chunk is not None:
                await collector(chunk)
            result = None
        await emit(await collector.final(result, "the tool"))

    # -- permissions -------------------------------------------------------------------------

    async def check_permissions(
        self, tool_input: JSONObject, context: PermissionContext
    ) -> PermissionDecision:
        """The tool's own opinion on this call; the default defers to the engine."""
        return PermissionDecision(
            behavior=PermissionBehavior.PASSTHROUGH,
            message=f"{self.name} has no tool-specific permission check.",
        )

    async def check_read_only(self, tool_input: JSONObject) -> bool:
        """Whether this call is read-only; defaults to :attr:`is_read_only`."""
        return self.is_read_only

    async def match_rule(self, rule_content: str | None, tool_input: JSONObject) -> bool:
        """Whether a rule's content matches this call; by default only ``None`` (tool-level)."""
        return rule_content is None

    async def generate_suggestions(self, tool_input: JSONObject) -> list[PermissionRule]:
        """Rules to offer the user when asking; by default "always allow this tool"."""
        return [
            PermissionRule(
                tool_name=self.name,
                rule_content=None,
                behavior=PermissionBehavior.ALLOW,
                source="suggested",
            )
        ]

    async def check_external_result(self, result: ToolResultBlock) -> None:
        """Reject an external executor's result whose metadata breaks :attr:`metadata_schema`.

        Only successful results are checked (the schema describes a successful run).

        Raises:
            jsonschema.ValidationError: the metadata does not match.
        """
        if self.metadata_schema is not None and result.state == ToolResultState.SUCCESS:
            import jsonschema  # imported on first use, not with trioagent

            jsonschema.validate(result.metadata, self.metadata_schema)

    # -- schema ------------------------------------------------------------------------------

    def check_middlewares(self) -> None:
        """Check that each middleware's ``on_tool_call`` is an ``async def`` taking
        ``(tool, input_kwargs, next_handler, emit)``.

        Raises:
            TypeError: one is not (named by class).
        """
        for middleware in self.middlewares:
            require_async(
                getattr(middleware, "on_tool_call", None),
                f"{type(middleware).__name__}.on_tool_call",
                ("tool", "input_kwargs", "next_handler", "emit"),
            )

    def validate_name(self, fix: str = "set its `name`") -> None:
        """Check that :attr:`name` is one every provider accepts (``^[a-zA-Z0-9_-]{1,64}$``).

        Raises:
            ValueError: it is not; ``fix`` says what to change.
        """
        name = self.name
        if not name:
            raise ValueError(f"{type(self).__name__} has no name; {fix}")
        if not isinstance(name, str) or TOOL_NAME_PATTERN.fullmatch(name) is None:
            raise ValueError(
                f"tool name {name!r} of {type(self).__name__} does not match "
                f"^{TOOL_NAME_PATTERN.pattern}$, the pattern model providers accept for tool "
                f"names; {fix}"
            )

    def validate_schema(self) -> None:
        """Check that :attr:`input_schema` is an object schema that jsonschema accepts.

        Raises:
            ValueError: ``"Invalid input_schema: ..."``.
        """
        schema = self.input_schema
        if not (
            isinstance(schema, dict)
            and schema.get("type") == "object"
            and isinstance(schema.get("properties"), dict)
        ):
            raise ValueError(
                f"Invalid input_schema: {schema!r}. Expected a JSON schema of the form "
                '{"type": "object", "properties": {...}}.'
            )
        import jsonschema  # imported on first use, not with trioagent

        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"Invalid input_schema: {exc.message}") from exc

    # -- path helpers for file-touching tools -------------------------------------------------

    def _path_in_allowed_working_path(self, file_path: str, context: PermissionContext) -> bool:
        """Whether ``file_path`` is inside the cwd or one of the context's working directories."""
        target = os.path.realpath(os.path.expanduser(file_path))
        for directory in [os.getcwd(), *context.working_directories]:
            base = os.path.realpath(os.path.expanduser(directory))
            if target == base or target.startswith(base + os.sep):
                return True
        return False

    def _is_dangerous_path(self, file_path: str) -> bool:
        """Whether ``file_path`` names a dangerous file or lies in a dangerous directory."""
        resolved = os.path.realpath(os.path.expanduser(file_path))
        parts = [part.lower() for part in resolved.split(os.sep) if part]
        if os.path.basename(resolved).lower() in {f.lower() for f in self.dangerous_files}:
            return True
        dangerous_dirs = {d.lower() for d in self.dangerous_directories}
        return any(part in dangerous_dirs for part in parts)


def _bind_middleware(middleware: ToolMiddlewareBase, tool: ToolBase) -> Layer[ToolItem]:
    async def on_tool_call(
        kwargs: Kwargs, next_handler: ToolNextHandler, emit: Emit
    ) -> ToolResponse | None:
        return await middleware.on_tool_call(tool, kwargs, next_handler, emit)

    return returning_layer(on_tool_call, f"tool middleware {type(middleware).__qualname__}")
