"""``ScriptedModel`` and its chunk helpers (trioagent/testing/_scripted.py)."""

from __future__ import annotations

import pytest
import trio

from trioagent.message import TextBlock, ThinkingBlock, ToolCallBlock, UserMsg
from trioagent.model import ChatResponse, ChatUsage
from trioagent.testing import (
    ScriptedModel,
    ScriptError,
    text_chunks,
    thinking_chunks,
    tool_call_chunks,
)
from trioagent.types import FinishedReason, ToolChoice

TOOLS = [{"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}]


class Chunks:
    def __init__(self) -> None:
        self.items: list[ChatResponse] = []

    async def __call__(self, chunk: ChatResponse) -> None:
        self.items.append(chunk)


def msgs(text: str = "hi"):
    return [UserMsg("user", text)]


async def test_streams_deltas_and_returns_the_complete_response():
    model = ScriptedModel([text_chunks("a", "b", usage=ChatUsage(input_tokens=3))])
    seen = Chunks()
    response = await model(msgs(), emit=seen)
    assert [c.content[0].text for c in seen.items] == ["a", "b"]  # type: ignore[union-attr]
    assert all(not c.is_last for c in seen.items)
    assert response.is_last
    assert [b.text for b in response.content] == ["ab"]  # type: ignore[union-attr]
    assert response.usage is not None
    assert response.usage.input_tokens == 3
    assert response.finished_reason == FinishedReason.COMPLETED


async def test_a_whole_response_streams_as_one_delta():
    model = ScriptedModel([ChatResponse(content=[TextBlock(text="whole")])])
    seen = Chunks()
    response = await model(msgs(), emit=seen)
    assert len(seen.items) == 1
    assert seen.items[0].content[0].text == "whole"  # type: ignore[union-attr]
    assert response.content[0].text == "whole"  # type: ignore[union-attr]


async def test_records_every_request_as_a_deep_copy():
    model = ScriptedModel([text_chunks("1"), text_chunks("2")])
    conversation = msgs("first")
    await model(conversation, TOOLS, ToolChoice(mode="required"))
    conversation[0].content[0].text = "changed"  # type: ignore[union-attr]
    await model(conversation)
    first, second = model.requests
    assert first.messages[0].get_text_content() == "first"
    assert first.tools == TOOLS
    assert first.tool_choice == ToolChoice(mode="required")
    assert second.messages[0].get_text_content() == "changed"
    assert (second.tools, second.tool_choice) == (None, None)


async def test_an_unexpected_call_is_a_script_error():
    model = ScriptedModel([text_chunks("only")])
    await model(msgs())
    with pytest.raises(ScriptError, match="unexpected model call #2"):
        await model(msgs())
    assert len(model.requests) == 2  # the unexpected request is still recorded
    assert issubclass(ScriptError, AssertionError)


async def test_assert_consumed_and_add_steps():
    model = ScriptedModel([text_chunks("1"), text_chunks("2")])
    assert model.remaining == 2
    with pytest.raises(ScriptError, match="2 scripted step"):
        model.assert_consumed()
    await model(msgs())
    model.add_steps(text_chunks("3"))
    assert model.remaining == 2
    await model(msgs())
    await model(msgs())
    model.assert_consumed()


async def test_exception_steps_are_raised():
    model = ScriptedModel([ValueError("scripted failure"), text_chunks("after")])
    with pytest.raises(ValueError, match="scripted failure"):
        await model(msgs())
    response = await model(msgs())
    assert response.content[0].text == "after"  # type: ignore[union-attr]


async def test_callable_steps_see_the_request():
    def sync_step(request):
        return text_chunks(f"you said {request.messages[-1].get_text_content()}")

    async def async_step(request):
        await trio.lowlevel.checkpoint()
        return ChatResponse(content=[TextBlock(text=f"{len(request.messages)} message(s)")])

    def failing_step(request):
        return RuntimeError("from a callable")

    model = ScriptedModel([sync_step, async_step, failing_step])
    assert (await model(msgs("ping"))).content[0].text == "you said ping"  # type: ignore[union-attr]
    assert (await model(msgs())).content[0].text == "1 message(s)"  # type: ignore[union-attr]
    with pytest.raises(RuntimeError, match="from a callable"):
        await model(msgs())


async def test_an_invalid_step_is_a_script_error():
    model = ScriptedModel(["not a step"])  # type: ignore[list-item]
    with pytest.raises(ScriptError, match="invalid scripted step"):
        await model(msgs())


async def test_non_stream_mode_returns_without_emitting():
    model = ScriptedModel(
        [text_chunks("a", "b"), ChatResponse(content=[TextBlock(text="whole")])], stream=False
    )
    seen = Chunks()
    response = await model(msgs(), emit=seen)
    assert seen.items == []
    assert response.is_last
    assert response.content[0].text == "ab"  # type: ignore[union-attr]
    whole = await model(msgs(), emit=seen)
    assert whole.content[0].text == "whole"  # type: ignore[union-attr]
    assert seen.items == []


async def test_non_stream_mode_uses_a_scripted_final_chunk():
    final = ChatResponse(content=[TextBlock(text="final wins")], is_last=True)
    model = ScriptedModel([[*text_chunks("ignored"), final]], stream=False)
    response = await model(msgs())
    assert response.content[0].text == "final wins"  # type: ignore[union-attr]


async def test_chunk_delay_uses_the_clock(autojump_clock):
    model = ScriptedModel([text_chunks("a", "b", "c")], chunk_delay=2.0)
    start = trio.current_time()
    await model(msgs())
    assert trio.current_time() - start == pytest.approx(6.0)


async def test_cancellation_emits_the_interrupted_partial(autojump_clock):
    model = ScriptedModel([text_chunks("a", "b", "c")], chunk_delay=1.0)
    seen = Chunks()
    with trio.move_on_after(2.5) as scope:
        await model(msgs(), emit=seen)
    assert scope.cancelled_caught
    last = seen.items[-1]
    assert last.is_last
    assert last.finished_reason == FinishedReason.INTERRUPTED
    assert [b.text for b in last.content] == ["ab"]  # type: ignore[union-attr]


async def test_tool_choice_is_validated_against_the_tools():
    model = ScriptedModel([text_chunks("x")])
    with pytest.raises(ValueError, match="Invalid tool name 'missing'"):
        await model(msgs(), TOOLS, ToolChoice(mode="missing"))


async def test_chunk_helpers():
    chunks = text_chunks("a", "b", block_id="t1", usage=ChatUsage(output_tokens=2))
    assert [c.content[0].id for c in chunks] == ["t1", "t1"]
    assert chunks[0].usage is None
    assert chunks[-1].usage is not None
    assert all(not c.is_last for c in chunks)
    ids = {c.content[0].id for c in text_chunks("a", "b")}
    assert len(ids) == 1  # one generated id shared by the block's chunks

    thinking = thinking_chunks("x", "y")
    assert all(isinstance(c.content[0], ThinkingBlock) for c in thinking)
    assert len({c.content[0].id for c in thinking}) == 1

    calls = tool_call_chunks("c1", "t", '{"a":', " 1}")
    assert [c.content[0].input for c in calls] == ['{"a":', " 1}"]  # type: ignore[union-attr]
    assert all(isinstance(c.content[0], ToolCallBlock) for c in calls)
    [empty] = tool_call_chunks("c2", "t")
    assert empty.content[0].input == ""  # type: ignore[union-attr]

    model = ScriptedModel([[*text_chunks("pre"), *tool_call_chunks("c1", "t", '{"a":', " 1}")]])
    response = await model(msgs(), TOOLS)
    call = response.content[-1]
    assert isinstance(call, ToolCallBlock)
    assert (call.id, call.input) == ("c1", '{"a": 1}')
