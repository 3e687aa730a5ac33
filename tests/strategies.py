"""Hypothesis strategies for the data model: every content block, ``Msg``, ``Usage``,
``ErrorInfo`` and every event class in ``trioagent.event.EVENT_CLASSES``.

Values are kept small (short text, at most three list items) so property tests stay fast.
Free-form dicts (``metadata``, ``extra``, ``value``, ``structured_output``) hold JSON values
only, because that is what a JSON round trip can preserve.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import strategies as st

from trioagent._rules import PermissionBehavior, PermissionRule
from trioagent.event import (
    EVENT_CLASSES,
    ConfirmResult,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    EventBase,
    ExceedMaxItersEvent,
    ExternalExecutionResultEvent,
    HintBlockEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ReplyEndEvent,
    ReplyStartEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from trioagent.message import (
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
    URLSource,
    Usage,
)
from trioagent.types import ErrorInfo, ErrorType, FinishedReason, ReplyFinishedReason

# -- scalars -------------------------------------------------------------------------------

texts = st.text(max_size=20)
non_empty_texts = st.text(min_size=1, max_size=20)
ids = st.one_of(
    st.text(alphabet="0123456789abcdef", min_size=32, max_size=32),
    non_empty_texts,
)
timestamps = st.one_of(
    st.datetimes().map(lambda d: d.isoformat()),
    texts,
)
optional_timestamps = st.none() | timestamps
counts = st.integers(min_value=0, max_value=2**40)
media_types = st.sampled_from(["image/png", "image/jpeg", "audio/wav", "application/pdf"])
base64_payloads = st.binary(max_size=24).map(lambda b: base64.b64encode(b).decode("ascii"))
urls = st.one_of(
    st.sampled_from(["https://example.com/a.png", "file:///tmp/x.wav", "data:,hi"]),
    non_empty_texts,
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(texts, children, max_size=3),
    ),
    max_leaves=6,
)
json_dicts: st.SearchStrategy[dict[str, Any]] = st.dictionaries(texts, json_values, max_size=3)


def small_lists(elements: st.SearchStrategy[Any], min_size: int = 0) -> st.SearchStrategy[Any]:
    return st.lists(elements, min_size=min_size, max_size=3)


# -- permission rules, usage, errors ---------------------------------------------------------

permission_rules = st.builds(
    PermissionRule,
    tool_name=texts,
    rule_content=st.none() | texts,
    behavior=st.sampled_from(PermissionBehavior),
    source=texts,
)
usages = st.builds(
    Usage,
    input_tokens=counts,
    output_tokens=counts,
    cache_input_tokens=counts,
    cache_creation_input_tokens=counts,
)
error_infos = st.builds(ErrorInfo, type=st.sampled_from(ErrorType), message=texts)

# -- content blocks --------------------------------------------------------------------------

base64_sources = st.builds(Base64Source, data=base64_payloads, media_type=media_types)
url_sources = st.builds(URLSource, url=urls, media_type=media_types)
sources = st.one_of(base64_sources, url_sources)

text_blocks = st.builds(
    TextBlock, text=texts, id=ids, created_at=timestamps, finished_at=optional_timestamps
)
thinking_blocks = st.builds(
    ThinkingBlock,
    thinking=texts,
    id=ids,
    created_at=timestamps,
    finished_at=optional_timestamps,
    extra=json_dicts,
)
data_blocks = st.builds(
    DataBlock,
    source=sources,
    id=ids,
    name=st.none() | texts,
    created_at=timestamps,
    finished_at=optional_timestamps,
)
text_or_data_blocks = st.one_of(text_blocks, data_blocks)
#: ``str`` or ``list[TextBlock | DataBlock]`` — the shape of hints and tool outputs.
str_or_blocks = st.one_of(texts, small_lists(text_or_data_blocks))

hint_blocks = st.builds(
    HintBlock,
    hint=str_or_blocks,
    id=ids,
    source=st.none() | texts,
    created_at=timestamps,
    finished_at=optional_timestamps,
)
tool_call_blocks = st.builds(
    ToolCallBlock,
    id=non_empty_texts,
    name=texts,
    input=st.one_of(texts, json_dicts.map(json.dumps)),
    state=st.sampled_from(ToolCallState),
    suggested_rules=small_lists(permission_rules),
    created_at=timestamps,
    finished_at=optional_timestamps,
)
tool_result_blocks = st.builds(
    ToolResultBlock,
    id=non_empty_texts,
    name=texts,
    output=str_or_blocks,
    state=st.sampled_from(ToolResultState),
    metadata=json_dicts,
    created_at=timestamps,
    finished_at=optional_timestamps,
)

#: One strategy per content block class.
BLOCK_STRATEGIES: dict[type, st.SearchStrategy[Any]] = {
    TextBlock: text_blocks,
    ThinkingBlock: thinking_blocks,
    DataBlock: data_blocks,
    HintBlock: hint_blocks,
    ToolCallBlock: tool_call_blocks,
    ToolResultBlock: tool_result_blocks,
}
content_blocks = st.one_of(*BLOCK_STRATEGIES.values())

# -- messages --------------------------------------------------------------------------------

#: The blocks each role may hold.
ROLE_BLOCKS: dict[str, st.SearchStrategy[Any]] = {
    "user": text_or_data_blocks,
    "system": text_blocks,
    "assistant": content_blocks,
}


@st.composite
def msgs(draw: st.DrawFn, role: str | None = None) -> Msg:
    """A valid ``Msg``; ``role`` fixes the role, otherwise any role is drawn."""
    chosen = role if role is not None else draw(st.sampled_from(sorted(ROLE_BLOCKS)))
    return Msg(
        draw(texts),
        draw(st.lists(ROLE_BLOCKS[chosen], max_size=4)),
        chosen,  # type: ignore[arg-type]
        id=draw(ids),
        metadata=draw(json_dicts),
        created_at=draw(timestamps),
        usage=draw(st.none() | usages),
        finished_at=draw(optional_timestamps),
        finished_reason=draw(st.none() | st.sampled_from(ReplyFinishedReason)),
        structured_output=draw(st.none() | json_dicts),
        error=draw(st.none() | error_infos),
    )


# -- events ----------------------------------------------------------------------------------

_base = {"id": ids, "created_at": timestamps, "metadata": json_dicts}


def _event(cls: type[EventBase], **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.builds(cls, **_base, **fields)


def _data_delta(cls: type[EventBase], **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A data delta with exactly one of ``data`` / ``url`` (the class validates that)."""
    return st.one_of(
        _event(cls, **fields, data=base64_payloads),
        _event(cls, **fields, url=urls),
    )


confirm_results = st.builds(
    ConfirmResult,
    confirmed=st.booleans(),
    tool_call=tool_call_blocks,
    rules=st.none() | small_lists(permission_rules),
)

_reply = {"reply_id": ids}
_block = {"reply_id": ids, "block_id": ids}
_call = {"reply_id": ids, "tool_call_id": non_empty_texts}

#: One strategy per event class; a test checks this covers ``EVENT_CLASSES`` exactly.
EVENT_STRATEGIES: dict[type, st.SearchStrategy[Any]] = {
    ReplyStartEvent: _event(
        ReplyStartEvent, session_id=ids, reply_id=ids, name=texts, role=st.just("assistant")
    ),
    ReplyEndEvent: _event(
        ReplyEndEvent,
        session_id=ids,
        reply_id=ids,
        finished_reason=st.sampled_from(ReplyFinishedReason),
        error=st.none() | error_infos,
    ),
    ModelCallStartEvent: _event(ModelCallStartEvent, **_reply, model_name=texts),
    ModelCallEndEvent: _event(
        ModelCallEndEvent,
        **_reply,
        input_tokens=counts,
        output_tokens=counts,
        cache_input_tokens=counts,
        cache_creation_input_tokens=counts,
        finished_reason=st.sampled_from(FinishedReason),
    ),
    TextBlockStartEvent: _event(TextBlockStartEvent, **_block),
    TextBlockDeltaEvent: _event(TextBlockDeltaEvent, **_block, delta=texts),
    TextBlockEndEvent: _event(TextBlockEndEvent, **_block, text=st.none() | texts),
    ThinkingBlockStartEvent: _event(ThinkingBlockStartEvent, **_block),
    ThinkingBlockDeltaEvent: _event(ThinkingBlockDeltaEvent, **_block, delta=texts),
    ThinkingBlockEndEvent: _event(ThinkingBlockEndEvent, **_block),
    DataBlockStartEvent: _event(
        DataBlockStartEvent, **_block, media_type=media_types, name=st.none() | texts
    ),
    DataBlockDeltaEvent: _data_delta(DataBlockDeltaEvent, **_block, media_type=media_types),
    DataBlockEndEvent: _event(DataBlockEndEvent, **_block),
    HintBlockEvent: _event(HintBlockEvent, **_block, source=st.none() | texts, hint=str_or_blocks),
    ToolCallStartEvent: _event(ToolCallStartEvent, **_call, tool_call_name=texts),
    ToolCallDeltaEvent: _event(ToolCallDeltaEvent, **_call, delta=texts),
    ToolCallEndEvent: _event(ToolCallEndEvent, **_call),
    ToolResultStartEvent: _event(ToolResultStartEvent, **_call, tool_call_name=texts),
    ToolResultTextDeltaEvent: _event(ToolResultTextDeltaEvent, **_call, delta=texts),
    ToolResultDataDeltaEvent: _data_delta(
        ToolResultDataDeltaEvent, **_call, block_id=ids, media_type=media_types
    ),
    ToolResultEndEvent: _event(ToolResultEndEvent, **_call, state=st.sampled_from(ToolResultState)),
    ExceedMaxItersEvent: _event(ExceedMaxItersEvent, **_reply, name=texts),
    RequireUserConfirmEvent: _event(
        RequireUserConfirmEvent, **_reply, tool_calls=small_lists(tool_call_blocks, 1)
    ),
    RequireExternalExecutionEvent: _event(
        RequireExternalExecutionEvent, **_reply, tool_calls=small_lists(tool_call_blocks, 1)
    ),
    UserConfirmResultEvent: _event(
        UserConfirmResultEvent,
        reply_id=st.just("") | ids,
        confirm_results=small_lists(confirm_results, 1),
    ),
    ExternalExecutionResultEvent: _event(
        ExternalExecutionResultEvent,
        reply_id=st.just("") | ids,
        execution_results=small_lists(tool_result_blocks, 1),
    ),
    UserInterruptEvent: _event(UserInterruptEvent, reply_id=st.just("") | ids),
    CustomEvent: _event(CustomEvent, **_reply, name=texts, value=json_dicts),
}

#: Any event, drawn from every class in ``EVENT_CLASSES``.
agent_events = st.one_of(*(EVENT_STRATEGIES[cls] for cls in EVENT_CLASSES))
