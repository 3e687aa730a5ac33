"""Reply inputs: telling new messages from resume events, checking every new message before
any of them is appended, and replacing attachments the model cannot read with a note the model
can."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import get_args

from .._core.copying import deep_copy
from ..event import (
    AgentEvent,
    ExternalExecutionResultEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from ..message import (
    ContentBlock,
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
)
from ..model import ChatModelBase
from ..tool import Toolkit
from ._config import ModelConfig
from ._protocol import ReplyInputs
from ._state import AgentState
from ._structured import StructuredOutputTool

__all__ = [
    "check_arguments",
    "check_messages",
    "check_reply_call",
    "checked_copies",
    "classify_inputs",
    "convert_unsupported",
    "message_list",
]

_BLOCK_TYPES: tuple[type, ...] = get_args(ContentBlock)
_RESUME_EVENTS = (UserConfirmResultEvent, ExternalExecutionResultEvent, UserInterruptEvent)


def classify_inputs(
    inputs: ReplyInputs,
) -> tuple[
    UserConfirmResultEvent | ExternalExecutionResultEvent | UserInterruptEvent | None, list[Msg]
]:
    """The resume event, or the new messages (each checked, see :func:`checked_copies`).

    Raises:
        TypeError: not a Msg, a sequence of Msgs, a resume event or ``None``.
    """
    if inputs is None:
        return None, []
    if isinstance(inputs, _RESUME_EVENTS):
        return inputs, []
    return None, message_list(inputs, "inputs")


def message_list(inputs: object, label: str) -> list[Msg]:
    """``inputs`` (a Msg or a sequence of them) as a list, each item's type checked.

    ``label`` names the argument in errors (``inputs[1] must be a Msg, got int``).

    Raises:
        TypeError: neither a Msg nor a sequence of Msgs.
    """
    if isinstance(inputs, Msg):
        return [inputs]
    if isinstance(inputs, str):
        raise TypeError(f"{label} must be a Msg, not a str; wrap it: UserMsg('user', text)")
    if isinstance(inputs, bytes | bytearray | memoryview) or not isinstance(inputs, Sequence):
        raise TypeError(
            f"{label} must be a Msg, a sequence of Msgs, a resume event or None, "
            f"got {type(inputs).__name__}"
        )
    msgs = list(inputs)
    for index, item in enumerate(msgs):
        if isinstance(item, Msg):
            continue
        if isinstance(item, AgentEvent):
            raise TypeError(
                f"{label}[{index}] must be a Msg, got a {type(item).__name__}; a resume event "
                "is passed alone, not in a list"
            )
        raise TypeError(f"{label}[{index}] must be a Msg, got {type(item).__name__}")
    return msgs


def check_messages(msgs: Sequence[Msg], label: str) -> None:
    """Check incoming messages (see :func:`checked_copies`) without copying them."""
    for index, msg in enumerate(msgs):
        where = _where(label, index, len(msgs))
        if msg.role == "system":
            raise ValueError(
                f"{where}: system messages cannot be passed to an agent; use system_prompt"
            )
        if not isinstance(msg.content, list):
            raise TypeError(f"{where}.content must be a list of blocks")
        for position, block in enumerate(msg.content):
            if not isinstance(block, _BLOCK_TYPES):
                raise TypeError(
                    f"{where}.content[{position}] is not a content block: {type(block).__name__}"
                )
            if isinstance(block, ToolCallBlock | ToolResultBlock | ThinkingBlock):
                raise ValueError(
                    f"{where}: incoming messages cannot hold {block.type!r} blocks "
                    f"(message {msg.id})"
                )


def checked_copies(msgs: Sequence[Msg], label: str, patterns: Sequence[str] | None) -> list[Msg]:
    """Deep copies of incoming messages, all checked before the caller appends any.

    Unsupported attachments are replaced (see :func:`convert_unsupported`) when ``patterns``
    (the formatter's supported media types) is given.

    Raises:
        TypeError: a content item that is not a block.
        ValueError: a system message, a tool call, tool result or thinking block, or a
            message nested too deeply to copy.
    """
    check_messages(msgs, label)
    copies: list[Msg] = []
    for index, msg in enumerate(msgs):
        try:
            copied = deep_copy(msg)
        except RecursionError:
            raise ValueError(
                f"{_where(label, index, len(msgs))}: message {msg.id} is nested too deeply to copy"
            ) from None
        if patterns is not None:
            copied.content = [convert_unsupported(b, patterns) for b in copied.content]
        copies.append(copied)
    return copies


def check_arguments(
    model: object,
    system_prompt: object,
    toolkit: object,
    state: object,
    model_config: ModelConfig | None,
) -> None:
    """Check the kinds of ``Agent(...)``'s arguments, which would otherwise fail mid-reply.

    Raises:
        TypeError: one of the wrong kind, named.
    """
    if not isinstance(model, ChatModelBase):
        raise TypeError(f"model must be a ChatModelBase, got {type(model).__name__}")
    fallback = model_config.fallback_model if model_config is not None else None
    if fallback is not None and not isinstance(fallback, ChatModelBase):
        raise TypeError(
            "model_config.fallback_model must be a chat model, a 'provider:model' string "
            f"such as 'openai:gpt-4o', or None; got {type(fallback).__name__}"
        )
    if not isinstance(system_prompt, str):
        raise TypeError(f"system_prompt must be a str, got {type(system_prompt).__name__}")
    if toolkit is not None and not isinstance(toolkit, Toolkit):
        raise TypeError(f"toolkit must be a Toolkit, got {type(toolkit).__name__}")
    if state is not None and not isinstance(state, AgentState):
        raise TypeError(f"state must be an AgentState, got {type(state).__name__}")


def check_reply_call(inputs: ReplyInputs, structured_schema: object) -> None:
    """Check what ``reply()`` / ``stream()`` were given before the reply starts.

    Raises:
        TypeError: inputs of the wrong type, or a ``structured_schema`` that is neither a dict
            nor a pydantic model, attrs class, dataclass or ``TypedDict``.
        ValueError: a message the agent refuses (see :func:`checked_copies`), or a
            ``structured_schema`` that is not a valid object schema.
    """
    _, msgs = classify_inputs(inputs)
    check_messages(msgs, "inputs")
    if structured_schema is not None:
        try:
            StructuredOutputTool(structured_schema).validate_schema()
        except ValueError as exc:
            raise ValueError(
                f"structured_schema is not a usable JSON object schema: {exc}"
            ) from None


def _where(label: str, index: int, count: int) -> str:
    return f"{label}[{index}]" if count > 1 or label == "msgs" else label


def convert_unsupported(block: ContentBlock, patterns: Sequence[str]) -> ContentBlock:
    if not isinstance(block, DataBlock):
        return block
    media_type = block.source.media_type
    if any(fnmatch.fnmatch(media_type, p) for p in patterns):
        return block
    named = f"named '{block.name}' " if block.name else ""
    if isinstance(block.source, URLSource):
        text = (
            f"<system-reminder>An attached file {named}is saved into {block.source.url}."
            "</system-reminder>"
        )
    else:
        text = (
            f"<system-reminder>An unsupported input file {named}is attached with media type "
            f"'{media_type}'.</system-reminder>"
        )
    return TextBlock(text=text)
