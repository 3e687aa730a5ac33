"""``ScriptedModel`` and its chunk helpers (trioagent/testing/_scripted.py): a model that plays
a script of steps (chunk lists, whole responses, exceptions, callables), records every request
and stands in for a provider in agent tests.  Also its edges, from a user's point of view:
exhausted scripts, retries, callable steps, mock-clock delays, and steps shared between agents.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from agent_helpers import ALLOW, make_agent, user

from trioagent.agent import Agent
from trioagent.exception import ModelUpstreamError
from trioagent.message import AssistantMsg, TextBlock, ThinkingBlock, ToolCallBlock, UserMsg
from trioagent.model import ChatResponse, ChatUsage
from trioagent.testing import (
    ScriptedModel,
    ScriptedRequest,
    ScriptError,
    text_chunks,
    thinking_chunks,
    tool_call_chunks,
)
from trioagent.tool import Toolkit
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


async def test_the_request_copy_is_independent_down_to_nested_blocks():
    call = ToolCallBlock(id="c1", name="t", input="{}")
    conversation = [
        UserMsg("user", "q"),
        AssistantMsg("bot", [call]),
    ]
    conversation[1].metadata["tags"] = ["a"]
    model = ScriptedModel([text_chunks("1")])
    await model(conversation)
    seen = model.requests[0].messages
    assert seen == conversation
    call.input = '{"x": 1}'
    conversation[1].metadata["tags"].append("b")
    conversation[1].content.append(TextBlock(text="later"))
    assert [(b.id, b.input) for b in seen[1].content] == [("c1", "{}")]  # type: ignore[union-attr]
    assert seen[1].metadata == {"tags": ["a"]}


async def test_record_requests_false_keeps_no_copies_but_callables_see_the_request():
    seen: list[ScriptedRequest] = []

    def step(request: ScriptedRequest) -> list[ChatResponse]:
        seen.append(request)
        return text_chunks("ok")

    model = ScriptedModel([step, text_chunks("2")], record_requests=False)
    conversation = msgs("first")
    await model(conversation, TOOLS)
    await model(conversation)
    assert model.requests == []
    assert seen[0].messages[0] is conversation[0]  # the call's own messages, not a copy
    assert seen[0].tools == TOOLS
    with pytest.raises(ScriptError, match="call #3"):
        await model(conversation)


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


# -- edges, through an agent and on the mock clock --------------------------------------------------


async def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    await trio.sleep(1)
    return f"value of {key}"


def lookup_agent(model: ScriptedModel) -> Agent:
    """An agent on ``model`` with the ``lookup`` tool."""
    toolkit = Toolkit()
    toolkit.register_function(lookup, permission=ALLOW)
    agent, _ = make_agent(model=model, toolkit=toolkit)
    return agent


async def test_an_exhausted_script_fails_the_agents_reply_clearly(autojump_clock):
    model = ScriptedModel([tool_call_chunks("c1", "lookup", '{"key": "a"}')])
    agent = lookup_agent(model)
    with pytest.raises(ScriptError, match=r"unexpected model call #2: the script has no step"):
        await agent.reply(user())
    assert len(model.requests) == 2  # the unexpected call is recorded too
    assert any(m.has_content_blocks("tool_result") for m in model.requests[1].messages)


async def test_a_script_error_is_not_retried_by_model_retries(autojump_clock):
    model = ScriptedModel([], max_retries=3)
    with pytest.raises(ScriptError):
        await model([user()])
    assert len(model.requests) == 1


async def test_an_exception_step_exercises_model_retries(autojump_clock):
    model = ScriptedModel(
        [ModelUpstreamError("busy", status_code=503), text_chunks("ok")],
        max_retries=1,
        retry_delay=5.0,
    )
    start = trio.current_time()
    response = await model([user()])
    assert response.content[0].text == "ok"  # type: ignore[union-attr]
    assert len(model.requests) == 2
    assert trio.current_time() > start  # the backoff slept on the (mock) clock
    model.assert_consumed()


async def test_callable_steps_edge_cases(autojump_clock):
    async def raising(request: ScriptedRequest) -> Any:
        await trio.sleep(1)
        raise KeyError("raised, not returned")

    def nested(request: ScriptedRequest) -> Any:
        return lambda r: text_chunks("too deep")

    def chunks_of_tool_call(request: ScriptedRequest) -> Any:
        return [*text_chunks("pre"), *tool_call_chunks("c9", "t", "{}")]

    model = ScriptedModel([raising, nested, chunks_of_tool_call])
    with pytest.raises(KeyError, match="raised, not returned"):
        await model([user()])
    with pytest.raises(ScriptError, match="invalid scripted step"):
        await model([user()])
    response = await model([user()])
    assert [b.type for b in response.content] == ["text", "tool_call"]
    model.assert_consumed()


async def test_a_callable_step_can_extend_the_script(autojump_clock):
    model = ScriptedModel()

    def first(request: ScriptedRequest) -> Any:
        model.add_steps(text_chunks("second"))
        return text_chunks("first")

    model.add_steps(first)
    assert model.remaining == 1
    assert (await model([user()])).content[0].text == "first"  # type: ignore[union-attr]
    assert model.remaining == 1
    assert (await model([user()])).content[0].text == "second"  # type: ignore[union-attr]
    model.assert_consumed()


async def test_assert_consumed_counts_unplayed_error_steps():
    model = ScriptedModel([text_chunks("x"), ValueError("never raised")])
    await model([user()])
    with pytest.raises(ScriptError, match=r"^1 scripted step\(s\) were never played$"):
        model.assert_consumed()


@pytest.mark.parametrize(
    ("step", "stream", "expected"),
    [
        (text_chunks("a", "b", "c"), True, 6.0),  # between streamed chunks
        (ChatResponse(content=[TextBlock(text="whole")]), True, 2.0),  # one delta
        (text_chunks("a", "b", "c"), False, 2.0),  # a plain call pauses once
    ],
)
async def test_chunk_delay_is_mock_clock_time(step, stream, expected, autojump_clock):
    model = ScriptedModel([step], chunk_delay=2.0, stream=stream)
    start = trio.current_time()
    await model([user()])
    assert trio.current_time() - start == pytest.approx(expected)


async def test_recorded_requests_survive_the_agents_later_mutations(autojump_clock):
    tools = [{"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}]
    model = ScriptedModel([text_chunks("1"), text_chunks("2")])
    conversation = [user("first")]
    await model(conversation, tools)
    tools[0]["function"]["name"] = "renamed"
    conversation.append(AssistantMsg("assistant", "appended later"))
    conversation[0].content.append(TextBlock(text="extra"))
    first = model.requests[0]
    assert first.tools is not None
    assert first.tools[0]["function"]["name"] == "t"
    assert [m.get_text_content() for m in first.messages] == ["first"]
    with pytest.raises(AttributeError):
        first.messages = []  # type: ignore[misc]  # frozen record

    # Through an agent: the first request does not see the reply appended afterwards.
    model = ScriptedModel([tool_call_chunks("c1", "lookup", '{"key": "a"}'), text_chunks("done")])
    agent = lookup_agent(model)
    await agent.reply(user("q"))
    assert len(model.requests[0].messages) < len(model.requests[1].messages)
    assert not any(m.has_content_blocks("tool_call") for m in model.requests[0].messages)


@pytest.mark.parametrize("stream", [True, False])
async def test_steps_shared_between_agents_are_not_mutated(stream, autojump_clock):
    """A module-level script reused by many agents (as a sweep's ``make_agent`` does)."""
    call = ChatResponse(content=[ToolCallBlock(id="c1", name="lookup", input='{"key": "a"}')])
    chunks = tool_call_chunks("c2", "lookup", '{"key": ', '"b"}')
    final = ChatResponse(content=[TextBlock(text="done")])
    for steps in ([call, final], [chunks, final]):
        before = [repr(s) for s in steps]
        for _ in range(2):
            agent = lookup_agent(ScriptedModel(steps, stream=stream))
            msg = await agent.reply(user())
            assert msg.get_text_content() == "done"
        assert [repr(s) for s in steps] == before
