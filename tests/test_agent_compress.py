"""Context compression, the image limit and tool-result truncation
(trioagent/agent/_compress.py), following AgentScope 2.0.11: the split, the summary prompt,
the overflow retry and the fallback to truncation.

Token counts use the default estimate (UTF-8 bytes / 4), so a text of ``4 * n`` ASCII
characters is ``n`` tokens.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from agent_helpers import (
    SUMMARY_FIELDS,
    Recorder,
    assert_paired,
    sequential_toolkit,
    summary_step,
    tokens,
)

from trioagent.agent import Agent, ContextConfig, InjectionConfig
from trioagent.agent._compress import (
    TRUNCATED_SUMMARY,
    TRUNCATION_NOTE,
    CompressContextTool,
    Compressor,
)
from trioagent.agent._config import DEFAULT_SUMMARY_TEMPLATE
from trioagent.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    UserMsg,
)
from trioagent.model import ChatResponse, ChatUsage
from trioagent.testing import ScriptedModel, text_chunks, tool_call_chunks

SUMMARY = DEFAULT_SUMMARY_TEMPLATE.format(**SUMMARY_FIELDS)


def compress_agent(steps=(), *, context_size: int = 100, **config) -> tuple[Agent, ScriptedModel]:
    """A compression setup: context size 100, trigger 0.7, reserve 0.4, a 20-token prompt."""
    model = ScriptedModel(list(steps), context_size=context_size)
    cfg = ContextConfig(trigger_ratio=0.7, reserve_ratio=0.4, **config)
    agent = Agent(
        "assistant",
        tokens(20, "S"),
        model,
        context_config=cfg,
        injection_config=InjectionConfig(inject_runtime_state=False),
    )
    return agent, model


def three_messages() -> list[Msg]:
    return [
        UserMsg("user", tokens(30, "1")),
        AssistantMsg("assistant", tokens(10, "2")),
        UserMsg("user", tokens(10, "3")),
    ]


# -- 25. compression ----------------------------------------------------------------------------


async def test_first_message_is_summarized():
    agent, model = compress_agent([summary_step()])
    msgs = three_messages()
    await agent.observe(msgs)
    assert await model.count_tokens([*msgs]) == 50
    await agent.compress_context()
    assert agent.state.summary == SUMMARY
    assert [m.get_text_content() for m in agent.state.context] == [
        tokens(10, "2"),
        tokens(10, "3"),
    ]
    assert [m.id for m in agent.state.context] == [msgs[1].id, msgs[2].id]
    # The compression prompt: system, the compressed message, then the compression prompt.
    sent = model.requests[0].messages
    assert [m.role for m in sent] == ["system", "user", "user"]
    assert sent[1].get_text_content() == tokens(30, "1")
    assert "The conversation so far is about to be compressed" in sent[2].get_text_content()
    assert "{current_time}" not in sent[2].get_text_content()
    assert "(UTC)" in sent[2].get_text_content()
    model.assert_consumed()


async def test_below_the_trigger_nothing_happens():
    agent, model = compress_agent()
    msgs = three_messages()
    await agent.observe(msgs[1:])  # 20 + 10 + 10 = 40 < 70
    await agent.compress_context()
    assert agent.state.summary == ""
    assert len(agent.state.context) == 2
    assert model.requests == []


async def test_next_request_carries_the_summary_after_the_system_prompt():
    agent, model = compress_agent([summary_step(), text_chunks("answer")])
    msgs = three_messages()
    await agent.observe(msgs[:2])
    msg = await agent.reply(msgs[2])  # compression runs before the reasoning
    assert msg.get_text_content() == "answer"
    reply_request = model.requests[1].messages
    assert [m.role for m in reply_request] == ["system", "user", "assistant", "user"]
    assert reply_request[1].get_text_content() == SUMMARY
    assert reply_request[2].get_text_content() == tokens(10, "2")


async def test_instructions_appear_only_in_the_compression_prompt():
    agent, model = compress_agent([summary_step()])
    await agent.observe(three_messages())
    await agent.compress_context(instructions="Keep the numbers.")
    sent = model.requests[0].messages
    hint_msgs = [m for m in sent if any(isinstance(b, HintBlock) for b in m.content)]
    assert len(hint_msgs) == 1
    assert hint_msgs[0].role == "assistant"
    assert hint_msgs[0].content[0].hint == "Keep the numbers."  # type: ignore[union-attr]
    assert sent[-2] is hint_msgs[0]  # right before the compression prompt
    # Not in the resulting context or summary.
    assert "Keep the numbers." not in agent.state.summary
    assert not any(isinstance(b, HintBlock) for m in agent.state.context for b in m.content)


async def test_overflow_retry_keeps_the_instructions():
    agent, model = compress_agent([RuntimeError("context too long"), summary_step()])
    await agent.observe(three_messages())
    await agent.compress_context(instructions="Keep the numbers.")
    assert agent.state.summary == SUMMARY
    assert len(model.requests) == 2
    retry = model.requests[1].messages
    assert any(
        isinstance(b, HintBlock) and b.hint == "Keep the numbers." for m in retry for b in m.content
    )


async def test_failed_summary_falls_back_to_truncation(caplog):
    agent, model = compress_agent([RuntimeError("no"), RuntimeError("still no")])
    await agent.observe(three_messages())
    with caplog.at_level(logging.WARNING, logger="trioagent.agent"):
        await agent.compress_context()
    assert agent.state.summary == TRUNCATED_SUMMARY
    assert len(agent.state.context) == 2
    assert any("truncating" in r.getMessage() for r in caplog.records)
    model.assert_consumed()


async def test_failed_summary_raises_without_the_truncation_fallback():
    agent, _ = compress_agent(
        [RuntimeError("no"), RuntimeError("still no")],
        compression_fallback_to_truncation=False,
    )
    await agent.observe(three_messages())
    with pytest.raises(RuntimeError, match=r"^(still )?no$"):
        await agent.compress_context()
    assert agent.state.summary == ""
    assert len(agent.state.context) == 3


async def test_a_prompt_alone_over_the_trigger_is_an_error():
    model = ScriptedModel(context_size=100)
    agent = Agent(
        "assistant",
        tokens(80, "S"),
        model,
        context_config=ContextConfig(trigger_ratio=0.7, reserve_ratio=0.4),
        injection_config=InjectionConfig(inject_runtime_state=False),
    )
    with pytest.raises(RuntimeError, match="exceed the compression threshold"):
        await agent.compress_context()


async def test_compression_usage_lands_on_the_tail_message():
    agent, _ = compress_agent([summary_step(usage=ChatUsage(input_tokens=40, output_tokens=9))])
    await agent.observe(three_messages())
    await agent.compress_context()
    usage = agent.state.context[-1].usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (40, 9)


async def test_a_tool_call_and_its_result_stay_together():
    """A reserved result whose call was compressed moves to the compressed side."""
    from trioagent.message import ToolCallBlock

    agent, model = compress_agent([summary_step()])
    call = ToolCallBlock(id="c1", name="t", input=tokens(35, "c"), state="finished")
    result = ToolResultBlock(id="c1", name="t", output=tokens(2, "r"), state="success")
    agent.state.context = [
        Msg("assistant", [call], "assistant", id="m1"),
        Msg("assistant", [result, TextBlock(text=tokens(3, "t"))], "assistant", id="m2"),
        UserMsg("user", tokens(10, "u")),
    ]
    await agent.compress_context()
    assert agent.state.summary == SUMMARY
    # The split fell after m1; m2's result followed its call to the compressed side.
    assert_paired(model.requests[0].messages)
    assert any(
        isinstance(b, ToolResultBlock) for m in model.requests[0].messages for b in m.content
    )
    head = agent.state.context[0]
    assert head.id == "m2"
    assert len(head.content) == 1
    assert isinstance(head.content[0], TextBlock)
    assert_paired(agent.state.context)


# -- 11. the CompressContext tool ------------------------------------------------------------------


def tool_agent(steps, **config) -> tuple[Agent, ScriptedModel]:
    """Context size 1000: automatic compression at 700 tokens, the tool's own trigger at 600
    (trigger 0.7 - buffer 0.1), a reserve of 400; 20 + 300 + 100 tokens already in context."""
    agent, model = compress_agent(
        steps,
        context_size=1000,
        context_buffer_ratio=0.1,
        compression_tool_enabled=True,
        **config,
    )
    agent.state.context = [
        UserMsg("user", tokens(300, "1")),
        AssistantMsg("assistant", tokens(100, "2")),
    ]
    return agent, model


def compress_call(text: str | None = None) -> ChatResponse:
    content: list[Any] = [TextBlock(text=text)] if text else []
    return ChatResponse(content=[*content, ToolCallBlock(id="c1", name="CompressContext")])


def tool_result(agent: Agent) -> ToolResultBlock:
    [result] = [
        b
        for m in agent.state.context
        for b in m.content
        if isinstance(b, ToolResultBlock) and b.name == "CompressContext"
    ]
    return result


def output_text(result: ToolResultBlock) -> str:
    if isinstance(result.output, str):
        return result.output
    return "".join(b.text for b in result.output if isinstance(b, TextBlock))


async def estimate(model: ScriptedModel, index: int = 0) -> int:
    request = model.requests[index]
    return int(await model.count_tokens(request.messages, request.tools))


async def test_the_tool_is_offered_once_and_only_when_enabled():
    agent, model = tool_agent([text_chunks("a"), text_chunks("b")])
    await agent.reply(UserMsg("user", "hi"))
    await agent.reply(UserMsg("user", "again"))
    for request in model.requests:
        assert [t["function"]["name"] for t in request.tools or []] == ["CompressContext"]
    # Reply-scoped: offered to every request, never written to the caller's toolkit.
    assert agent.toolkit.get_tool("CompressContext") is None
    assert not CompressContextTool.is_concurrency_safe

    plain, plain_model = compress_agent([text_chunks("a")], context_size=1000)
    await plain.reply(UserMsg("user", "hi"))
    assert not plain_model.requests[0].tools
    assert plain.toolkit.get_tool("CompressContext") is None


async def test_the_model_compresses_its_own_context():
    agent, model = tool_agent([compress_call(), summary_step(), text_chunks("done")])
    msg = await agent.reply(UserMsg("user", tokens(120, "3")))
    # Past the tool's trigger (600) but below the automatic one (700).
    assert 600 <= await estimate(model) < 700
    assert msg.get_text_content() == "done"
    assert agent.state.summary == SUMMARY
    result = tool_result(agent)
    assert result.state == "success"
    assert output_text(result) == "Context compressed successfully."
    texts = [m.get_text_content() for m in agent.state.context]
    assert tokens(300, "1") not in texts
    assert agent.state.context[-1].id == msg.id
    assert_paired(agent.state.context)
    # The next reasoning step sees the summary instead of the compressed message.
    assert model.requests[2].messages[1].get_text_content() == SUMMARY


async def test_below_the_tools_trigger_the_context_is_left_alone():
    agent, model = tool_agent([compress_call(), text_chunks("done")])
    before = [m.id for m in agent.state.context]
    await agent.reply(UserMsg("user", tokens(100, "3")))
    assert await estimate(model) < 600
    assert not agent.state.summary
    assert [m.id for m in agent.state.context][:2] == before
    assert output_text(tool_result(agent)) == (
        "The context is not long enough to compress, so it remains unchanged."
    )
    assert len(model.requests) == 2  # no summary call


async def test_a_failed_compression_is_an_error_result_the_model_reads():
    agent, _model = tool_agent(
        [compress_call(), RuntimeError("summarizer down"), text_chunks("carry on")],
        compression_fallback_to_truncation=False,
    )
    msg = await agent.reply(UserMsg("user", tokens(120, "3")))
    assert msg.get_text_content() == "carry on"
    result = tool_result(agent)
    assert result.state == "error"
    assert output_text(result) == "Context compression failed: summarizer down"
    assert not agent.state.summary
    assert agent.state.context[0].get_text_content() == tokens(300, "1")
    assert_paired(agent.state.context)


async def test_compressing_away_the_running_reply_keeps_its_call_with_the_result():
    """The reply's own message (450 tokens) is larger than the reserve, so it is summarized
    too; the call in flight and its result still end up together under the reply's id."""
    agent, _model = tool_agent(
        [compress_call(tokens(450, "4")), summary_step(), text_chunks("done")]
    )
    msg = await agent.reply(UserMsg("user", tokens(120, "3")))
    assert msg.get_text_content() == "done"
    assert agent.state.summary == SUMMARY
    [reply] = agent.state.context
    assert reply.id == msg.id
    assert [b.type for b in reply.content] == ["tool_call", "tool_result", "text"]
    assert_paired(agent.state.context)
    assert tokens(450, "4") not in (reply.get_text_content() or "")


# -- the image limit ----------------------------------------------------------------------------


def image(name: str | None = None, url: str | None = None) -> DataBlock:
    if url is not None:
        return DataBlock(source=URLSource(url=url, media_type="image/png"), name=name)
    return DataBlock(source=Base64Source(data="AAAA", media_type="image/png"), name=name)


async def test_images_beyond_the_limit_are_replaced_oldest_first():
    model = ScriptedModel(context_size=1_000_000)
    agent = Agent(
        "assistant",
        "",
        model,
        context_config=ContextConfig(max_image_num=2),
        injection_config=InjectionConfig(inject_runtime_state=False),
    )
    keep1, keep2 = image("keep1"), image("keep2")
    agent.state.context = [
        UserMsg("user", [image("old.png"), TextBlock(text="look")]),
        Msg(
            "assistant",
            [
                image(url="https://img.test/a.png"),
                ToolResultBlock(id="c", name="t", output=[image("nested")], state="success"),
            ],
            "assistant",
        ),
        UserMsg("user", [keep1, keep2]),
    ]
    await agent.compress_context()
    user_first = agent.state.context[0].content[0]
    assert isinstance(user_first, TextBlock)  # user messages get a TextBlock
    assert user_first.text == (
        "<system-reminder>The image named 'old.png' is removed to free up context space."
        "</system-reminder>"
    )
    top = agent.state.context[1].content[0]
    assert isinstance(top, HintBlock)  # top level of a non-user message: a HintBlock
    assert top.hint == (
        "<system-reminder>The image is offloaded into https://img.test/a.png, you can refer "
        "to it when needed.</system-reminder>"
    )
    nested = agent.state.context[1].content[1].output[0]  # type: ignore[union-attr]
    assert isinstance(nested, TextBlock)
    assert "named 'nested' is removed" in nested.text
    assert agent.state.context[2].content == [keep1, keep2]
    assert model.requests == []


# -- tool-result truncation (local tool results only) -------------------------------------------


async def test_large_tool_result_is_truncated_in_the_context_only():
    def big() -> str:
        """A big result."""
        return tokens(50, "x")

    model = ScriptedModel([tool_call_chunks("c1", "big", "{}"), text_chunks("ok")])
    agent = Agent(
        "assistant",
        "",
        model,
        toolkit=sequential_toolkit(big),
        context_config=ContextConfig(tool_result_limit=10),
        injection_config=InjectionConfig(inject_runtime_state=False),
    )
    rec = Recorder()
    await agent.reply(UserMsg("user", "go"), on_event=rec)
    result = next(b for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock))
    assert isinstance(result.output, list)
    assert len(result.output) == 1
    assert result.output[0].text == tokens(10, "x") + TRUNCATION_NOTE  # type: ignore[union-attr]
    # The consumer still saw the whole output streamed.
    deltas = [e.delta for e in rec.events if e.type == "TOOL_RESULT_TEXT_DELTA"]
    assert deltas == [tokens(50, "x")]
    # ...and the model the truncated one.
    sent = model.requests[1].messages[-1].content
    sent_result = next(b for b in sent if isinstance(b, ToolResultBlock))
    assert sent_result.output[0].text.endswith(TRUNCATION_NOTE)  # type: ignore[union-attr]


async def test_truncation_rules():
    agent = Agent(
        "assistant",
        "",
        ScriptedModel(),
        context_config=ContextConfig(tool_result_limit=20),
        injection_config=InjectionConfig(inject_runtime_state=False),
    )
    small = ToolResultBlock(id="c", name="t", output="short", state="success")
    assert await Compressor(agent).truncate(small) is small

    as_str = ToolResultBlock(id="c", name="t", output=tokens(40, "s"), state="success")
    cut = await Compressor(agent).truncate(as_str)
    assert isinstance(cut.output, list)  # a str output is normalized to [TextBlock]
    assert cut.output[0].text == tokens(20, "s") + TRUNCATION_NOTE  # type: ignore[union-attr]
    assert as_str.output == tokens(40, "s")  # the original is untouched

    # A non-text boundary block is offloaded whole; the kept text gets the note.
    mixed = ToolResultBlock(
        id="c",
        name="t",
        output=[TextBlock(text=tokens(10, "a")), image(), TextBlock(text=tokens(10, "b"))],
        state="success",
    )
    cut = await Compressor(agent).truncate(mixed)
    assert len(cut.output) == 1
    assert cut.output[0].text == tokens(10, "a") + TRUNCATION_NOTE  # type: ignore[union-attr]
