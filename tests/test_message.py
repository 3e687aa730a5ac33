"""``Msg``, its factories, content-block validation and ``Msg.append_event``."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import attrs
import pytest
from hypothesis import given, settings, strategies as st

from trioagent._blocks import merge_base64
from trioagent._core import ids as _ids
from trioagent._rules import PermissionBehavior, PermissionRule
from trioagent.event import (
    AgentEvent,
    ConfirmResult,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
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
    AssistantMsg,
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    SystemMsg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
    URLSource,
    Usage,
    UserMsg,
)
from trioagent.types import ErrorInfo, ErrorType, ReplyFinishedReason

REPLY = "reply-1"
LOGGER = "trioagent.message"
_B = TypeVar("_B")


def at(msg: Msg, index: int, cls: type[_B]) -> _B:
    """``msg.content[index]``, checked to be a ``cls``."""
    block = msg.content[index]
    assert isinstance(block, cls), f"content[{index}] is a {type(block).__name__}"
    return block


def calls(msg: Msg) -> list[ToolCallBlock]:
    return msg.get_content_blocks(ToolCallBlock)


def output(result: ToolResultBlock) -> list[TextBlock | DataBlock]:
    """A result's output, checked to be a list of blocks."""
    assert isinstance(result.output, list)
    return result.output


def source_of(block: Any) -> Base64Source | URLSource:
    assert isinstance(block, DataBlock)
    return block.source


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def png(data: str = "") -> Base64Source:
    return Base64Source(data=data, media_type="image/png")


@pytest.fixture
def fixed_factories() -> Iterator[None]:
    """Generated ids are ``"GEN"`` and timestamps ``"T"``, restored afterwards."""
    _ids.set_id_factory(lambda: "GEN")
    _ids.set_timestamp_factory(lambda: "T")
    try:
        yield
    finally:
        _ids.set_id_factory(None)
        _ids.set_timestamp_factory(None)


@pytest.fixture
def reply() -> Msg:
    """An empty assistant message for reply ``REPLY``, as a consumer would start with."""
    return Msg("agent", [], "assistant", id=REPLY)


# -- construction and role rules -------------------------------------------------------------


def data_block() -> DataBlock:
    return DataBlock(source=URLSource(url="https://x/a.png", media_type="image/png"))


ALL_BLOCKS: list[Callable[[], Any]] = [
    lambda: TextBlock(text="t"),
    lambda: ThinkingBlock(thinking="th"),
    data_block,
    lambda: HintBlock(hint="h"),
    lambda: ToolCallBlock(id="c", name="n"),
    lambda: ToolResultBlock(id="c", name="n"),
]


@pytest.mark.parametrize("make", ALL_BLOCKS)
def test_assistant_accepts_every_block(make: Callable[[], Any]) -> None:
    block = make()
    assert Msg("a", [block], "assistant").content == [block]


@pytest.mark.parametrize("make", [lambda: TextBlock(text="t"), data_block])
def test_user_accepts_text_and_data(make: Callable[[], Any]) -> None:
    assert len(Msg("u", [make()], "user").content) == 1


@pytest.mark.parametrize("make", ALL_BLOCKS[1:2] + ALL_BLOCKS[3:])
def test_user_rejects_other_blocks(make: Callable[[], Any]) -> None:
    with pytest.raises(ValueError, match="user message"):
        Msg("u", [TextBlock(text="ok"), make()], "user")


def test_system_accepts_text() -> None:
    assert Msg("s", [TextBlock(text="be nice")], "system").get_text_content() == "be nice"


@pytest.mark.parametrize("make", ALL_BLOCKS[1:])
def test_system_rejects_non_text(make: Callable[[], Any]) -> None:
    with pytest.raises(ValueError, match="system message"):
        Msg("s", [make()], "system")


def test_unknown_role_rejected() -> None:
    with pytest.raises(ValueError, match="role"):
        Msg("x", [], "tool")  # type: ignore[arg-type]


def test_msg_rejects_str_content() -> None:
    with pytest.raises(TypeError, match="list of blocks"):
        Msg("u", "hello", "user")  # type: ignore[arg-type]


@pytest.mark.parametrize("content", [None, ("t",), [TextBlock(text="a"), "b"], [{"text": "a"}]])
def test_msg_rejects_non_block_content(content: Any) -> None:
    with pytest.raises(TypeError):
        Msg("u", content, "user")


def test_msg_defaults() -> None:
    msg = Msg("a", [], "assistant")
    assert len(msg.id) == 32
    assert msg.metadata == {}
    assert msg.usage is None
    assert msg.finished_at is None
    assert msg.finished_reason is None
    assert msg.structured_output is None
    assert msg.error is None
    assert Msg("a", [], "assistant").metadata is not msg.metadata


def test_msg_finished_reason_converted_to_enum() -> None:
    msg = Msg("a", [], "assistant", finished_reason="exceed_max_iters")
    assert msg.finished_reason is ReplyFinishedReason.EXCEED_MAX_ITERS
    with pytest.raises(ValueError, match="nope"):
        Msg("a", [], "assistant", finished_reason="nope")


@pytest.mark.parametrize("factory", [UserMsg, SystemMsg, AssistantMsg])
def test_factories_wrap_str(factory: Callable[..., Msg]) -> None:
    msg = factory("n", "hello")
    assert len(msg.content) == 1
    assert isinstance(msg.content[0], TextBlock)
    assert msg.content[0].text == "hello"
    assert msg.get_text_content() == "hello"


@pytest.mark.parametrize(
    ("factory", "role"), [(UserMsg, "user"), (SystemMsg, "system"), (AssistantMsg, "assistant")]
)
def test_factories_set_role_and_keep_lists(factory: Callable[..., Msg], role: str) -> None:
    blocks = [TextBlock(text="a"), TextBlock(text="b")]
    msg = factory("n", blocks, id="m1", metadata={"k": 1})
    assert msg.role == role
    assert msg.content == blocks
    assert msg.content is not blocks
    assert msg.id == "m1"
    assert msg.metadata == {"k": 1}


@pytest.mark.parametrize("factory", [UserMsg, SystemMsg])
def test_user_and_system_finished_at_defaults_to_created_at(factory: Callable[..., Msg]) -> None:
    msg = factory("n", "hi")
    assert msg.finished_at == msg.created_at
    given = factory("n", "hi", created_at="c", finished_at="f")
    assert (given.created_at, given.finished_at) == ("c", "f")
    assert factory("n", "hi", created_at="c").finished_at == "c"


def test_user_msg_takes_the_content_alone_with_a_default_name() -> None:
    """``UserMsg("hi")`` is a message from ``"user"``; the name-first form is unchanged."""
    alone = UserMsg("hi")
    assert (alone.name, alone.role, alone.get_text_content()) == ("user", "user", "hi")
    assert UserMsg("hi", name="bob").name == "bob"
    assert UserMsg([TextBlock(text="x")]).get_text_content() == "x"
    for msg in (UserMsg("bob", "hi"), UserMsg("bob", content="hi")):
        assert (msg.name, msg.get_text_content()) == ("bob", "hi")
    assert UserMsg(name="bob", content="hi").name == "bob"


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("a", "b", "c"), {}, "at most 2 positional"),
        (("a", "b"), {"name": "c"}, "a second time"),
        (("a",), {"name": "b", "content": "c"}, "besides a positional"),
        ((), {"name": "a"}, "needs a content"),
        ((1, "hi"), {}, "name must be a str"),
    ],
)
def test_user_msg_refuses_ambiguous_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(TypeError, match=match):
        UserMsg(*args, **kwargs)


def test_assistant_finished_at_stays_none() -> None:
    msg = AssistantMsg("n", "hi", created_at="c")
    assert msg.created_at == "c"
    assert msg.finished_at is None
    usage = Usage(input_tokens=1)
    full = AssistantMsg("n", "hi", structured_output={"a": 1}, usage=usage, finished_at="f")
    assert full.structured_output == {"a": 1}
    assert full.usage == usage
    assert full.finished_at == "f"


def test_factories_enforce_role_rules() -> None:
    with pytest.raises(ValueError, match="user message"):
        UserMsg("u", [ToolCallBlock(id="c", name="n")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="system message"):
        SystemMsg("s", [data_block()])  # type: ignore[list-item]


# -- helpers ---------------------------------------------------------------------------------


def mixed() -> Msg:
    return Msg(
        "a",
        [
            ThinkingBlock(thinking="hmm"),
            TextBlock(text="one"),
            ToolCallBlock(id="c", name="n"),
            TextBlock(text="two"),
        ],
        "assistant",
    )


def test_get_text_content() -> None:
    msg = mixed()
    assert msg.get_text_content() == "one\ntwo"
    assert msg.get_text_content(sep="") == "onetwo"


def test_get_text_content_none_without_text() -> None:
    assert Msg("a", [ThinkingBlock(thinking="x")], "assistant").get_text_content() is None
    assert Msg("a", [], "assistant").get_text_content() is None
    assert Msg("a", [TextBlock(text="")], "assistant").get_text_content() == ""


def test_get_content_blocks() -> None:
    msg = mixed()
    assert msg.get_content_blocks() == msg.content
    assert msg.get_content_blocks() is not msg.content
    assert [b.text for b in msg.get_content_blocks(TextBlock)] == ["one", "two"]
    assert msg.get_content_blocks("text") == msg.get_content_blocks(TextBlock)
    assert [b.type for b in msg.get_content_blocks(["thinking", "tool_call"])] == [
        "thinking",
        "tool_call",
    ]
    assert msg.get_content_blocks("data") == []


def test_has_content_blocks() -> None:
    msg = mixed()
    assert msg.has_content_blocks()
    assert msg.has_content_blocks("tool_call")
    assert msg.has_content_blocks(ThinkingBlock)
    assert msg.has_content_blocks(["data", "text"])
    assert not msg.has_content_blocks("data")
    assert not msg.has_content_blocks(ToolResultBlock)
    assert not Msg("a", [], "assistant").has_content_blocks()


def test_append_usage_copies_then_adds() -> None:
    msg = Msg("a", [], "assistant")
    first = Usage(
        input_tokens=1, output_tokens=2, cache_input_tokens=3, cache_creation_input_tokens=4
    )
    msg.append_usage(first)
    assert msg.usage == first
    assert msg.usage is not first
    msg.append_usage(Usage(input_tokens=10, output_tokens=20, cache_input_tokens=30))
    assert msg.usage == Usage(
        input_tokens=11, output_tokens=22, cache_input_tokens=33, cache_creation_input_tokens=4
    )
    assert first == Usage(
        input_tokens=1, output_tokens=2, cache_input_tokens=3, cache_creation_input_tokens=4
    )


def test_usage_defaults() -> None:
    assert Usage() == Usage(
        input_tokens=0, output_tokens=0, cache_input_tokens=0, cache_creation_input_tokens=0
    )


# -- blocks ----------------------------------------------------------------------------------


def test_parsed_input() -> None:
    assert ToolCallBlock(id="c", name="n", input='{"q": "x", "n": 2}').parsed_input() == {
        "q": "x",
        "n": 2,
    }
    assert ToolCallBlock(id="c", name="n").parsed_input() == {}
    assert ToolCallBlock(id="c", name="n", input="  ").parsed_input() == {}


@pytest.mark.parametrize("raw", ["[1, 2]", '"x"', "3", '{"q": '])
def test_parsed_input_rejects_non_objects(raw: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - JSONDecodeError or "not a JSON object"
        ToolCallBlock(id="c", name="n", input=raw).parsed_input()


def test_block_defaults() -> None:
    text = TextBlock(text="x")
    assert len(text.id) == 32
    assert text.finished_at is None
    hint = HintBlock(hint="h")
    assert hint.finished_at is not None  # hints are born finished
    assert hint.source is None
    call = ToolCallBlock(id="c", name="n")
    assert (call.input, call.state, call.suggested_rules) == ("", ToolCallState.PENDING, [])
    result = ToolResultBlock(id="c", name="n")
    assert (result.output, result.state, result.metadata) == ([], ToolResultState.RUNNING, {})
    assert ThinkingBlock(thinking="").extra == {}
    assert DataBlock(source=png()).name is None


def test_block_ids_are_unique() -> None:
    assert TextBlock(text="a").id != TextBlock(text="a").id


def test_block_state_converters() -> None:
    assert ToolCallBlock(id="c", name="n", state="asking").state is ToolCallState.ASKING
    assert ToolResultBlock(id="c", name="n", state="denied").state is ToolResultState.DENIED
    with pytest.raises(ValueError, match="dancing"):
        ToolCallBlock(id="c", name="n", state="dancing")
    with pytest.raises(ValueError, match="done"):
        ToolResultBlock(id="c", name="n", state="done")


def test_state_values() -> None:
    assert [s.value for s in ToolCallState] == [
        "pending",
        "asking",
        "allowed",
        "submitted",
        "finished",
    ]
    assert {s.value for s in ToolResultState} == {
        "success",
        "error",
        "interrupted",
        "denied",
        "running",
    }


@pytest.mark.parametrize(
    "make",
    [  # wrong types on purpose
        lambda: TextBlock(text=None),  # type: ignore[arg-type]
        lambda: TextBlock(text=1),  # type: ignore[arg-type]
        lambda: ThinkingBlock(thinking=b"x"),  # type: ignore[arg-type]
        lambda: Base64Source(data=None, media_type="x"),  # type: ignore[arg-type]
        lambda: Base64Source(data="", media_type=3),  # type: ignore[arg-type]
        lambda: URLSource(url="", media_type="x"),
        lambda: URLSource(url=None, media_type="x"),  # type: ignore[arg-type]
        lambda: DataBlock(source={"data": "", "media_type": "x"}),  # type: ignore[arg-type]
        lambda: HintBlock(hint=3),  # type: ignore[arg-type]
        lambda: HintBlock(hint=[ThinkingBlock(thinking="x")]),  # type: ignore[list-item]
        lambda: HintBlock(hint=["plain str"]),  # type: ignore[list-item]
        lambda: ToolCallBlock(id="", name="n"),
        lambda: ToolCallBlock(id="c", name=None),  # type: ignore[arg-type]
        lambda: ToolCallBlock(id="c", name="n", input={"q": 1}),  # type: ignore[arg-type]
        lambda: ToolResultBlock(id="", name="n"),
        lambda: ToolResultBlock(id="c", name="n", output=3),  # type: ignore[arg-type]
        lambda: ToolResultBlock(id="c", name="n", output=[ToolCallBlock(id="c", name="n")]),  # type: ignore[list-item]
    ],
)
def test_block_validators(make: Callable[[], Any]) -> None:
    with pytest.raises((TypeError, ValueError)):
        make()


def test_block_validators_run_on_assignment() -> None:
    block = TextBlock(text="x")
    with pytest.raises(TypeError):
        block.text = 3  # type: ignore[assignment]


def test_tool_result_output_text() -> None:
    assert ToolResultBlock(id="c", name="n", output="plain").output_text() == "plain"
    result = ToolResultBlock(
        id="c",
        name="n",
        output=[TextBlock(text="a"), DataBlock(source=png()), TextBlock(text="b")],
    )
    assert result.output_text() == "a\nb"
    assert result.output_text(sep="|") == "a|b"


def test_merge_base64_joins_bytes() -> None:
    assert merge_base64(b64(b"ab"), b64(b"c")) == b64(b"abc")
    assert merge_base64("", b64(b"xyz")) == b64(b"xyz")
    assert merge_base64("not base64!", "??") == "not base64!??"


# -- append_event: skips ---------------------------------------------------------------------


def test_custom_event_skipped_silently(reply: Msg, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    before = attrs.evolve(reply, content=list(reply.content))
    reply.append_event(CustomEvent(reply_id="other", name="mcp_progress", value={"p": 1}))
    reply.append_event(CustomEvent(reply_id=REPLY, name="state_updated"))
    assert reply == before
    assert caplog.records == []


def test_event_of_another_reply_skipped_with_warning(
    reply: Msg, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    reply.append_event(TextBlockStartEvent(reply_id="other", block_id="t1"))
    reply.append_event(ReplyEndEvent(session_id="s", reply_id="other"))
    assert reply.content == []
    assert reply.finished_reason is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "other" in warnings[0].getMessage()
    assert warnings[0].name == LOGGER


@pytest.mark.parametrize(
    "event",
    [
        TextBlockDeltaEvent(reply_id=REPLY, block_id="nope", delta="x"),
        TextBlockEndEvent(reply_id=REPLY, block_id="nope"),
        ThinkingBlockDeltaEvent(reply_id=REPLY, block_id="nope", delta="x"),
        ThinkingBlockEndEvent(reply_id=REPLY, block_id="nope"),
        DataBlockDeltaEvent(reply_id=REPLY, block_id="nope", media_type="x", data="AA=="),
        DataBlockEndEvent(reply_id=REPLY, block_id="nope"),
        ToolCallDeltaEvent(reply_id=REPLY, tool_call_id="nope", delta="{"),
        ToolCallEndEvent(reply_id=REPLY, tool_call_id="nope"),
        ToolResultTextDeltaEvent(reply_id=REPLY, tool_call_id="nope", delta="x"),
        ToolResultDataDeltaEvent(reply_id=REPLY, tool_call_id="nope", media_type="x", url="u"),
        ToolResultEndEvent(reply_id=REPLY, tool_call_id="nope", state="success"),
    ],
    ids=lambda e: e.type.value,
)
def test_delta_or_end_for_missing_block_skipped_with_warning(
    reply: Msg, event: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    reply.content.append(TextBlock(id="other", text="keep"))
    reply.append_event(event)  # must not raise
    assert reply.content == [
        TextBlock(id="other", text="keep", created_at=reply.content[0].created_at)
    ]
    assert reply.content[0].finished_at is None
    assert any("nope" in r.getMessage() for r in caplog.records)


def test_delta_for_block_of_another_kind_is_missing(
    reply: Msg, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    reply.append_event(ThinkingBlockStartEvent(reply_id=REPLY, block_id="b"))
    reply.append_event(TextBlockDeltaEvent(reply_id=REPLY, block_id="b", delta="x"))
    assert isinstance(reply.content[0], ThinkingBlock)
    assert reply.content[0].thinking == ""
    assert len(caplog.records) == 1


@pytest.mark.parametrize(
    "event",
    [
        ReplyStartEvent(session_id="s", reply_id=REPLY, name="agent"),
        ModelCallStartEvent(reply_id=REPLY, model_name="m"),
        ExceedMaxItersEvent(reply_id=REPLY, name="agent"),
        UserInterruptEvent(reply_id=REPLY),
    ],
    ids=lambda e: e.type.value,
)
def test_no_op_events(reply: Msg, event: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    reply.content.append(TextBlock(text="x"))
    before = attrs.evolve(reply, content=list(reply.content))
    reply.append_event(event)
    assert reply == before
    assert caplog.records == []


# -- append_event: per event type ------------------------------------------------------------


def test_reply_end_sets_finish_fields(reply: Msg) -> None:
    error = ErrorInfo(type=ErrorType.RATE_LIMIT, message="slow down")
    reply.append_event(
        ReplyEndEvent(
            session_id="s", reply_id=REPLY, finished_reason="error", error=error, created_at="t9"
        )
    )
    assert reply.finished_at == "t9"
    assert reply.finished_reason is ReplyFinishedReason.ERROR
    assert reply.error == error


def test_reply_end_completed_clears_nothing_else(reply: Msg) -> None:
    reply.append_event(ReplyEndEvent(session_id="s", reply_id=REPLY, created_at="t"))
    assert reply.finished_reason is ReplyFinishedReason.COMPLETED
    assert reply.error is None


def test_model_call_end_accumulates_usage(reply: Msg) -> None:
    for _ in range(2):
        reply.append_event(
            ModelCallEndEvent(
                reply_id=REPLY,
                input_tokens=10,
                output_tokens=5,
                cache_input_tokens=2,
                cache_creation_input_tokens=1,
                finished_reason="interrupted",
            )
        )
    assert reply.usage == Usage(
        input_tokens=20, output_tokens=10, cache_input_tokens=4, cache_creation_input_tokens=2
    )


def test_text_block_events(reply: Msg) -> None:
    reply.append_event(TextBlockStartEvent(reply_id=REPLY, block_id="t1"))
    assert reply.content == [TextBlock(id="t1", text="", created_at=reply.content[0].created_at)]
    for piece in ["Hel", "lo"]:
        reply.append_event(TextBlockDeltaEvent(reply_id=REPLY, block_id="t1", delta=piece))
    assert reply.get_text_content() == "Hello"
    assert reply.content[0].finished_at is None
    reply.append_event(TextBlockEndEvent(reply_id=REPLY, block_id="t1", created_at="t-end"))
    assert reply.content[0].finished_at == "t-end"
    assert reply.get_text_content() == "Hello"


def test_text_block_end_text_overrides(reply: Msg) -> None:
    reply.append_event(TextBlockStartEvent(reply_id=REPLY, block_id="t1"))
    reply.append_event(TextBlockDeltaEvent(reply_id=REPLY, block_id="t1", delta="Hello world"))
    reply.append_event(TextBlockEndEvent(reply_id=REPLY, block_id="t1", text="Hello"))
    assert reply.get_text_content() == "Hello"


def test_deltas_go_to_the_matching_block(reply: Msg) -> None:
    reply.append_event(TextBlockStartEvent(reply_id=REPLY, block_id="a"))
    reply.append_event(TextBlockStartEvent(reply_id=REPLY, block_id="b"))
    reply.append_event(TextBlockDeltaEvent(reply_id=REPLY, block_id="a", delta="A"))
    reply.append_event(TextBlockDeltaEvent(reply_id=REPLY, block_id="b", delta="B"))
    assert [at(reply, i, TextBlock).text for i in (0, 1)] == ["A", "B"]


def test_thinking_block_events(reply: Msg) -> None:
    reply.append_event(ThinkingBlockStartEvent(reply_id=REPLY, block_id="k"))
    reply.append_event(ThinkingBlockDeltaEvent(reply_id=REPLY, block_id="k", delta="let me "))
    reply.append_event(ThinkingBlockDeltaEvent(reply_id=REPLY, block_id="k", delta="think"))
    reply.append_event(ThinkingBlockEndEvent(reply_id=REPLY, block_id="k", created_at="te"))
    (block,) = reply.content
    assert isinstance(block, ThinkingBlock)
    assert (block.id, block.thinking, block.finished_at) == ("k", "let me think", "te")


def test_data_block_start_and_base64_deltas_merge_by_bytes(reply: Msg) -> None:
    reply.append_event(
        DataBlockStartEvent(reply_id=REPLY, block_id="d", media_type="audio/wav", name="voice")
    )
    (block,) = reply.content
    assert isinstance(block, DataBlock)
    assert block.name == "voice"
    assert block.source == Base64Source(data="", media_type="audio/wav")
    # b64("ab") ends in padding: a string concatenation would give "YWI=Yw==".
    for raw in [b"ab", b"c", b"de"]:
        reply.append_event(
            DataBlockDeltaEvent(reply_id=REPLY, block_id="d", media_type="audio/wav", data=b64(raw))
        )
    assert block.source == Base64Source(data=b64(b"abcde"), media_type="audio/wav")
    reply.append_event(DataBlockEndEvent(reply_id=REPLY, block_id="d", created_at="de"))
    assert block.finished_at == "de"


def test_data_block_url_delta_replaces_source(reply: Msg) -> None:
    reply.append_event(DataBlockStartEvent(reply_id=REPLY, block_id="d", media_type="image/png"))
    reply.append_event(
        DataBlockDeltaEvent(reply_id=REPLY, block_id="d", media_type="image/png", data=b64(b"x"))
    )
    reply.append_event(
        DataBlockDeltaEvent(
            reply_id=REPLY, block_id="d", media_type="image/jpeg", url="https://x/y.jpg"
        )
    )
    block = at(reply, 0, DataBlock)
    assert block.source == URLSource(url="https://x/y.jpg", media_type="image/jpeg")
    # a later base64 delta starts over from the bytes it carries
    reply.append_event(
        DataBlockDeltaEvent(reply_id=REPLY, block_id="d", media_type="image/png", data=b64(b"z"))
    )
    assert source_of(block) == Base64Source(data=b64(b"z"), media_type="image/png")


@pytest.mark.parametrize("hint", ["do this", [TextBlock(text="a"), DataBlock(source=png("AA=="))]])
def test_hint_block_event(reply: Msg, hint: Any) -> None:
    reply.append_event(
        HintBlockEvent(reply_id=REPLY, block_id="h", source="System", hint=hint, created_at="th")
    )
    (block,) = reply.content
    assert isinstance(block, HintBlock)
    assert (block.id, block.source, block.hint) == ("h", "System", hint)
    assert block.finished_at == "th"
    assert block.created_at == "th"
    if isinstance(hint, list):
        assert block.hint is not hint  # the message does not share the event's blocks
        assert block.hint[0] is not hint[0]


def test_tool_call_events(reply: Msg) -> None:
    reply.append_event(ToolCallStartEvent(reply_id=REPLY, tool_call_id="c1", tool_call_name="f"))
    for piece in ['{"q"', ': "x"}']:
        reply.append_event(ToolCallDeltaEvent(reply_id=REPLY, tool_call_id="c1", delta=piece))
    reply.append_event(ToolCallEndEvent(reply_id=REPLY, tool_call_id="c1", created_at="tce"))
    (call,) = reply.content
    assert isinstance(call, ToolCallBlock)
    assert (call.id, call.name, call.state) == ("c1", "f", ToolCallState.PENDING)
    assert call.parsed_input() == {"q": "x"}
    assert call.finished_at == "tce"


def _start_call_and_result(reply: Msg) -> None:
    reply.content.append(ToolCallBlock(id="c1", name="f", input="{}"))
    reply.append_event(ToolResultStartEvent(reply_id=REPLY, tool_call_id="c1", tool_call_name="f"))


def test_tool_result_start(reply: Msg) -> None:
    _start_call_and_result(reply)
    result = at(reply, 1, ToolResultBlock)
    assert (result.id, result.name, result.output, result.state) == (
        "c1",
        "f",
        [],
        ToolResultState.RUNNING,
    )


def test_tool_result_text_deltas_extend_last_text(reply: Msg) -> None:
    _start_call_and_result(reply)
    result = at(reply, 1, ToolResultBlock)
    for piece in ["a", "b"]:
        reply.append_event(ToolResultTextDeltaEvent(reply_id=REPLY, tool_call_id="c1", delta=piece))
    reply.append_event(
        ToolResultDataDeltaEvent(
            reply_id=REPLY, tool_call_id="c1", block_id="img", media_type="image/png", data="AA=="
        )
    )
    reply.append_event(ToolResultTextDeltaEvent(reply_id=REPLY, tool_call_id="c1", delta="c"))
    assert [type(b).__name__ for b in output(result)] == ["TextBlock", "DataBlock", "TextBlock"]
    assert result.output_text(sep="|") == "ab|c"


def test_tool_result_text_delta_converts_str_output(reply: Msg) -> None:
    reply.content.append(ToolResultBlock(id="c1", name="f", output="start"))
    reply.append_event(ToolResultTextDeltaEvent(reply_id=REPLY, tool_call_id="c1", delta="+more"))
    result = at(reply, 0, ToolResultBlock)
    assert len(output(result)) == 1
    assert result.output_text() == "start+more"


def test_tool_result_text_delta_on_empty_str_output(reply: Msg) -> None:
    reply.content.append(ToolResultBlock(id="c1", name="f", output=""))
    reply.append_event(ToolResultTextDeltaEvent(reply_id=REPLY, tool_call_id="c1", delta="x"))
    result = at(reply, 0, ToolResultBlock)
    assert len(output(result)) == 1
    assert result.output_text() == "x"


def test_tool_result_data_deltas_merge_by_block_id(reply: Msg) -> None:
    _start_call_and_result(reply)
    result = at(reply, 1, ToolResultBlock)

    def delta(block_id: str, **kw: Any) -> ToolResultDataDeltaEvent:
        return ToolResultDataDeltaEvent(
            reply_id=REPLY, tool_call_id="c1", block_id=block_id, media_type="image/png", **kw
        )

    reply.append_event(delta("d1", data=b64(b"ab")))
    reply.append_event(delta("d2", data=b64(b"zz")))
    reply.append_event(delta("d1", data=b64(b"c")))
    reply.append_event(delta("d3", url="https://x/i.png"))
    blocks = output(result)
    assert [b.id for b in blocks] == ["d1", "d2", "d3"]
    assert source_of(blocks[0]) == Base64Source(data=b64(b"abc"), media_type="image/png")
    assert source_of(blocks[1]) == Base64Source(data=b64(b"zz"), media_type="image/png")
    assert source_of(blocks[2]) == URLSource(url="https://x/i.png", media_type="image/png")
    reply.append_event(delta("d1", url="https://x/replaced.png"))
    assert source_of(blocks[0]) == URLSource(url="https://x/replaced.png", media_type="image/png")


def test_tool_result_end_finishes_result_and_paired_call(reply: Msg) -> None:
    reply.content.append(ToolCallBlock(id="c0", name="g", state="allowed"))
    _start_call_and_result(reply)
    reply.append_event(
        ToolResultEndEvent(
            reply_id=REPLY,
            tool_call_id="c1",
            state="error",
            metadata={"exit": 1},
            created_at="tre",
        )
    )
    other, call = calls(reply)
    result = at(reply, 2, ToolResultBlock)
    assert result.state is ToolResultState.ERROR
    assert result.metadata == {"exit": 1}
    assert result.finished_at == "tre"
    assert call.state is ToolCallState.FINISHED
    assert other.state is ToolCallState.ALLOWED


def test_tool_result_end_without_call_still_finishes_result(reply: Msg) -> None:
    reply.content.append(ToolResultBlock(id="c1", name="f"))
    reply.append_event(ToolResultEndEvent(reply_id=REPLY, tool_call_id="c1", state="success"))
    assert at(reply, 0, ToolResultBlock).state is ToolResultState.SUCCESS


def test_require_user_confirm_sets_asking_and_rules(reply: Msg) -> None:
    reply.content.extend([ToolCallBlock(id="c1", name="f"), ToolCallBlock(id="c2", name="g")])
    rule = PermissionRule(tool_name="f", behavior=PermissionBehavior.ALLOW, source="suggested")
    asked = ToolCallBlock(id="c1", name="f", state="asking", suggested_rules=[rule])
    reply.append_event(RequireUserConfirmEvent(reply_id=REPLY, tool_calls=[asked]))
    c1, c2 = calls(reply)
    assert c1.state is ToolCallState.ASKING
    assert c1.suggested_rules == [rule]
    assert c1.suggested_rules is not asked.suggested_rules
    assert c2.state is ToolCallState.PENDING
    assert c2.suggested_rules == []


def test_user_confirm_result_only_changes_asking_calls(reply: Msg) -> None:
    reply.content.extend(
        [
            ToolCallBlock(id="yes", name="f", state="asking"),
            ToolCallBlock(id="no", name="f", state="asking"),
            ToolCallBlock(id="done", name="f", state="finished"),
        ]
    )
    results = [
        ConfirmResult(confirmed=True, tool_call=ToolCallBlock(id="yes", name="f")),
        ConfirmResult(confirmed=False, tool_call=ToolCallBlock(id="no", name="f")),
        ConfirmResult(confirmed=True, tool_call=ToolCallBlock(id="done", name="f")),
        ConfirmResult(confirmed=True, tool_call=ToolCallBlock(id="ghost", name="f")),
    ]
    reply.append_event(UserConfirmResultEvent(reply_id=REPLY, confirm_results=results))
    assert [c.state for c in calls(reply)] == [
        ToolCallState.ALLOWED,
        ToolCallState.FINISHED,
        ToolCallState.FINISHED,
    ]
    assert len(reply.content) == 3


def test_require_external_execution_sets_submitted(reply: Msg) -> None:
    reply.content.extend(
        [ToolCallBlock(id="c1", name="f", state="allowed"), ToolCallBlock(id="c2", name="g")]
    )
    submitted = ToolCallBlock(id="c1", name="f", state="submitted")
    reply.append_event(RequireExternalExecutionEvent(reply_id=REPLY, tool_calls=[submitted]))
    assert [c.state for c in calls(reply)] == [ToolCallState.SUBMITTED, ToolCallState.PENDING]


def test_external_execution_result_appends_missing_results(reply: Msg) -> None:
    reply.content.extend(
        [
            ToolCallBlock(id="c1", name="f", state="submitted"),
            ToolCallBlock(id="c2", name="g", state="submitted"),
            ToolResultBlock(id="c2", name="g", output="already"),
        ]
    )
    fresh = ToolResultBlock(id="c1", name="f", output="ran", state="success")
    stamped = ToolResultBlock(id="c3", name="h", output="x", finished_at="mine")
    dup = ToolResultBlock(id="c2", name="g", output="again")
    reply.append_event(
        ExternalExecutionResultEvent(
            reply_id=REPLY, execution_results=[fresh, dup, stamped], created_at="tx"
        )
    )
    added = reply.get_content_blocks(ToolResultBlock)[1:]
    assert [(r.id, r.output) for r in added] == [("c1", "ran"), ("c3", "x")]
    assert added[0].finished_at == "tx"
    assert added[1].finished_at == "mine"
    assert added[0] is not fresh
    assert fresh.finished_at is None  # the event's block is untouched
    assert at(reply, 2, ToolResultBlock).output == "already"


def test_input_events_without_reply_id_are_skipped(
    reply: Msg, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    reply.content.append(ToolCallBlock(id="c1", name="f", state="asking"))
    reply.append_event(
        UserConfirmResultEvent(
            confirm_results=[
                ConfirmResult(confirmed=True, tool_call=ToolCallBlock(id="c1", name="f"))
            ]
        )
    )
    assert at(reply, 0, ToolCallBlock).state is ToolCallState.ASKING
    assert len(caplog.records) == 1


# -- a whole reply ---------------------------------------------------------------------------


def test_rebuild_whole_reply_from_events(
    fixed_factories: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Thinking + text + a streamed tool call + its result + a second round + end."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    r = REPLY
    events: list[AgentEvent] = [
        ReplyStartEvent(session_id="s", reply_id=r, name="agent"),
        HintBlockEvent(reply_id=r, block_id="h1", source="System", hint="now", created_at="t1"),
        ModelCallStartEvent(reply_id=r, model_name="m"),
        ThinkingBlockStartEvent(reply_id=r, block_id="k1"),
        ThinkingBlockDeltaEvent(reply_id=r, block_id="k1", delta="I should "),
        ThinkingBlockDeltaEvent(reply_id=r, block_id="k1", delta="search."),
        TextBlockStartEvent(reply_id=r, block_id="x1"),
        ThinkingBlockEndEvent(reply_id=r, block_id="k1", created_at="t2"),
        TextBlockDeltaEvent(reply_id=r, block_id="x1", delta="Let me "),
        TextBlockDeltaEvent(reply_id=r, block_id="x1", delta="look."),
        TextBlockEndEvent(reply_id=r, block_id="x1", created_at="t3"),
        ToolCallStartEvent(reply_id=r, tool_call_id="call_1", tool_call_name="search"),
        ToolCallDeltaEvent(reply_id=r, tool_call_id="call_1", delta='{"query": '),
        ToolCallDeltaEvent(reply_id=r, tool_call_id="call_1", delta='"trio"}'),
        ToolCallEndEvent(reply_id=r, tool_call_id="call_1", created_at="t4"),
        ModelCallEndEvent(reply_id=r, input_tokens=100, output_tokens=20, cache_input_tokens=50),
        ToolResultStartEvent(reply_id=r, tool_call_id="call_1", tool_call_name="search"),
        CustomEvent(reply_id=r, name="mcp_progress", value={"progress": 0.5}),
        ToolResultTextDeltaEvent(reply_id=r, tool_call_id="call_1", delta="found "),
        ToolResultTextDeltaEvent(reply_id=r, tool_call_id="call_1", delta="3 results"),
        ToolResultEndEvent(
            reply_id=r, tool_call_id="call_1", state="success", metadata={"n": 3}, created_at="t5"
        ),
        ModelCallStartEvent(reply_id=r, model_name="m"),
        TextBlockStartEvent(reply_id=r, block_id="x2"),
        TextBlockDeltaEvent(reply_id=r, block_id="x2", delta="Trio is "),
        TextBlockDeltaEvent(reply_id=r, block_id="x2", delta="great."),
        TextBlockEndEvent(reply_id=r, block_id="x2", created_at="t6"),
        ModelCallEndEvent(reply_id=r, input_tokens=150, output_tokens=10, cache_input_tokens=100),
        ReplyEndEvent(session_id="s", reply_id=r, finished_reason="completed", created_at="t7"),
    ]
    msg = Msg("agent", [], "assistant", id=r, created_at="T0")
    for event in events:
        msg.append_event(event)

    expected = Msg(
        "agent",
        [
            HintBlock(id="h1", source="System", hint="now", created_at="t1", finished_at="t1"),
            ThinkingBlock(id="k1", thinking="I should search.", created_at="T", finished_at="t2"),
            TextBlock(id="x1", text="Let me look.", created_at="T", finished_at="t3"),
            ToolCallBlock(
                id="call_1",
                name="search",
                input='{"query": "trio"}',
                state=ToolCallState.FINISHED,
                created_at="T",
                finished_at="t4",
            ),
            ToolResultBlock(
                id="call_1",
                name="search",
                output=[TextBlock(id="GEN", text="found 3 results", created_at="T")],
                state=ToolResultState.SUCCESS,
                metadata={"n": 3},
                created_at="T",
                finished_at="t5",
            ),
            TextBlock(id="x2", text="Trio is great.", created_at="T", finished_at="t6"),
        ],
        "assistant",
        id=r,
        created_at="T0",
        usage=Usage(input_tokens=250, output_tokens=30, cache_input_tokens=150),
        finished_at="t7",
        finished_reason=ReplyFinishedReason.COMPLETED,
    )
    assert msg == expected
    assert msg.get_text_content() == "Let me look.\nTrio is great."
    assert caplog.records == []


def test_rebuild_interrupted_reply(reply: Msg) -> None:
    r = REPLY
    events: list[AgentEvent] = [
        ModelCallStartEvent(reply_id=r, model_name="m"),
        TextBlockStartEvent(reply_id=r, block_id="x"),
        TextBlockDeltaEvent(reply_id=r, block_id="x", delta="partial"),
        TextBlockEndEvent(reply_id=r, block_id="x"),
        ToolCallStartEvent(reply_id=r, tool_call_id="c", tool_call_name="f"),
        ToolCallEndEvent(reply_id=r, tool_call_id="c"),
        ModelCallEndEvent(reply_id=r, finished_reason="interrupted"),
        ToolResultStartEvent(reply_id=r, tool_call_id="c", tool_call_name="f"),
        ToolResultTextDeltaEvent(reply_id=r, tool_call_id="c", delta="interrupted"),
        ToolResultEndEvent(reply_id=r, tool_call_id="c", state="interrupted"),
        ReplyEndEvent(session_id="s", reply_id=r, finished_reason="interrupted"),
    ]
    for event in events:
        reply.append_event(event)
    (call,) = calls(reply)
    (result,) = reply.get_content_blocks(ToolResultBlock)
    assert call.state is ToolCallState.FINISHED
    assert result.state is ToolResultState.INTERRUPTED
    assert reply.finished_reason is ReplyFinishedReason.INTERRUPTED
    assert reply.usage == Usage()


# -- properties ------------------------------------------------------------------------------

PROPERTY = settings(max_examples=60, deadline=None)


@PROPERTY
@given(pieces=st.lists(st.text(max_size=10), max_size=8))
def test_text_and_tool_input_deltas_concatenate(pieces: list[str]) -> None:
    msg = Msg("agent", [], "assistant", id=REPLY)
    msg.append_event(TextBlockStartEvent(reply_id=REPLY, block_id="t"))
    msg.append_event(ToolCallStartEvent(reply_id=REPLY, tool_call_id="c", tool_call_name="f"))
    for piece in pieces:
        msg.append_event(TextBlockDeltaEvent(reply_id=REPLY, block_id="t", delta=piece))
        msg.append_event(ToolCallDeltaEvent(reply_id=REPLY, tool_call_id="c", delta=piece))
    assert at(msg, 0, TextBlock).text == "".join(pieces)
    assert at(msg, 1, ToolCallBlock).input == "".join(pieces)


@PROPERTY
@given(chunks=st.lists(st.binary(max_size=16), max_size=8))
def test_base64_deltas_decode_to_the_concatenated_bytes(chunks: list[bytes]) -> None:
    msg = Msg("agent", [], "assistant", id=REPLY)
    msg.append_event(DataBlockStartEvent(reply_id=REPLY, block_id="d", media_type="audio/wav"))
    msg.content.append(ToolResultBlock(id="c", name="f"))
    for chunk in chunks:
        msg.append_event(
            DataBlockDeltaEvent(
                reply_id=REPLY, block_id="d", media_type="audio/wav", data=b64(chunk)
            )
        )
        msg.append_event(
            ToolResultDataDeltaEvent(
                reply_id=REPLY, tool_call_id="c", block_id="o", media_type="x", data=b64(chunk)
            )
        )
    source = source_of(at(msg, 0, DataBlock))
    assert isinstance(source, Base64Source)
    assert base64.b64decode(source.data, validate=True) == b"".join(chunks)
    result_blocks = output(at(msg, 1, ToolResultBlock))
    if chunks:
        (block,) = result_blocks
        result_source = source_of(block)
        assert isinstance(result_source, Base64Source)
        assert base64.b64decode(result_source.data) == b"".join(chunks)
    else:
        assert result_blocks == []
