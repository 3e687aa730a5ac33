"""Content blocks: the pieces a ``Msg`` is made of.

Blocks are mutable attrs classes (a reply grows its blocks while it streams).  Each class
carries its wire tag in the class variable ``type`` (``"text"``, ``"thinking"``, ``"data"``,
``"hint"``, ``"tool_call"``, ``"tool_result"``), which the serializer writes as ``"type"``.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
from typing import ClassVar, TypeAlias

import attrs

from ._core.ids import generate_id, generate_timestamp
from ._core.json_types import JSONObject
from ._rules import PermissionRule

__all__ = [
    "Base64Source",
    "ContentBlock",
    "DataBlock",
    "HintBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolCallState",
    "ToolResultBlock",
    "ToolResultState",
    "URLSource",
    "merge_base64",
]


class ToolCallState(enum.StrEnum):
    """Lifecycle of a tool call.

    ``pending`` when the model asks for it; ``asking`` while it waits for the user's
    confirmation and ``allowed`` once confirmed; ``submitted`` while the caller executes it;
    ``finished`` when its result is in (or the user declined it).
    """

    PENDING = "pending"
    ASKING = "asking"
    ALLOWED = "allowed"
    SUBMITTED = "submitted"
    FINISHED = "finished"


class ToolResultState(enum.StrEnum):
    """Outcome of a tool call (``running`` only while it streams)."""

    SUCCESS = "success"
    ERROR = "error"
    INTERRUPTED = "interrupted"
    DENIED = "denied"
    RUNNING = "running"


def _non_empty(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be a non-empty string")


def _is_str(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(
            f"{type(instance).__name__}.{attribute.name} must be str, got {type(value).__name__}"
        )


@attrs.define(kw_only=True)
class Base64Source:
    """Inline binary data, base64-encoded."""

    type: ClassVar[str] = "base64"
    data: str = attrs.field(validator=_is_str)
    media_type: str = attrs.field(validator=_is_str)


@attrs.define(kw_only=True)
class URLSource:
    """Data referenced by URL (``http(s)://``, ``file://``, ``data:``)."""

    type: ClassVar[str] = "url"
    url: str = attrs.field(validator=_non_empty)
    media_type: str = attrs.field(validator=_is_str)


@attrs.define(kw_only=True)
class TextBlock:
    """Plain text."""

    type: ClassVar[str] = "text"
    text: str = attrs.field(validator=_is_str)
    id: str = attrs.field(factory=generate_id)
    created_at: str = attrs.field(factory=generate_timestamp)
    finished_at: str | None = None


@attrs.define(kw_only=True)
class ThinkingBlock:
    """Model reasoning.

    ``extra`` keeps provider fields AgentScope stores as pydantic extras (for example an
    Anthropic ``signature`` or a redacted-thinking payload), so they survive a round trip.
    """

    type: ClassVar[str] = "thinking"
    thinking: str = attrs.field(validator=_is_str)
    id: str = attrs.field(factory=generate_id)
    created_at: str = attrs.field(factory=generate_timestamp)
    finished_at: str | None = None
    extra: JSONObject = attrs.field(factory=dict)


@attrs.define(kw_only=True)
class DataBlock:
    """Binary content (image, audio, video, file) by value or by URL."""

    type: ClassVar[str] = "data"
    source: Base64Source | URLSource = attrs.field(
        validator=attrs.validators.instance_of((Base64Source, URLSource))
    )
    id: str = attrs.field(factory=generate_id)
    name: str | None = None
    created_at: str = attrs.field(factory=generate_timestamp)
    finished_at: str | None = None


def _check_hint(
    instance: object, attribute: attrs.Attribute[str | list[TextBlock | DataBlock]], value: object
) -> None:
    if isinstance(value, str):
        return
    if not isinstance(value, list) or not all(isinstance(b, TextBlock | DataBlock) for b in value):
        raise TypeError("HintBlock.hint must be a str or a list of TextBlock/DataBlock")


@attrs.define(kw_only=True)
class HintBlock:
    """An instruction to the model; formatters send it as a user turn."""

    type: ClassVar[str] = "hint"
    hint: str | list[TextBlock | DataBlock] = attrs.field(validator=_check_hint)
    id: str = attrs.field(factory=generate_id)
    source: str | None = None
    created_at: str = attrs.field(factory=generate_timestamp)
    finished_at: str | None = attrs.field(factory=generate_timestamp)


@attrs.define(kw_only=True)
class ToolCallBlock:
    """A tool call requested by the model.

    ``id`` is the provider's call id; ``input`` is the raw JSON argument text, which grows while
    the call streams.  :meth:`parsed_input` decodes it.
    """

    type: ClassVar[str] = "tool_call"
    id: str = attrs.field(validator=_non_empty)
    name: str = attrs.field(validator=_is_str)
    input: str = attrs.field(default="", validator=_is_str)
    state: ToolCallState = attrs.field(default=ToolCallState.PENDING, converter=ToolCallState)
    suggested_rules: list[PermissionRule] = attrs.field(factory=list)
    created_at: str = attrs.field(factory=generate_timestamp)
    finished_at: str | None = None

    def parsed_input(self) -> JSONObject:
        """The arguments as a dict; ``{}`` for empty input.

        Raises:
            ValueError: the input is not a JSON object.
        """
        if not self.input.strip():
            return {}
        value = json.loads(self.input)
        if not isinstance(value, dict):
            raise ValueError(f"tool call input is not a JSON object: {self.input!r}")
        return value


def _check_output(
    instance: object, attribute: attrs.Attribute[str | list[TextBlock | DataBlock]], value: object
) -> None:
    if isinstance(value, str):
        return
    if not isinstance(value, list) or not all(isinstance(b, TextBlock | DataBlock) for b in value):
        raise TypeError("ToolResultBlock.output must be a str or a list of TextBlock/DataBlock")


@attrs.define(kw_only=True)
class ToolResultBlock:
    """The result of a tool call; ``id`` equals the call's id."""

    type: ClassVar[str] = "tool_result"
    id: str = attrs.field(validator=_non_empty)
    name: str = attrs.field(validator=_is_str)
    output: str | list[TextBlock | DataBlock] = attrs.field(factory=list, validator=_check_output)
    state: ToolResultState = attrs.field(default=ToolResultState.RUNNING, converter=ToolResultState)
    metadata: JSONObject = attrs.field(factory=dict)
    created_at: str = attrs.field(factory=generate_timestamp)
    finished_at: str | None = None

    def output_text(self, sep: str = "\n") -> str:
        """The output's text, whether it is a str or a list of blocks."""
        if isinstance(self.output, str):
            return self.output
        return sep.join(b.text for b in self.output if isinstance(b, TextBlock))


ContentBlock: TypeAlias = (
    TextBlock | ThinkingBlock | DataBlock | HintBlock | ToolCallBlock | ToolResultBlock
)
CONTENT_BLOCK_TYPES: tuple[type, ...] = (
    TextBlock,
    ThinkingBlock,
    DataBlock,
    HintBlock,
    ToolCallBlock,
    ToolResultBlock,
)


def merge_base64(left: str, right: str) -> str:
    """Concatenate two base64 payloads by bytes; plain string concatenation if either is invalid."""
    try:
        joined = base64.b64decode(left, validate=True) + base64.b64decode(right, validate=True)
    except (binascii.Error, ValueError):
        return left + right
    return base64.b64encode(joined).decode("ascii")
