"""``AgentState``: everything an agent remembers, serializable to JSON.

Save and restore with :mod:`trioagent.serialization`::

    payload = dumps(agent.state)
    agent = Agent(..., state=loads(payload, AgentState))
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import Any

import attrs

from .._core.ids import generate_id
from ..message import (
    ContentBlock,
    DataBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
)
from ..permission import PermissionContext
from ..serialization import converter
from ..tool import (
    ClassSchema,
    ReadCacheEntry,
    Task,
    TaskContext,
    TaskState,
    ToolContext,
    is_schema_class,
)

__all__ = [
    "AgentState",
    "ReadCacheEntry",
    "ReplyContext",
    "Task",
    "TaskContext",
    "TaskState",
    "ToolContext",
]


@attrs.define(kw_only=True)
class ReplyContext:
    """The reply in progress.

    ``structured_schema`` is a JSON-schema dict, or in process a class (a pydantic model, an
    attrs class, a dataclass or a ``TypedDict``); it is saved as its JSON schema.
    """

    reply_id: str = attrs.field(factory=generate_id)
    cur_iter: int = 0
    structured_schema: Any = None
    structured_output: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class AgentState:
    """The agent's memory: context, summary, the reply in progress, permissions and
    free per-middleware storage (``middle_context``)."""

    session_id: str = attrs.field(factory=generate_id)
    summary: str | list[TextBlock | DataBlock] = ""
    context: list[Msg] = attrs.field(factory=list)
    reply_context: ReplyContext = attrs.field(factory=ReplyContext)
    permission_context: PermissionContext = attrs.field(factory=PermissionContext)
    tool_context: ToolContext = attrs.field(factory=ToolContext)
    tasks_context: TaskContext = attrs.field(factory=TaskContext)
    middle_context: dict[str, Any] = attrs.field(factory=dict)

    @property
    def reply_id(self) -> str:
        return self.reply_context.reply_id

    @reply_id.setter
    def reply_id(self, value: str) -> None:
        self.reply_context.reply_id = value

    @property
    def cur_iter(self) -> int:
        return self.reply_context.cur_iter

    @cur_iter.setter
    def cur_iter(self, value: int) -> None:
        self.reply_context.cur_iter = value

    def reply_message(self, name: str) -> Msg | None:
        """The tail message if it is ``name``'s assistant message."""
        if not self.context:
            return None
        last = self.context[-1]
        if last.role == "assistant" and last.name == name:
            return last
        return None

    def append_context(self, name: str, blocks: Sequence[ContentBlock]) -> Msg:
        """Add blocks to the current reply's assistant message, creating it when needed.

        The tail message is extended when it is ``name``'s assistant message with
        ``id == reply_id``; otherwise a new assistant message with that id is appended.
        """
        last = self.reply_message(name)
        if last is not None and last.id == self.reply_id:
            last.content.extend(blocks)
            return last
        msg = Msg(name, list(blocks), "assistant", id=self.reply_id)
        self.context.append(msg)
        return msg

    def get_awaiting_tool_calls(self, name: str) -> list[ToolCallBlock]:
        """Calls of the tail message waiting for the user (``asking``) or for an external
        result (``submitted`` without a result)."""
        last = self.reply_message(name)
        if last is None:
            return []
        answered = {b.id for b in last.content if isinstance(b, ToolResultBlock)}
        return [
            b
            for b in last.content
            if isinstance(b, ToolCallBlock)
            and (
                b.state == ToolCallState.ASKING
                or (b.state == ToolCallState.SUBMITTED and b.id not in answered)
            )
        ]

    def has_awaiting_tool_calls(self, name: str) -> bool:
        return bool(self.get_awaiting_tool_calls(name))

    def get_unfinished_tool_calls(self, name: str) -> list[ToolCallBlock]:
        """Calls of the current reply's message that have no result yet, in any state."""
        last = self.reply_message(name)
        if last is None or last.id != self.reply_id:
            return []
        answered = {b.id for b in last.content if isinstance(b, ToolResultBlock)}
        return [b for b in last.content if isinstance(b, ToolCallBlock) and b.id not in answered]


def schema_of(schema: Any) -> dict[str, Any] | None:
    """The JSON schema of a structured-output schema, ``None`` for none: a JSON-schema dict,
    a pydantic model (``model_json_schema()``), an attrs class, a dataclass or a
    ``TypedDict``."""
    if schema is None:
        return None
    if isinstance(schema, dict):
        return copy.deepcopy(schema)  # the caller's constant is never changed
    method = getattr(schema, "model_json_schema", None)
    if callable(method):
        result = method()
        if isinstance(result, dict):
            return copy.deepcopy(result)
    if is_schema_class(schema):
        return ClassSchema(schema).schema
    raise TypeError(
        "structured_schema must be a JSON-schema dict, a pydantic model, an attrs class, a "
        f"dataclass or a TypedDict, got {schema!r}"
    )


def _unstructure_reply_context(ctx: ReplyContext) -> dict[str, Any]:
    return {
        "reply_id": ctx.reply_id,
        "cur_iter": ctx.cur_iter,
        "structured_schema": schema_of(ctx.structured_schema),
        "structured_output": copy.deepcopy(ctx.structured_output),
    }


@functools.cache
def _structure_state() -> Any:
    """cattrs' own structure hook of AgentState (what the hook registered below wraps),
    generated on first use rather than when trioagent is imported."""
    return converter.gen_structure_attrs_fromdict(AgentState)


def _structure_agent_state(data: Any, cls: Any) -> AgentState:
    if isinstance(data, dict) and ("reply_id" in data or "cur_iter" in data):
        # Legacy layout: reply_id / cur_iter at the top level move into reply_context.
        data = dict(data)
        legacy = {k: data.pop(k) for k in ("reply_id", "cur_iter") if k in data}
        data["reply_context"] = {**legacy, **dict(data.get("reply_context") or {})}
    result: AgentState = _structure_state()(data, cls)
    return result


converter.register_unstructure_hook(ReplyContext, _unstructure_reply_context)
converter.register_structure_hook(AgentState, _structure_agent_state)
