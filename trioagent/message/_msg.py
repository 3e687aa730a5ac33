"""``Msg``: one message of a conversation, and the role-specific factories."""

from __future__ import annotations

import copy
import logging
import typing
from collections.abc import Sequence
from typing import Any, Literal, TypeAlias, TypeVar, cast, overload

import attrs
import cattrs

from .. import event as ev
from .._blocks import (
    CONTENT_BLOCK_TYPES,
    Base64Source,
    ContentBlock,
    DataBlock,
    HintBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
    URLSource,
    merge_base64,
)
from .._core.ids import generate_id, generate_timestamp
from .._core.json_types import JSONObject
from ..exception import StructuredOutputError
from ..types import ErrorInfo, ReplyFinishedReason

__all__ = ["AssistantMsg", "Msg", "Role", "SystemMsg", "Usage", "UserMsg"]

logger = logging.getLogger("trioagent.message")

Role: TypeAlias = Literal["user", "assistant", "system"]
_ROLE_BLOCKS: dict[str, tuple[type, ...]] = {
    "user": (TextBlock, DataBlock),
    "system": (TextBlock,),
    "assistant": CONTENT_BLOCK_TYPES,
}
_B = TypeVar("_B")
_T = TypeVar("_T")
# Structured output into attrs classes and dataclasses, keyed as their schema is (an attrs
# field by its alias).
_STRUCTURER = cattrs.Converter(use_alias=True)


@attrs.define(kw_only=True)
class Usage:
    """Token usage of a reply (summed over its model calls)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


def _check_role(instance: Msg, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in _ROLE_BLOCKS:
        raise ValueError(f"Msg.role must be 'user', 'assistant' or 'system', got {value!r}")


def _check_content(instance: Msg, attribute: attrs.Attribute[object], value: object) -> None:
    if isinstance(value, str):
        raise TypeError(
            "Msg.content must be a list of blocks; use UserMsg/AssistantMsg/SystemMsg to wrap a str"
        )
    if not isinstance(value, list):
        raise TypeError(f"Msg.content must be a list of blocks, got {type(value).__name__}")
    for i, block in enumerate(value):
        if not isinstance(block, CONTENT_BLOCK_TYPES):
            raise TypeError(f"Msg.content[{i}] is not a content block: {type(block).__name__}")


@attrs.define
class Msg:
    """A message: who said it (``name``, ``role``) and what (``content`` blocks).

    Role validation: a ``user`` message holds only text and data blocks, a ``system`` message
    only text blocks; an ``assistant`` message may hold anything.  ``finished_reason``,
    ``finished_at``, ``usage``, ``structured_output`` and ``error`` are set on the final
    message a reply returns.
    """

    name: str
    content: list[ContentBlock] = attrs.field(validator=_check_content)
    role: Role = attrs.field(validator=_check_role)
    id: str = attrs.field(kw_only=True, factory=generate_id)
    metadata: JSONObject = attrs.field(kw_only=True, factory=dict)
    created_at: str = attrs.field(kw_only=True, factory=generate_timestamp)
    usage: Usage | None = attrs.field(kw_only=True, default=None)
    finished_at: str | None = attrs.field(kw_only=True, default=None)
    finished_reason: ReplyFinishedReason | None = attrs.field(
        kw_only=True,
        default=None,
        converter=attrs.converters.optional(ReplyFinishedReason),
    )
    structured_output: JSONObject | None = attrs.field(kw_only=True, default=None)
    error: ErrorInfo | None = attrs.field(kw_only=True, default=None)

    def __attrs_post_init__(self) -> None:
        allowed = _ROLE_BLOCKS[self.role]
        for block in self.content:
            if not isinstance(block, allowed):
                raise ValueError(f"a {self.role} message cannot hold a {block.type!r} block")

    # -- queries ---------------------------------------------------------------------------

    @overload
    def get_content_blocks(self, block_type: None = None) -> list[ContentBlock]: ...
    @overload
    def get_content_blocks(self, block_type: type[_B]) -> list[_B]: ...
    @overload
    def get_content_blocks(self, block_type: str | Sequence[str]) -> list[ContentBlock]: ...

    def get_content_blocks(self, block_type: Any = None) -> list[Any]:
        """The blocks of a type (a class, a tag such as ``"text"``, a list of tags, or all)."""
        if block_type is None:
            return list(self.content)
        if isinstance(block_type, type):
            return [b for b in self.content if isinstance(b, block_type)]
        tags = {block_type} if isinstance(block_type, str) else set(block_type)
        return [b for b in self.content if b.type in tags]

    def has_content_blocks(
        self, block_type: type[object] | str | Sequence[str] | None = None
    ) -> bool:
        """Whether the message holds any block of the type (any block at all for ``None``)."""
        return bool(self.get_content_blocks(block_type))

    def get_text_content(self, sep: str = "\n") -> str | None:
        """The text blocks joined by ``sep``; ``None`` when there is no text block."""
        texts = [b.text for b in self.content if isinstance(b, TextBlock)]
        return sep.join(texts) if texts else None

    def get_structured_output(self, schema: type[_T]) -> _T:
        """The reply's structured output as an instance of ``schema``, typed for mypy.

        ``schema`` is the class the reply was asked for (``reply(...,
        structured_schema=Schema)``): a pydantic model (``model_validate``), an attrs class or
        a dataclass (structured by cattrs, an attrs field by its alias), or a ``TypedDict``
        (a copy of the object).  :attr:`structured_output` keeps the JSON object, so this also
        works on a message loaded from saved state.

        Raises:
            StructuredOutputError: the message has no structured output (the reply was
                interrupted, ended with an error or was not asked for one), or the object
                does not fit ``schema``.
        """
        data = self.structured_output
        if data is None:
            reason = self.finished_reason.value if self.finished_reason else "not finished"
            raise StructuredOutputError(
                f"message {self.id!r} has no structured output (finished_reason: {reason}); "
                "reply(..., structured_schema=...) sets it on a completed reply"
            )
        try:
            validate = getattr(schema, "model_validate", None)
            if callable(validate):
                return cast(_T, validate(copy.deepcopy(data)))
            if typing.is_typeddict(schema):
                return cast(_T, copy.deepcopy(data))
            return _STRUCTURER.structure(data, schema)
        except Exception as exc:
            raise StructuredOutputError(
                f"the structured output of message {self.id!r} does not fit "
                f"{getattr(schema, '__name__', schema)!r}: {exc}"
            ) from exc

    def append_usage(self, usage: Usage) -> None:
        """Add a model call's usage (copied on first use)."""
        if self.usage is None:
            self.usage = attrs.evolve(usage)
            return
        self.usage.input_tokens += usage.input_tokens
        self.usage.output_tokens += usage.output_tokens
        self.usage.cache_input_tokens += usage.cache_input_tokens
        self.usage.cache_creation_input_tokens += usage.cache_creation_input_tokens

    # -- rebuilding from events --------------------------------------------------------------

    def _find(self, block_id: str, cls: type[_B]) -> _B | None:
        for block in reversed(self.content):
            if isinstance(block, cls) and block.id == block_id:
                return block
        return None

    def _missing(self, event: ev.AgentEvent, block_id: str) -> None:
        logger.warning("Msg.append_event: no block %r for %s; skipped", block_id, event.type)

    def append_event(self, event: ev.AgentEvent) -> None:
        """Apply one event of a reply's stream to this message.

        Custom events are skipped; an event of another reply, or a delta/end event whose block
        is missing, is skipped with a warning — never raised, so a consumer can rebuild a
        message from a stream it joined late.
        """
        if isinstance(event, ev.CustomEvent):
            return
        if event.reply_id != self.id:
            logger.warning(
                "Msg.append_event: event for reply %r applied to message %r; skipped",
                event.reply_id,
                self.id,
            )
            return
        match event:
            case ev.ReplyEndEvent():
                self.finished_at = event.created_at
                self.finished_reason = ReplyFinishedReason(event.finished_reason)
                self.error = event.error
            case ev.ModelCallEndEvent():
                self.append_usage(
                    Usage(
                        input_tokens=event.input_tokens,
                        output_tokens=event.output_tokens,
                        cache_input_tokens=event.cache_input_tokens,
                        cache_creation_input_tokens=event.cache_creation_input_tokens,
                    )
                )
            case ev.TextBlockStartEvent():
                self.content.append(TextBlock(id=event.block_id, text=""))
            case ev.TextBlockDeltaEvent():
                if (text := self._find(event.block_id, TextBlock)) is None:
                    return self._missing(event, event.block_id)
                text.text += event.delta
            case ev.TextBlockEndEvent():
                if (text := self._find(event.block_id, TextBlock)) is None:
                    return self._missing(event, event.block_id)
                text.finished_at = event.created_at
                if event.text is not None:
                    text.text = event.text
            case ev.ThinkingBlockStartEvent():
                self.content.append(ThinkingBlock(id=event.block_id, thinking=""))
            case ev.ThinkingBlockDeltaEvent():
                if (thinking := self._find(event.block_id, ThinkingBlock)) is None:
                    return self._missing(event, event.block_id)
                thinking.thinking += event.delta
            case ev.ThinkingBlockEndEvent():
                if (thinking := self._find(event.block_id, ThinkingBlock)) is None:
                    return self._missing(event, event.block_id)
                thinking.finished_at = event.created_at
            case ev.DataBlockStartEvent():
                self.content.append(
                    DataBlock(
                        id=event.block_id,
                        source=Base64Source(data="", media_type=event.media_type),
                        name=event.name,
                    )
                )
            case ev.DataBlockDeltaEvent():
                if (data := self._find(event.block_id, DataBlock)) is None:
                    return self._missing(event, event.block_id)
                _apply_data_delta(data, event.media_type, event.data, event.url)
            case ev.DataBlockEndEvent():
                if (data := self._find(event.block_id, DataBlock)) is None:
                    return self._missing(event, event.block_id)
                data.finished_at = event.created_at
            case ev.HintBlockEvent():
                self.content.append(
                    HintBlock(
                        id=event.block_id,
                        source=event.source,
                        hint=copy.deepcopy(event.hint),
                        created_at=event.created_at,
                        finished_at=event.created_at,
                    )
                )
            case ev.ToolCallStartEvent():
                self.content.append(ToolCallBlock(id=event.tool_call_id, name=event.tool_call_name))
            case ev.ToolCallDeltaEvent():
                if (call := self._find(event.tool_call_id, ToolCallBlock)) is None:
                    return self._missing(event, event.tool_call_id)
                call.input += event.delta
            case ev.ToolCallEndEvent():
                if (call := self._find(event.tool_call_id, ToolCallBlock)) is None:
                    return self._missing(event, event.tool_call_id)
                call.finished_at = event.created_at
            case ev.ToolResultStartEvent():
                self.content.append(
                    ToolResultBlock(id=event.tool_call_id, name=event.tool_call_name, output=[])
                )
            case ev.ToolResultTextDeltaEvent():
                if (result := self._find(event.tool_call_id, ToolResultBlock)) is None:
                    return self._missing(event, event.tool_call_id)
                output = _as_list(result)
                if output and isinstance(output[-1], TextBlock):
                    output[-1].text += event.delta
                else:
                    output.append(TextBlock(text=event.delta))
            case ev.ToolResultDataDeltaEvent():
                if (result := self._find(event.tool_call_id, ToolResultBlock)) is None:
                    return self._missing(event, event.tool_call_id)
                output = _as_list(result)
                block = next(
                    (b for b in output if isinstance(b, DataBlock) and b.id == event.block_id), None
                )
                if block is None:
                    block = DataBlock(
                        id=event.block_id, source=Base64Source(data="", media_type=event.media_type)
                    )
                    output.append(block)
                _apply_data_delta(block, event.media_type, event.data, event.url)
            case ev.ToolResultEndEvent():
                if (result := self._find(event.tool_call_id, ToolResultBlock)) is None:
                    return self._missing(event, event.tool_call_id)
                result.state = ToolResultState(event.state)
                result.metadata = dict(event.metadata)
                result.finished_at = event.created_at
                if (call := self._find(event.tool_call_id, ToolCallBlock)) is not None:
                    call.state = ToolCallState.FINISHED
            case ev.RequireUserConfirmEvent():
                for asked in event.tool_calls:
                    if (call := self._find(asked.id, ToolCallBlock)) is not None:
                        call.state = ToolCallState.ASKING
                        call.suggested_rules = list(asked.suggested_rules)
            case ev.UserConfirmResultEvent():
                for confirm in event.confirm_results:
                    call = self._find(confirm.tool_call.id, ToolCallBlock)
                    if call is not None and call.state == ToolCallState.ASKING:
                        call.state = (
                            ToolCallState.ALLOWED if confirm.confirmed else ToolCallState.FINISHED
                        )
            case ev.RequireExternalExecutionEvent():
                for submitted in event.tool_calls:
                    if (call := self._find(submitted.id, ToolCallBlock)) is not None:
                        call.state = ToolCallState.SUBMITTED
            case ev.ExternalExecutionResultEvent():
                for result in event.execution_results:
                    if self._find(result.id, ToolResultBlock) is None:
                        added = copy.deepcopy(result)
                        if added.finished_at is None:
                            added.finished_at = event.created_at
                        self.content.append(added)
            case _:
                pass  # REPLY_START, MODEL_CALL_START, EXCEED_MAX_ITERS, USER_INTERRUPT: no-ops
        return None


def _as_list(result: ToolResultBlock) -> list[TextBlock | DataBlock]:
    if isinstance(result.output, str):
        result.output = [TextBlock(text=result.output)] if result.output else []
    return result.output


def _apply_data_delta(block: DataBlock, media_type: str, data: str | None, url: str | None) -> None:
    if url is not None:
        block.source = URLSource(url=url, media_type=media_type)
    elif data is not None:
        old = block.source.data if isinstance(block.source, Base64Source) else ""
        block.source = Base64Source(data=merge_base64(old, data), media_type=media_type)


def _wrap(content: str | Sequence[ContentBlock]) -> list[ContentBlock]:
    if isinstance(content, str):
        return [TextBlock(text=content)]
    return list(content)


_UserContent: TypeAlias = "str | Sequence[TextBlock | DataBlock]"


@overload
def UserMsg(
    content: _UserContent,
    /,
    *,
    name: str = "user",
    metadata: JSONObject | None = None,
    created_at: str | None = None,
    finished_at: str | None = None,
    finished_reason: ReplyFinishedReason | None = None,
    id: str | None = None,
) -> Msg: ...
@overload
def UserMsg(
    name: str,
    content: _UserContent,
    *,
    metadata: JSONObject | None = None,
    created_at: str | None = None,
    finished_at: str | None = None,
    finished_reason: ReplyFinishedReason | None = None,
    id: str | None = None,
) -> Msg: ...


def UserMsg(
    *args: Any,
    name: str | None = None,
    content: _UserContent | None = None,
    metadata: JSONObject | None = None,
    created_at: str | None = None,
    finished_at: str | None = None,
    finished_reason: ReplyFinishedReason | None = None,
    id: str | None = None,
) -> Msg:
    """A user message; a str becomes a ``TextBlock``; ``finished_at`` defaults to ``created_at``.

    Two forms: ``UserMsg("hi")`` (the sender's name is ``"user"``, or ``name=``) and
    ``UserMsg("alice", "hi")`` (name first, as for every other message factory).
    """
    if len(args) > 2:
        raise TypeError(f"UserMsg takes at most 2 positional arguments ({len(args)} given)")
    if len(args) == 2:
        if name is not None or content is not None:
            raise TypeError("UserMsg(name, content) got name= or content= a second time")
        name, content = args
    elif len(args) == 1:
        if content is None:
            content = args[0]
        elif name is None:
            name = args[0]
        else:
            raise TypeError("UserMsg got name= and content= besides a positional argument")
    if content is None:
        raise TypeError("UserMsg needs a content: UserMsg('hi') or UserMsg('alice', 'hi')")
    if name is None:
        name = "user"
    if not isinstance(name, str):
        raise TypeError(f"UserMsg's name must be a str, got {type(name).__name__}")
    return _finished_on_creation(
        name, content, "user", metadata, created_at, finished_at, finished_reason, id
    )


def SystemMsg(
    name: str,
    content: str | Sequence[TextBlock],
    *,
    metadata: JSONObject | None = None,
    created_at: str | None = None,
    finished_at: str | None = None,
    finished_reason: ReplyFinishedReason | None = None,
    id: str | None = None,
) -> Msg:
    """A system message (text only); ``finished_at`` defaults to ``created_at``."""
    return _finished_on_creation(
        name, content, "system", metadata, created_at, finished_at, finished_reason, id
    )


def _finished_on_creation(
    name: str,
    content: str | Sequence[ContentBlock],
    role: Role,
    metadata: JSONObject | None,
    created_at: str | None,
    finished_at: str | None,
    finished_reason: ReplyFinishedReason | None,
    id: str | None,
) -> Msg:
    """A user or system message: complete when made, so ``finished_at`` defaults to
    ``created_at``."""
    created = created_at or generate_timestamp()
    return Msg(
        name,
        _wrap(content),
        role,
        id=id or generate_id(),
        metadata=metadata or {},
        created_at=created,
        finished_at=finished_at or created,
        finished_reason=finished_reason,
    )


def AssistantMsg(
    name: str,
    content: str | Sequence[ContentBlock],
    *,
    metadata: JSONObject | None = None,
    created_at: str | None = None,
    finished_at: str | None = None,
    finished_reason: ReplyFinishedReason | None = None,
    structured_output: JSONObject | None = None,
    id: str | None = None,
    usage: Usage | None = None,
) -> Msg:
    """An assistant message; ``finished_at`` stays ``None`` unless given."""
    return Msg(
        name,
        _wrap(content),
        "assistant",
        id=id or generate_id(),
        metadata=metadata or {},
        created_at=created_at or generate_timestamp(),
        finished_at=finished_at,
        finished_reason=finished_reason,
        structured_output=structured_output,
        usage=usage,
    )
