"""Structured output (trioagent/agent/_structured.py and the loop's §3.2 step 3):
reference/agent.md §10 behaviours 12-16."""

from __future__ import annotations

import json
import logging

import pydantic
import trio
from agent_helpers import Recorder, make_agent, user

from trioagent.agent import Agent, AgentState, InjectionConfig, ReActConfig
from trioagent.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from trioagent.message import HintBlock, TextBlock, ToolCallBlock, ToolResultBlock, ToolResultState
from trioagent.serialization import dumps, loads, unstructure
from trioagent.testing import ScriptedModel, text_chunks, tool_call_chunks
from trioagent.tool import Toolkit

TOOL = "GenerateStructuredOutput"
DONE = "The required structured output is generated."


class Weather(pydantic.BaseModel):
    city: str
    temperature: float
    unit: str = "celsius"


def structured_call(call_id: str, payload: dict) -> list:
    return tool_call_chunks(call_id, TOOL, json.dumps(payload))


def tool_names(request) -> list[str]:
    return [t["function"]["name"] for t in request.tools or []]


# -- 12. a structured reply -----------------------------------------------------------------------


async def test_structured_reply_completes_with_the_output():
    agent, model = make_agent(
        [structured_call("s1", {"city": "Paris", "temperature": 21.5, "unit": "celsius"})]
    )
    rec = Recorder()
    msg = await agent.reply(user("weather?"), structured_schema=Weather, on_event=rec)
    assert msg.get_text_content() == DONE
    assert msg.finished_reason == "completed"
    assert msg.structured_output == {"city": "Paris", "temperature": 21.5, "unit": "celsius"}
    assert rec.types[-1] == "REPLY_END"
    assert rec.ends[0].finished_reason == "completed"

    dumped = unstructure(agent.state.reply_context)
    schema = Weather.model_json_schema()
    assert dumped == {
        "reply_id": agent.state.reply_id,
        "cur_iter": 1,
        "structured_schema": schema,
        "structured_output": msg.structured_output,
    }
    # The tool was offered, and the requirement hint preceded the first reasoning.
    request = model.requests[0]
    assert TOOL in tool_names(request)
    hint = request.messages[-1].content[-1]
    assert isinstance(hint, HintBlock)
    assert "required to generate structured output" in str(hint.hint)
    assert request.tool_choice is None
    # The tool's own schema has no title fields.
    tool_schema = next(t for t in request.tools if t["function"]["name"] == TOOL)
    assert "title" not in json.dumps(tool_schema["function"]["parameters"])


async def test_structured_output_is_a_copy():
    agent, _ = make_agent([structured_call("s1", {"city": "Oslo", "temperature": 1})])
    msg = await agent.reply(user(), structured_schema=Weather)
    assert msg.structured_output is not None
    msg.structured_output["city"] = "changed"
    assert agent.state.reply_context.structured_output["city"] == "Oslo"  # type: ignore[index]


async def test_text_answer_never_ends_a_structured_reply():
    agent, model = make_agent(
        [text_chunks("It is sunny."), structured_call("s1", {"city": "Rome", "temperature": 30})]
    )
    msg = await agent.reply(user(), structured_schema=Weather)
    assert msg.structured_output == {"city": "Rome", "temperature": 30.0, "unit": "celsius"}
    assert len(model.requests) == 2
    # The hint is appended before every reasoning of the structured reply.
    hints = [
        b
        for b in agent.state.context[-1].content
        if isinstance(b, HintBlock) and "structured output" in str(b.hint)
    ]
    assert len(hints) == 2


# -- 13. defaults and extra fields, in process and after a JSON round trip ---------------------


async def test_defaults_filled_and_extra_dropped_in_process():
    agent, _ = make_agent(
        [structured_call("s1", {"city": "Lima", "temperature": 18, "humidity": 80})]
    )
    msg = await agent.reply(user(), structured_schema=Weather)
    assert msg.structured_output == {"city": "Lima", "temperature": 18.0, "unit": "celsius"}


def _ask_tool() -> str:
    """A tool that needs the user's confirmation."""
    return "confirmed result"


async def test_after_state_round_trip_defaults_filled_and_extra_kept():
    toolkit = Toolkit()
    toolkit.register_function(_ask_tool)  # asks for permission: the reply parks
    agent, _ = make_agent([tool_call_chunks("c1", "_ask_tool", "{}")], toolkit=toolkit)
    parked = Recorder()
    msg = await agent.reply(user(), structured_schema=Weather, on_event=parked)
    assert msg.finished_reason is None
    assert isinstance(parked.events[-1], RequireUserConfirmEvent)

    state = loads(dumps(agent.state), AgentState)
    assert isinstance(state.reply_context.structured_schema, dict)
    toolkit2 = Toolkit()
    toolkit2.register_function(_ask_tool)
    model2 = ScriptedModel(
        [structured_call("s1", {"city": "Kyiv", "temperature": 5, "humidity": 80})]
    )
    agent2 = Agent(
        "assistant",
        "sys",
        model2,
        toolkit=toolkit2,
        state=state,
        injection_config=InjectionConfig(inject_runtime_state=False),
    )
    call = parked.events[-1].tool_calls[0]
    rec = Recorder()
    final = await agent2.reply(
        UserConfirmResultEvent(confirm_results=[ConfirmResult(confirmed=True, tool_call=call)]),
        on_event=rec,
    )
    assert "REPLY_START" not in rec.types
    assert final.get_text_content() == DONE
    # The dict schema (after reload) fills the default and keeps the extra field.
    assert final.structured_output == {
        "city": "Kyiv",
        "temperature": 5,
        "unit": "celsius",
        "humidity": 80,
    }
    assert TOOL in tool_names(model2.requests[0])


# -- 14. an invalid field type ------------------------------------------------------------------


async def test_invalid_field_type_gives_an_error_result_then_succeeds():
    agent, model = make_agent(
        [
            structured_call("s1", {"city": "Nice", "temperature": "hot"}),
            structured_call("s2", {"city": "Nice", "temperature": 25}),
        ]
    )
    msg = await agent.reply(user(), structured_schema=Weather)
    assert msg.structured_output == {"city": "Nice", "temperature": 25.0, "unit": "celsius"}
    results = [b for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock)]
    assert [r.id for r in results] == ["s1", "s2"]
    assert results[0].state == ToolResultState.ERROR
    assert isinstance(results[0].output, str)
    assert results[0].output.startswith(
        "Input validation failed for tool 'GenerateStructuredOutput': 'hot' is not of type"
    )
    assert results[1].state == ToolResultState.SUCCESS
    assert isinstance(results[1].output, list)
    assert isinstance(results[1].output[0], TextBlock)
    assert results[1].output[0].text == "Structured output generated successfully."
    assert agent.state.cur_iter == 2
    assert len(model.requests) == 2


# -- 15. iteration limits -----------------------------------------------------------------------


async def test_max_iters_forces_the_structured_tool():
    agent, model = make_agent(
        [text_chunks("thinking aloud"), structured_call("s1", {"city": "Bern", "temperature": 9})],
        react_config=ReActConfig(max_iters=1),
    )
    msg = await agent.reply(user(), structured_schema=Weather)
    assert msg.finished_reason == "completed"
    assert len(model.requests) == 2
    assert model.requests[0].tool_choice is None
    assert model.requests[1].tool_choice is not None
    assert model.requests[1].tool_choice.mode == TOOL
    hint = model.requests[1].messages[-1].content[-1]
    assert "call this tool at once" in str(hint.hint)  # type: ignore[union-attr]


async def test_grace_iterations_run_out():
    agent, model = make_agent(
        [text_chunks("one"), text_chunks("two")],
        react_config=ReActConfig(max_iters=1, structured_output_grace_iters=1),
    )
    rec = Recorder()
    msg = await agent.reply(user(), structured_schema=Weather, on_event=rec)
    assert msg.get_text_content() == "The maximum reasoning-acting iterations are exceeded."
    assert msg.finished_reason == "exceed_max_iters"
    assert msg.structured_output is None
    assert len(model.requests) == 2
    assert rec.types[-2:] == ["EXCEED_MAX_ITERS", "REPLY_END"]


# -- 16. tool lifecycle -------------------------------------------------------------------------


async def test_structured_tool_mounted_then_removed(caplog):
    agent, model = make_agent(
        [
            structured_call("s1", {"city": "A", "temperature": 1}),
            structured_call("s2", {"city": "B", "temperature": 2}),
            text_chunks("plain"),
        ]
    )
    with caplog.at_level(logging.WARNING):
        await agent.reply(user(), structured_schema=Weather)
        await agent.reply(user(), structured_schema=Weather)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert agent.toolkit.get_tool(TOOL) is None  # reply-scoped: the caller's toolkit is untouched
    assert tool_names(model.requests[0]).count(TOOL) == 1
    assert tool_names(model.requests[1]).count(TOOL) == 1  # offered again, not duplicated
    msg = await agent.reply(user())
    assert msg.get_text_content() == "plain"
    assert agent.toolkit.get_tool(TOOL) is None
    assert TOOL not in tool_names(model.requests[2])
    assert agent.state.reply_context.structured_schema is None


async def test_schema_with_a_resume_event_is_ignored_with_a_warning(caplog):
    class Other(pydantic.BaseModel):
        name: str

    toolkit = Toolkit()
    toolkit.register_function(_ask_tool)
    agent, _ = make_agent(
        [
            tool_call_chunks("c1", "_ask_tool", "{}"),
            structured_call("s1", {"city": "C", "temperature": 3}),
        ],
        toolkit=toolkit,
    )
    parked = Recorder()
    await agent.reply(user(), structured_schema=Weather, on_event=parked)
    call = parked.events[-1].tool_calls[0]
    with caplog.at_level(logging.WARNING, logger="trioagent.agent"):
        msg = await agent.reply(
            UserConfirmResultEvent(confirm_results=[ConfirmResult(confirmed=True, tool_call=call)]),
            structured_schema=Other,
        )
    assert any("structured_schema is ignored" in r.getMessage() for r in caplog.records)
    assert msg.structured_output == {"city": "C", "temperature": 3.0, "unit": "celsius"}
    assert agent.state.reply_context.structured_schema is Weather


async def test_structured_output_tool_without_a_schema_says_so():
    from trioagent.agent._structured import StructuredOutputTool

    tool = StructuredOutputTool(Weather)
    chunk = await tool.call(None, _agent_state=AgentState(), city="x", temperature=1)
    assert chunk.content[0].text == "No structured output is required for now."


async def test_text_in_the_same_response_as_the_tool_call_is_ignored():
    agent, _ = make_agent(
        [
            [
                *text_chunks("Here you go"),
                *structured_call("s1", {"city": "D", "temperature": 4}),
            ]
        ]
    )
    msg = await agent.reply(user(), structured_schema=Weather)
    assert msg.get_text_content() == DONE
    assert not any(
        isinstance(b, ToolCallBlock) for b in msg.content
    )  # the final Msg is the canned text


# -- reply-scoped tools and a shared toolkit ------------------------------------------------------


async def test_one_toolkit_shared_by_two_agents_replying_concurrently_with_structured_output(
    autojump_clock,
):
    """Each reply offers the structured-output tool to its own requests only: agent B's reply
    starting or ending never takes agent A's tool away (nor the other way round)."""
    shared = Toolkit()
    shared.register_function(_ask_tool)
    slow_a = ScriptedModel(
        [structured_call("a1", {"city": "A", "temperature": 1})], chunk_delay=1.0
    )
    slow_b = ScriptedModel(
        [text_chunks("thinking"), structured_call("b1", {"city": "B", "temperature": 2})],
        chunk_delay=0.3,
    )
    agent_a = Agent("a", model=slow_a, toolkit=shared)
    agent_b = Agent("b", model=slow_b, toolkit=shared)
    results: dict[str, object] = {}

    async def run(agent: Agent, key: str) -> None:
        msg = await agent.reply(user(), structured_schema=Weather)
        results[key] = msg.structured_output

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, agent_a, "a")
        nursery.start_soon(run, agent_b, "b")
    assert results == {
        "a": {"city": "A", "temperature": 1.0, "unit": "celsius"},
        "b": {"city": "B", "temperature": 2.0, "unit": "celsius"},
    }
    assert shared.get_tool(TOOL) is None  # the caller's toolkit was never written to
    assert [t.name for t in shared.tool_groups[0].tools] == ["_ask_tool"]
    for request in [*slow_a.requests, *slow_b.requests]:
        assert tool_names(request).count(TOOL) == 1
